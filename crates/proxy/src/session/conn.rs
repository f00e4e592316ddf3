//! The connection handle: what one client connection's session uses of the proxy (the rewrite,
//! the cluster view, the topology, the metrics, upstream TLS and a few settings, never the
//! whole [`Context`]), the connection's own state, and the **one send path** home
//! ([`Conn::send`]: an upstream stream id taken or reused, what it is pending for recorded,
//! the frame written through [`Conn::push`]), with [`Conn::answer`] toward the client.
//!
//! A `Conn` is one home: its outbox, node id and address are plain fields, read without a
//! lock on every request. When the home node fails, the session opens a new home and hands the
//! connection over to a new `Conn` (see `super::rehome`): the old one's stream table is closed,
//! and whatever is still sent through it (by the client reader until its next read, by a
//! replica connection's reader) goes on to its successor ([`Conn::send`]).

use super::end::End;
use super::pending::{Epochs, Pending};
use super::state::State;

use crate::cluster::ClusterView;
use crate::context::Context;
use crate::control::Group;
use crate::metrics::Metrics;
use crate::replica;
use crate::rewrite::Rewriter;
use crate::shapes::ShapeRef;
use crate::stamp::Stamp;
use crate::topology::Topology;
use crate::upstream::UpstreamTls;
use crate::wire::{self, Negotiated, Wire};
use crate::writer::{Out, Outbox};
use bytes::BytesMut;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The settings a session reads (copied from the configuration when the connection opens).
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    /// `--rewrite`.
    pub(super) rewrite: bool,
    /// `--prepare-literals`.
    pub(super) prepare_literals: bool,
    /// `--schema-agreement-wait-ms`.
    pub(super) schema_agreement_wait_ms: u64,
    /// `--max-frame-bytes`.
    pub(super) max_frame: usize,
}

impl Settings {
    pub(super) fn of(cfg: &crate::config::Config) -> Settings {
        Settings {
            rewrite: cfg.rewrite,
            prepare_literals: cfg.prepare_literals,
            schema_agreement_wait_ms: cfg.schema_agreement_wait_ms,
            max_frame: cfg.max_frame_bytes,
        }
    }
}

/// Which upstream stream id a request goes under.
#[derive(Debug, Clone, Copy)]
pub(super) enum Id {
    /// A free one, waiting while every id is in flight.
    Take,
    /// The id of an answer just released (a replay, the next step of the proxy's own
    /// requests): the upstream reader, whose answers free ids, never waits for one.
    Reuse(i16),
}

/// One client connection: the parts of the proxy it uses and the state its readers share.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) rewriter: Arc<Rewriter>,
    pub(super) cluster: Arc<ClusterView>,
    pub(super) topology: Arc<Topology>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) upstream_tls: Option<UpstreamTls>,
    /// Request spans (see [`crate::otel`]); off, it costs a flag read per request.
    pub(super) tracing: Arc<crate::otel::Tracing>,
    /// How many requests' facts `state.traces` holds (see [`Conn::any_noted`]).
    noted: Arc<std::sync::atomic::AtomicUsize>,
    pub(super) settings: Settings,
    /// The compression STARTUP negotiated (see [`Conn::wire`]).
    negotiated: Negotiated,
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
    /// Connections to the replicas this connection routes to (they outlive a home: shared
    /// with the successor).
    pub(super) links: Arc<replica::Links>,
    /// The client's outbox and the home connection's.
    pub(super) client: Outbox,
    pub(super) upstream: Outbox,
    /// Set once the home is gone: the `Conn` of the new home, or `None` when the session
    /// ended without one (see [`Conn::hand_over`]).
    next: OnceLock<Option<Arc<Conn>>>,
    /// Signalled when `next` is set.
    handed: Notify,
}

/// Where a connection is: what [`Conn::open`] needs besides the proxy's parts.
pub(super) struct Place {
    pub(super) node: u32,
    pub(super) local: Option<std::net::SocketAddr>,
    pub(super) home: Option<std::net::SocketAddr>,
    pub(super) client: Outbox,
    pub(super) upstream: Outbox,
}

impl Conn {
    /// The handle of a connection opened at `place`, with the parts of `ctx` a session uses;
    /// `handable`: its client connection can be handed over at a drain (plain TCP, see
    /// [`crate::handover`]).
    pub(super) fn open(ctx: &Context, place: Place, handable: bool) -> Conn {
        let state = State {
            streams: crate::streams::StreamTable::with_capacity(ctx.cfg.upstream_streams),
            ..State::default()
        };
        Conn {
            noted: state.traces.noted(),
            rewriter: ctx.rewriter.clone(),
            cluster: ctx.cluster.clone(),
            topology: ctx.topology.clone(),
            metrics: ctx.metrics.clone(),
            upstream_tls: ctx.upstream_tls.clone(),
            tracing: ctx.tracing.clone(),
            settings: Settings::of(&ctx.cfg),
            negotiated: Negotiated::default(),
            state: Mutex::new(state),
            freed: Notify::new(),
            prepares_answered: Notify::new(),
            node: place.node,
            local: place.local,
            closing: ctx.lifecycle.session_token(handable),
            client_stopped: CancellationToken::new(),
            ready: AtomicBool::new(false),
            client_framing: std::sync::OnceLock::new(),
            home: place.home,
            links: Arc::default(),
            client: place.client,
            upstream: place.upstream,
            next: OnceLock::new(),
            handed: Notify::new(),
        }
    }

    /// The handle of the new home at `place` of this connection, whose home failed: the same
    /// parts of the proxy, client, replica connections and tokens, with `state` (see
    /// [`State::hand_over`]).
    pub(super) fn rehomed(&self, place: Place, state: State) -> Conn {
        let negotiated = Negotiated::default();
        negotiated.set(self.negotiated.get());
        let client_framing = std::sync::OnceLock::new();
        if let Some(&lz4) = self.client_framing.get() {
            let _ = client_framing.set(lz4);
        }
        Conn {
            noted: state.traces.noted(),
            rewriter: self.rewriter.clone(),
            cluster: self.cluster.clone(),
            topology: self.topology.clone(),
            metrics: self.metrics.clone(),
            upstream_tls: self.upstream_tls.clone(),
            tracing: self.tracing.clone(),
            settings: self.settings,
            negotiated,
            state: Mutex::new(state),
            freed: Notify::new(),
            prepares_answered: Notify::new(),
            node: place.node,
            local: place.local,
            closing: self.closing.clone(),
            client_stopped: self.client_stopped.clone(),
            ready: AtomicBool::new(self.ready.load(std::sync::atomic::Ordering::Acquire)),
            client_framing,
            home: place.home,
            links: self.links.clone(),
            client: place.client,
            upstream: place.upstream,
            next: OnceLock::new(),
            handed: Notify::new(),
        }
    }

    /// This home is over: `next` (the new home) takes what is still sent through it;
    /// `None`, the session ends. Set once.
    pub(super) fn hand_over(&self, next: Option<Arc<Conn>>) {
        let _ = self.next.set(next);
        self.handed.notify_waiters();
    }

    /// The new home, once this one was handed over to it (one atomic load: the client reader
    /// looks at each read).
    #[inline]
    pub(super) fn moved_to(&self) -> Option<&Arc<Conn>> {
        self.next.get().and_then(Option::as_ref)
    }

    /// The new home, waiting while it is being opened; `None` when the session ended.
    async fn successor(&self) -> Option<Arc<Conn>> {
        loop {
            let handed = self.handed.notified();
            tokio::pin!(handed);
            handed.as_mut().enable();
            if let Some(next) = self.next.get() {
                return next.clone();
            }
            handed.await;
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another reader panicked; the state is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether any request's facts are noted for its span, read without the lock: while none
    /// is (tracing off, or none of the requests in flight sampled), nothing has to be taken
    /// or cleared under it.
    #[inline]
    pub(super) fn any_noted(&self) -> bool {
        self.noted.load(std::sync::atomic::Ordering::Acquire) != 0
    }

    /// The tracer while tracing is on (read once for a run of requests).
    #[inline]
    pub(super) fn traced(&self) -> Option<&crate::otel::Tracing> {
        self.tracing.enabled().then_some(&*self.tracing)
    }

    /// The facts noted for the request on client stream `stream`, now answered.
    pub(super) fn take_facts(&self, stream: i16) -> Option<crate::otel::Facts> {
        if !self.any_noted() {
            return None;
        }
        self.lock().traces.take(stream)
    }

    /// What reading this connection's bodies needs (no lock taken).
    pub(super) fn wire(&self) -> Wire {
        self.negotiated.wire(self.settings.max_frame)
    }

    /// STARTUP negotiated `compression` (see [`Negotiated`]).
    pub(super) fn negotiate(
        &self,
        compression: Option<autoprep_protocol::compression::Compression>,
    ) {
        self.negotiated.set(compression);
    }

    /// Wakes `n` senders waiting for an upstream id (see [`State::senders_to_wake`]).
    pub(super) fn wake_senders(&self, n: u32) {
        for _ in 0..n {
            self.freed.notify_one();
        }
    }

    /// The epochs as they stand (see [`crate::prepare_proof`]).
    pub(super) fn epochs(&self) -> Epochs {
        Epochs {
            keyspace: self.lock().keyspace_epoch,
            schema: self.rewriter.cache.schema_epoch(),
        }
    }

    /// An upstream id for `pending` taken now, stamped `at` (the express lanes: a request that
    /// waits for nothing); `None` gives `pending` and `shape` back when every id is in flight.
    #[allow(clippy::type_complexity)]
    pub(super) fn try_take(
        &self,
        pending: Pending,
        shape: Option<ShapeRef>,
        group: Group,
        at: Stamp,
    ) -> Result<i16, (Pending, Option<ShapeRef>)> {
        self.lock().streams.allocate_at(pending, shape, group, at)
    }

    /// The one send path home: `frame` under an upstream id (taken, or reused: see [`Id`])
    /// recorded as pending for `pending` (tagged with the statement's `shape` and control
    /// `group` for the response-time metrics), then written.
    ///
    /// The id is taken and the frame handed to the outbox when this is called; the future
    /// only waits, for a free id or for room in the outbox. Not an `async fn`: the common
    /// request, which waits for neither, then moves no arguments into a future of its own
    /// (counted by `scripts/hop-icount.sh`).
    pub(super) fn send(
        &self,
        frame: BytesMut,
        pending: Pending,
        shape: Option<ShapeRef>,
        group: Group,
        id: Id,
    ) -> impl Future<Output = Result<(), End>> + Send + '_ {
        let taken = match id {
            Id::Take => self.lock().streams.allocate_tagged(pending, shape, group),
            Id::Reuse(up) => {
                let mut st = self.lock();
                if st.streams.is_closed() {
                    Err((pending, shape))
                } else {
                    st.streams.allocate_exact(up, pending);
                    Ok(up)
                }
            }
        };
        let now = match taken {
            Ok(up) => Ok(self.push(frame, up)),
            Err(back) => Err((back, frame)),
        };
        async move {
            match now {
                Ok(pushed) => pushed.await,
                Err(((pending, shape), frame)) => match self.take_id(pending, shape, group).await {
                    Ok(up) => self.push(frame, up).await,
                    Err((pending, shape)) => self.forward(frame, pending, shape, group).await,
                },
            }
        }
    }

    /// Sends what was to go through this home, which is gone, through its successor once it
    /// is open (it never reached the old node). The proxy's own reads for the cluster view
    /// stop (their refresh describes the old node: it is abandoned); the proxy's PREPARE of a
    /// shape is abandoned on the old node (the new one proves nothing for it: see
    /// [`State::hand_over`]). A `USE` waits its turn there as on any home (see
    /// [`Conn::hold_use`]). Boxed: it sends through another `Conn`'s `send`, and it is rare.
    fn forward(
        &self,
        frame: BytesMut,
        pending: Pending,
        shape: Option<ShapeRef>,
        group: Group,
    ) -> Pin<Box<dyn Future<Output = Result<(), End>> + Send + '_>> {
        Box::pin(async move {
            if let Pending::ClusterRead(_) = pending {
                self.cluster.abandon_refresh();
                return Ok(());
            }
            if let Pending::Prepare { hash, .. } = &pending {
                self.rewriter.cache.abandoned(self.node, *hash);
            }
            // The session ended: the client connection closes with it.
            let next = self.successor().await.ok_or(End::HomeGone)?;
            if pending.is_use() {
                next.hold_use().await;
            }
            {
                let mut st = next.lock();
                if pending.is_use() {
                    st.use_in_flight += 1;
                    st.keyspace_epoch += 1;
                }
                if pending.is_exposed_prepare() {
                    st.exposed_prepares += 1;
                }
            }
            let sent = next.send(frame, pending, shape, group, Id::Take).await;
            next.upstream.flush();
            sent
        })
    }

    /// Holds a client's `USE` until every PREPARE of the proxy's own on the connection whose
    /// keyspace the server takes from the connection has been answered.
    ///
    /// Cassandra reads a PREPARE's keyspace from the connection twice: once to parse the
    /// statement (`QueryProcessor.parseAndPrepare` → `setKeyspace(clientState)`) and once to file
    /// it (`QueryProcessor.prepare` → `storePreparedStatement(queryString,
    /// clientState.getRawKeyspace(), prepared)`, 5.0.6). The server runs a connection's requests
    /// concurrently, so a `USE b` that lands between the two files the statement parsed in `a`
    /// under the id of `b` (md5 of `b` + text), replacing the statement of `b` the proxy may already
    /// have proven and cached there: the proxy's next EXECUTE of `b`'s id then writes into `a`
    /// (seen in the generative test, v4). The proof of the answer cannot see this (the damage is to
    /// another id's entry on the server), so the `USE` must never run beside such a PREPARE. On v5
    /// the proxy names the keyspace in its PREPARE (`PrepareMessage` clones the client state with
    /// it), which is immune. The client's own PREPAREs are its own affair, as they are directly.
    pub(super) async fn hold_use(&self) {
        let mut held = false;
        loop {
            let answered = self.prepares_answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            if self.lock().exposed_prepares == 0 {
                break;
            }
            if !held {
                held = true;
                Metrics::inc(&self.metrics.uses_held);
            }
            // The PREPAREs may still sit in the outbox.
            self.upstream.flush();
            answered.await;
        }
    }

    /// The write tail of every request home: `frame` under upstream id `up`, into the home
    /// connection's outbox (when called; the future waits for room, see [`Outbox::send`]).
    pub(super) fn push(
        &self,
        mut frame: BytesMut,
        up: i16,
    ) -> impl Future<Output = Result<(), End>> + Send + '_ {
        wire::set_stream(&mut frame, up);
        let sent = self.upstream.send(Out::Envelope(frame));
        // Its id is in the table: if the home is gone, its end answers it.
        async move { sent.await.map_err(|_| End::HomeGone) }
    }

    /// An answer to the client (its stream id already set), into its outbox when called.
    pub(super) fn answer(
        &self,
        frame: BytesMut,
    ) -> impl Future<Output = Result<(), End>> + Send + '_ {
        let sent = self.client.send(Out::Envelope(frame));
        async move { sent.await.map_err(|_| End::WriterGone) }
    }

    /// Takes an upstream stream id for `pending`, waiting while every id is in flight. Before
    /// waiting, what was pushed toward the server is written: its answers are what frees ids.
    /// `Err` gives `pending` back when the home is gone (its table closed).
    #[allow(clippy::type_complexity)]
    async fn take_id(
        &self,
        mut pending: Pending,
        mut shape: Option<ShapeRef>,
        group: Group,
    ) -> Result<i16, (Pending, Option<ShapeRef>)> {
        let mut waiting = false;
        loop {
            {
                let mut st = self.lock();
                if waiting {
                    st.id_waiters -= 1;
                }
                match st.streams.allocate_tagged(pending, shape, group) {
                    Ok(id) => return Ok(id),
                    Err(back) => (pending, shape) = back,
                }
                if st.streams.is_closed() {
                    return Err((pending, shape));
                }
                // Counted under the lock the allocation failed under: every release after it
                // sees the count and signals `freed` (whose permit waits if nobody listens yet).
                st.id_waiters += 1;
                waiting = true;
            }
            // All ids are in flight: wait for a response to free one (backpressure).
            let freed = self.freed.notified();
            self.upstream.flush();
            freed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use autoprep_protocol::envelope::{Direction, Envelope, Opcode, ProtocolVersion};
    use tokio::net::{TcpListener, TcpStream};

    /// A connection handle whose home outbox writes to a socket the test reads, with `ids`
    /// upstream stream ids.
    async fn conn(ids: usize) -> (Arc<Conn>, TcpStream) {
        let mut cfg = Config::for_upstream("127.0.0.1:9");
        cfg.upstream_streams = ids;
        let ctx = Context::new(cfg).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (ours, theirs) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (_, wr) = crate::socket::into_split(crate::socket::plain(ours.unwrap()));
        let (upstream, task) = Outbox::new(wr, None);
        tokio::spawn(task);
        let (client, _) = Outbox::new(
            crate::socket::into_split(crate::socket::plain(
                TcpStream::connect(addr).await.unwrap(),
            ))
            .1,
            None,
        );
        let place = Place {
            node: 0,
            local: None,
            home: None,
            client,
            upstream,
        };
        (Arc::new(Conn::open(&ctx, place, true)), theirs.unwrap().0)
    }

    fn query() -> BytesMut {
        Envelope::request_frame(ProtocolVersion::V4, Opcode::QUERY, b"\0\0\0\x01x\0\x01\0")
    }

    /// The stream id of the next frame written home.
    async fn written_stream(sock: &mut TcpStream) -> i16 {
        let mut frames = crate::wire::FrameReader::new(Direction::Request, 1 << 20);
        loop {
            if let Some(env) = frames.decode().unwrap() {
                return env.header().stream.0;
            }
            assert!(frames.read_from(sock).await.unwrap() > 0);
        }
    }

    #[tokio::test]
    async fn send_takes_an_id_records_what_it_is_for_and_writes_under_it() {
        let (conn, mut home) = conn(4).await;
        conn.send(query(), Pending::client(9), None, Group::Other, Id::Take)
            .await
            .unwrap();
        conn.upstream.flush();
        let up = written_stream(&mut home).await;
        let (pending, _) = conn.lock().streams.release_tagged(up);
        assert_eq!(pending, Some(Pending::client(9)));
    }

    #[tokio::test]
    async fn send_reuses_the_id_it_is_given() {
        let (conn, mut home) = conn(4).await;
        conn.send(
            query(),
            Pending::client(3),
            None,
            Group::Other,
            Id::Reuse(2),
        )
        .await
        .unwrap();
        conn.upstream.flush();
        assert_eq!(written_stream(&mut home).await, 2);
        assert_eq!(conn.lock().streams.release(2), Some(Pending::client(3)));
    }

    #[tokio::test]
    async fn the_express_lane_gives_back_what_it_cannot_take() {
        let (conn, _home) = conn(1).await;
        let now = Stamp::now();
        assert!(conn
            .try_take(Pending::client(1), None, Group::Other, now)
            .is_ok());
        let back = conn.try_take(Pending::client(2), None, Group::Other, now);
        assert_eq!(back.err().map(|(p, _)| p), Some(Pending::client(2)));
    }

    #[tokio::test]
    async fn a_sender_waits_for_a_free_id() {
        let (conn, mut home) = conn(1).await;
        conn.send(query(), Pending::client(1), None, Group::Other, Id::Take)
            .await
            .unwrap();
        let waiting = {
            let conn = conn.clone();
            tokio::spawn(async move {
                conn.send(query(), Pending::client(2), None, Group::Other, Id::Take)
                    .await
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let first = written_stream(&mut home).await;
        // The answer to the first releases its id, and wakes the waiting sender.
        let wake = {
            let mut st = conn.lock();
            st.streams.release(first);
            st.senders_to_wake(1)
        };
        assert_eq!(wake, 1);
        conn.wake_senders(wake);
        waiting.await.unwrap().unwrap();
        assert_eq!(conn.lock().streams.release(first), Some(Pending::client(2)));
    }

    #[tokio::test]
    async fn what_is_sent_through_a_home_that_is_gone_goes_to_the_new_home() {
        let (old, _gone) = conn(4).await;
        let (next, mut new_home) = conn(4).await;
        let (in_flight, _) = old.lock().hand_over(4);
        assert!(in_flight.is_empty());
        // Sent while the new home is being opened: it waits for it.
        let sending = |pending: Pending| {
            let old = old.clone();
            tokio::spawn(async move {
                let frame = query();
                old.send(frame, pending, None, Group::Other, Id::Take).await
            })
        };
        let request = sending(Pending::Client {
            stream: 5,
            use_keyspace: true,
        });
        let view_read = sending(Pending::ClusterRead(crate::cluster::Part::Local));
        tokio::task::yield_now().await;
        assert!(!request.is_finished());
        old.hand_over(Some(next.clone()));
        request.await.unwrap().unwrap();
        // The proxy's read for the cluster view describes the old node: it stops.
        view_read.await.unwrap().unwrap();
        let up = written_stream(&mut new_home).await;
        {
            let mut st = next.lock();
            assert_eq!(
                st.streams.release(up),
                Some(Pending::Client {
                    stream: 5,
                    use_keyspace: true
                })
            );
            assert_eq!(st.streams.in_use(), 0);
            // A USE in flight there: nothing is rewritten until it is answered.
            assert_eq!(st.use_in_flight, 1);
        }
        // Once the session ended without a new home, nothing is sent.
        let (last, _) = conn(4).await;
        last.lock().hand_over(4);
        last.hand_over(None);
        let sent = last.send(
            query(),
            Pending::client(1),
            None,
            Group::Other,
            Id::Reuse(0),
        );
        assert!(matches!(sent.await, Err(End::HomeGone)));
    }

    #[tokio::test]
    async fn the_wire_is_what_startup_negotiated() {
        let (conn, _home) = conn(1).await;
        assert_eq!(conn.wire().compression, None);
        conn.negotiate(Some(autoprep_protocol::compression::Compression::Lz4));
        assert_eq!(
            conn.wire().compression,
            Some(autoprep_protocol::compression::Compression::Lz4)
        );
        assert_eq!(conn.wire().max_frame, conn.settings.max_frame);
    }
}
