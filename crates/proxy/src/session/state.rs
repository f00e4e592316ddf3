//! The state a connection's readers change under its lock: the stream table, the keyspace and
//! its epochs, the handshake and event registrations kept for replica connections and a new
//! home, and the proxy's own PREPAREs a `USE` waits for.

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
    /// The client's handshake, replayed to open replica connections (see [`replica`]) and a
    /// new home connection when the home node fails (see `super::rehome`).
    pub(super) handshake: replica::Handshake,
    /// The bodies of the client's REGISTER requests (which events it asked for), replayed on
    /// a new home connection.
    pub(super) registered: Vec<bytes::Bytes>,
    /// The proxy's own PREPAREs in flight whose keyspace the server takes from the
    /// connection (see `Conn::hold_use`).
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
    /// The home connection is gone: takes the requests in flight on it, closes its stream
    /// table (every later allocation fails: see [`StreamTable::closed`]), and gives the state
    /// a new home connection starts from: what outlives a home (the keyspace, the handshake,
    /// the registered events, whether the client had the `USE` warning), a fresh table of
    /// `capacity` ids, nothing in flight. The keyspace epoch moves on: a PREPARE of the
    /// proxy's sent toward the old home and answered by the new one is not used (it is
    /// proven against neither).
    pub(super) fn hand_over(&mut self, capacity: usize) -> (Vec<Pending>, State) {
        let table = std::mem::replace(&mut self.streams, StreamTable::closed());
        let in_flight = table.into_pending().collect();
        // What was in flight is answered by the caller: nothing waits on this state any more.
        self.use_in_flight = 0;
        self.exposed_prepares = 0;
        let next = State {
            streams: StreamTable::with_capacity(capacity),
            lz4_requested: self.lz4_requested,
            keyspace: self.keyspace.clone(),
            keyspace_epoch: self.keyspace_epoch + 1,
            handshake: self.handshake.clone(),
            registered: self.registered.clone(),
            use_warning_given: self.use_warning_given,
            ..State::default()
        };
        (in_flight, next)
    }

    /// How many senders waiting for an upstream id to wake once `released` ids were released:
    /// one for each id, while any waits.
    pub(super) fn senders_to_wake(&self, released: u32) -> u32 {
        released.min(self.id_waiters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_home_keeps_what_outlives_the_old_one() {
        let mut old = State {
            streams: StreamTable::with_capacity(4),
            keyspace: Some("ks".into()),
            keyspace_epoch: 3,
            use_in_flight: 1,
            exposed_prepares: 2,
            use_warning_given: true,
            registered: vec![bytes::Bytes::from_static(b"events")],
            ..State::default()
        };
        old.handshake.complete = true;
        old.streams.allocate(Pending::client(7)).unwrap();
        let (in_flight, next) = old.hand_over(16);
        assert_eq!(in_flight, [Pending::client(7)]);
        assert!(old.streams.is_closed());
        assert_eq!((old.use_in_flight, old.exposed_prepares), (0, 0));
        assert_eq!(next.keyspace.as_deref(), Some("ks"));
        assert_eq!(next.keyspace_epoch, 4);
        assert!(next.handshake.complete && next.use_warning_given);
        assert_eq!(next.registered, old.registered);
        assert_eq!((next.use_in_flight, next.exposed_prepares), (0, 0));
        assert_eq!(next.streams.in_use(), 0);
        assert!(!next.streams.is_closed());
    }
}
