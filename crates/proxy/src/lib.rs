//! autoprep: a CQL proxy that runs beside a legacy application and forwards its traffic to a
//! Cassandra or ScyllaDB node.
//!
//! # Layout
//! - [`config`]: flags and `AUTOPREP_*` environment variables.
//! - [`context`]: what all sessions share (cache, metrics, encoder options).
//! - [`rewrite`]: the auto-prepare decision for one QUERY and the EXECUTE it becomes.
//! - [`server`]: the listener; one [`session`] per client connection.
//! - [`session`]: the two readers of a connection and the upstream stream-id mapping.
//! - [`streams`]: the upstream stream-id allocator.
//! - [`writer`]: per-socket writer tasks (batching, v5 framing).
//! - [`protocol_error`]: ERROR frames for malformed client input.
#![forbid(unsafe_code)]

pub mod config;
pub mod context;
pub mod metrics;
pub mod protocol_error;
pub mod rewrite;
pub mod server;
pub mod session;
pub mod streams;
pub mod writer;
