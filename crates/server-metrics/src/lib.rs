//! The servers' own CPU, read from each node's Prometheus metrics endpoint: what autoprep's
//! estimate of server CPU saved (`crates/proxy/src/saving`) and the savings benchmark measure.
//!
//! # Layout
//! - [`exposition`]: the Prometheus text format (0.0.4; OpenMetrics text parses the same way).
//! - [`reading`]: a node's CPU time and statement counters, Cassandra's through the jmx_exporter
//!   and ScyllaDB's own, and their change between two readings.
//! - [`endpoint`]: where a node's endpoint is (a URL, or a template with `{host}`), and one GET
//!   of it over plain HTTP/1.1 with a time and size bound.
//!
//! The crate is sans-policy: it never retries or logs; the caller decides what a failed reading
//! means.
#![forbid(unsafe_code)]

pub mod endpoint;
pub mod exposition;
pub mod reading;

pub use endpoint::{Endpoint, ScrapeError, UrlTemplate};
pub use exposition::{Exposition, ParseError, Series};
pub use reading::{total, NodeDelta, NodeReading, ReadingError, Server};
