//! autoprep: a CQL proxy that runs beside a legacy application and forwards its traffic to a
//! Cassandra or ScyllaDB node.
//!
//! # Layout
//! - [`cluster`]: the cluster's ring and replicas as routing sees them.
//! - [`config`]: the TOML file, `AUTOPREP_*` environment variables and flags.
//! - [`admin`]: the admin HTTP server (`/metrics`, `/live`, `/ready`, `/shapes`) on its own
//!   thread.
//! - [`control`]: the control group's response-time comparison.
//! - [`context`]: what all sessions share (the configuration, the rewrite's parts, metrics,
//!   topology, TLS); only the session, the server, the admin server and the reload read it
//!   whole: every other module receives the parts it uses, and the import graph has no loops
//!   (`tests/layering.rs`).
//! - [`contact_points`]: the upstream nodes and the choice of one per client connection.
//! - [`lifecycle`]: connection admission, and the drain SIGTERM / SIGINT start.
//! - [`handover`]: client sockets and their state passed to the next process at a drain.
//! - [`latency`]: a lock-free log-linear histogram of response times (per-shape percentiles).
//! - [`limit`]: the answer a client beyond the connection limit gets.
//! - [`log_filter`]: the log filter at run time (`PUT /log`, a reloaded `log` option).
//! - [`log_json`]: log lines as JSON objects (`--log-format json`).
//! - [`metrics`]: process-wide counters and their Prometheus text format.
//! - [`otel`]: OpenTelemetry request spans, sampled at the answer and exported over OTLP.
//! - [`reload`]: SIGHUP and changed TLS files: what changes without a restart.
//! - [`replica`]: a session's connections to the replicas it routes to.
//! - [`rewrite`]: the auto-prepare decision for one QUERY or BATCH and the EXECUTE it
//!   becomes, PREPAREs of statements with literals inline answered from their shape
//!   ([`rewrite::literal_prepare`]), and what answers teach the rewrite.
//! - [`schema_agreement`]: holds schema-change answers until every node has the new schema.
//! - [`server`]: the listener; one [`session`] per client connection.
//! - [`session`]: one client connection: each request classified, routed and sent; each
//!   answer dispatched on what its upstream stream id was pending for.
//! - [`socket`]: a connection's socket, plain TCP or TLS, and its halves.
//! - [`tls`]: TLS toward the clients, PEM loading, and reloading either side's material.
//! - [`upstream`]: the connection to the upstream node (TCP, then TLS when on).
//! - [`saving`]: the estimate of server CPU saved: switchback windows, the nodes' CPU read
//!   around them, the trials and their interval.
//! - [`shapes`]: per-statement-shape statistics.
//! - [`streams`]: the upstream stream-id allocator.
//! - [`topology`]: rewriting of topology answers, events and SUPPORTED so drivers stay on the
//!   proxy.
//! - [`trace_context`]: a client's W3C `traceparent` (custom payload or SQLCommenter comment).
//! - [`writer`]: an outbox per socket (one write per read handled, v5 framing).
//! - [`protocol_error`]: ERROR frames for malformed client input.
#![forbid(unsafe_code)]

pub mod admin;
pub mod cluster;
pub mod config;
pub mod contact_points;
pub mod context;
pub mod control;
pub mod flavor;
pub mod handover;
pub mod latency;
pub mod lifecycle;
pub mod limit;
pub mod log_filter;
pub mod log_json;
pub mod metrics;
pub mod otel;
pub mod prepare_proof;
pub mod protocol_error;
pub mod reasons;
pub mod reload;
pub mod replica;
pub mod rewrite;
pub mod saving;
pub mod schema_agreement;
pub mod server;
pub mod session;
pub mod shapes;
pub mod socket;
pub mod stamp;
#[cfg(test)]
mod stand_in;
pub mod streams;
pub mod tls;
pub mod topology;
pub mod trace_context;
pub mod upstream;
pub mod wire;
pub mod writer;
