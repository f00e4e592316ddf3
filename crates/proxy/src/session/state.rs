//! The state a connection's readers change under its lock: the stream table, the keyspace and
//! its epochs, the handshake kept for replica connections, and the proxy's own PREPAREs a
//! `USE` waits for.

use super::pending::Pending;

use crate::replica;
use crate::streams::StreamTable;

/// State both readers of a connection share.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) streams: StreamTable<Pending>,
    /// Senders waiting for a free upstream stream id (see `Conn::send`): only then does a
    /// response's release signal `Conn::freed`.
    pub(super) id_waiters: u32,
    /// STARTUP asked for LZ4 (used for v5 segment compression).
    pub(super) lz4_requested: bool,
    /// The keyspace set by the last successful `USE` on this connection.
    pub(super) keyspace: Option<std::sync::Arc<str>>,
    /// `USE` requests forwarded and not answered yet: while any is, the keyspace a statement
    /// runs in is not known, and nothing is rewritten or prepared.
    pub(super) use_in_flight: u32,
    /// Counts the `USE` requests forwarded: a PREPARE answered after another `USE` was sent
    /// may have run in either keyspace (see [`crate::prepare_proof`]).
    pub(super) keyspace_epoch: u64,
    /// The client's handshake, replayed to open replica connections (see [`replica`]).
    pub(super) handshake: replica::Handshake,
    /// The proxy's own PREPAREs in flight whose keyspace the server takes from the
    /// connection (see `send::hold_use`).
    pub(super) exposed_prepares: u32,
    /// The client was given Cassandra's once-per-connection warning about `USE` with
    /// prepared statements (by the server, or by the proxy answering a PREPARE: see
    /// [`crate::rewrite::literal_prepare`]).
    pub(super) use_warning_given: bool,
    /// [otel hook] The requests in flight with what their spans need, by client stream id
    /// (empty while tracing is off; see `crate::otel::Requests`).
    pub(super) traces: crate::otel::Requests,
}

impl State {
    /// How many senders waiting for an upstream id to wake once `released` ids were released:
    /// one for each id, while any waits.
    pub(super) fn senders_to_wake(&self, released: u32) -> u32 {
        released.min(self.id_waiters)
    }
}
