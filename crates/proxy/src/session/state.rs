//! The state a connection's readers share: the wire state negotiated (compression, v5
//! framing), the keyspace and its epochs, the stream table, the replica links and both
//! outboxes.

use super::pending::{Epochs, Pending};

use crate::context::Context;
use crate::replica;
use crate::streams::StreamTable;
use crate::writer::Outbox;
use autoprep_protocol::compression::Compression;

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// State both readers of a connection share.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) streams: StreamTable<Pending>,
    /// Senders waiting for a free upstream stream id (see `send::allocate_in`): only then does
    /// a response's release signal `Shared::freed`.
    pub(super) id_waiters: u32,
    /// STARTUP asked for LZ4 (used for v5 segment compression).
    pub(super) lz4_requested: bool,
    /// v3/v4 body compression negotiated by STARTUP.
    pub(super) compression: Option<Compression>,
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

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Signalled when an upstream stream id is released while a sender waits for one.
    pub(super) freed: Notify,
    /// Signalled when the last exposed PREPARE of the proxy's is answered (see `send::hold_use`).
    pub(super) prepares_answered: Notify,
    /// The upstream node (contact point index): the cache's node id for this connection.
    pub(super) node: u32,
    /// The address the client connected to (advertised to it when the proxy listens on a
    /// wildcard address; see [`crate::topology`]).
    pub(super) local: Option<std::net::SocketAddr>,
    /// Cancelled when the drain's grace period ends: the client reader stops.
    pub(super) closing: CancellationToken,
    /// Cancelled once the client reader has stopped: the upstream reader ends as soon as
    /// nothing is in flight.
    pub(super) client_stopped: CancellationToken,
    /// Set once the server answered READY or AUTH_SUCCESS: the connection is authenticated.
    /// Only then are QUERYs rewritten and the proxy's own PREPAREs sent (before, the server
    /// would refuse them and the shape would be marked as failing for every connection).
    pub(super) ready: AtomicBool,
    /// Set once the client side is framed (v5), with whether segments are LZ4-compressed (the
    /// upstream reader sets it before the client can see READY; the client reader looks at it
    /// before each envelope without taking the lock).
    pub(super) client_framing: std::sync::OnceLock<bool>,
    /// The upstream node's address (what `system.local` on this connection describes).
    pub(super) home: Option<std::net::SocketAddr>,
    /// Connections to the replicas this connection routes to.
    pub(super) links: replica::Links,
    /// The client's outbox and the home connection's (for the replica connections' readers).
    pub(super) client: Outbox,
    pub(super) upstream: Outbox,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another reader panicked; the state is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes `n` senders waiting for an upstream id (see [`State::senders_to_wake`]).
    pub(super) fn wake_senders(&self, n: u32) {
        for _ in 0..n {
            self.freed.notify_one();
        }
    }
}

impl State {
    /// How many senders waiting for an upstream id to wake once `released` ids were released:
    /// one for each id, while any waits.
    pub(super) fn senders_to_wake(&self, released: u32) -> u32 {
        released.min(self.id_waiters)
    }
}

impl Epochs {
    /// The epochs as they stand.
    pub(super) fn now(ctx: &Context, shared: &Shared) -> Epochs {
        Epochs {
            keyspace: shared.lock().keyspace_epoch,
            schema: ctx.rewriter.cache.schema_epoch(),
        }
    }
}
