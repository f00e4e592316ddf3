//! autoprep: a CQL proxy that runs beside a legacy application and forwards its traffic to a
//! Cassandra or ScyllaDB node.
//!
//! # Layout
//! - [`config`]: flags and `AUTOPREP_*` environment variables.
//! - [`admin`]: the admin HTTP server (`/metrics`, `/live`, `/ready`, `/shapes`) on its own
//!   thread.
//! - [`context`]: what all sessions share (cache, metrics, shapes, encoder options).
//! - [`contact_points`]: the upstream nodes and the choice of one per client connection.
//! - [`metrics`]: process-wide counters and their Prometheus text format.
//! - [`rewrite`]: the auto-prepare decision for one QUERY and the EXECUTE it becomes.
//! - [`schema_agreement`]: holds schema-change answers until every node has the new schema.
//! - [`server`]: the listener; one [`session`] per client connection.
//! - [`session`]: the two readers of a connection and the upstream stream-id mapping.
//! - [`shapes`]: per-statement-shape statistics.
//! - [`streams`]: the upstream stream-id allocator.
//! - [`topology`]: rewriting of topology answers, events and SUPPORTED so drivers stay on the
//!   proxy.
//! - [`writer`]: per-socket writer tasks (batching, v5 framing).
//! - [`protocol_error`]: ERROR frames for malformed client input.
#![forbid(unsafe_code)]

pub mod admin;
pub mod config;
pub mod contact_points;
pub mod context;
pub mod metrics;
pub mod protocol_error;
pub mod rewrite;
pub mod schema_agreement;
pub mod server;
pub mod session;
pub mod shapes;
pub mod streams;
pub mod topology;
pub mod writer;
