//! One client connection and its own upstream connection.
//!
//! Two readers run concurrently in the connection's task: client → upstream takes a fresh
//! upstream stream id for every request, upstream → client maps each response back to the
//! client's stream id. Each socket has an outbox (see [`crate::writer`]): what a reader pushes
//! while handling one read is written when that read is handled, from this task when the
//! socket takes it. v5 framing starts on both sides once the server answers STARTUP with READY
//! or AUTHENTICATE.
//!
//! At the end of a drain's grace period (see [`crate::lifecycle`]) the client reader stops
//! reading, the upstream reader goes on until every forwarded request is answered (at most
//! [`lifecycle::CLOSE_WAIT`]), and the connection closes.

use crate::context::Context;
use crate::control::{self, Group};
use crate::lifecycle;
use crate::metrics::Metrics;
use crate::prepare_proof;
use crate::protocol_error;
use crate::replica;
use crate::rewrite::literal_prepare;
use crate::rewrite::{self, Decision, PrepareRequest, Used};
use crate::schema_agreement;
use crate::shapes::ShapeRef;
use crate::streams::StreamTable;
use crate::topology;
use crate::writer::{Out, Outbox};
use crate::{socket, tls, upstream};
use autoprep_cache::{PreparedEntry, ShapeHash};
use autoprep_protocol::compression::{self, Compression};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, EnvelopeError, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::envelope::{Flags, Header};
use autoprep_protocol::message::error::{ErrorDetail, ErrorView};
use autoprep_protocol::message::prepare::encode_prepare;
use autoprep_protocol::message::query::QueryRequest;
use autoprep_protocol::message::result::{metadata_flags, ResultView};
use autoprep_protocol::message::startup::StartupView;
use autoprep_protocol::message::{RequestBody, ResponseBody};
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder, SegmentError};
use bytes::{Bytes, BytesMut};
use pending::{Epochs, LiteralRequest, Pending};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn, Instrument};

mod pending;

/// How long the client writer may take to flush a final answer after the session ends.
const FLUSH_GRACE: Duration = Duration::from_secs(5);

/// State both readers of a connection share.
#[derive(Debug, Default)]
struct State {
    streams: StreamTable<Pending>,
    /// STARTUP asked for LZ4 (used for v5 segment compression).
    lz4_requested: bool,
    /// v3/v4 body compression negotiated by STARTUP.
    compression: Option<Compression>,
    /// The keyspace set by the last successful `USE` on this connection.
    keyspace: Option<std::sync::Arc<str>>,
    /// `USE` requests forwarded and not answered yet: while any is, the keyspace a statement
    /// runs in is not known, and nothing is rewritten or prepared.
    use_in_flight: u32,
    /// Counts the `USE` requests forwarded: a PREPARE answered after another `USE` was sent
    /// may have run in either keyspace (see [`crate::prepare_proof`]).
    keyspace_epoch: u64,
    /// Set once the client side is framed (v5), with whether segments are LZ4-compressed.
    client_framing: Option<bool>,
    /// The client's handshake, replayed to open replica connections (see [`replica`]).
    handshake: replica::Handshake,
    /// The proxy's own PREPAREs in flight whose keyspace the server takes from the
    /// connection (see [`hold_use`]).
    exposed_prepares: u32,
    /// The client was given Cassandra's once-per-connection warning about `USE` with
    /// prepared statements (by the server, or by the proxy answering a PREPARE: see
    /// [`literal_prepare`]).
    use_warning_given: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signalled whenever an upstream stream id is released.
    freed: Notify,
    /// Signalled when the last exposed PREPARE of the proxy's is answered (see [`hold_use`]).
    prepares_answered: Notify,
    /// The upstream node (contact point index): the cache's node id for this connection.
    node: u32,
    /// The address the client connected to (advertised to it when the proxy listens on a
    /// wildcard address; see [`topology`]).
    local: Option<std::net::SocketAddr>,
    /// Cancelled when the drain's grace period ends: the client reader stops.
    closing: CancellationToken,
    /// Cancelled once the client reader has stopped: the upstream reader ends as soon as
    /// nothing is in flight.
    client_stopped: CancellationToken,
    /// Set once the server answered READY or AUTH_SUCCESS: the connection is authenticated.
    /// Only then are QUERYs rewritten and the proxy's own PREPAREs sent (before, the server
    /// would refuse them and the shape would be marked as failing for every connection).
    ready: AtomicBool,
    /// The upstream node's address (what `system.local` on this connection describes).
    home: Option<std::net::SocketAddr>,
    /// Connections to the replicas this connection routes to.
    links: replica::Links,
    /// The client's outbox and the home connection's (for the replica connections' readers).
    client: Outbox,
    upstream: Outbox,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another reader panicked; the state is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a session ended.
#[derive(Debug)]
enum End {
    ClientClosed,
    UpstreamClosed,
    ClientIo(std::io::Error),
    UpstreamIo(std::io::Error),
    /// The client asked for a protocol version the proxy does not speak (drivers probe for
    /// the highest version this way); it was answered and is closed.
    VersionRefused(String),
    /// The client sent bytes that are not the protocol; it was answered and is closed.
    BadClientInput(String),
    BadUpstreamInput(String),
    /// A writer went away (its socket failed).
    WriterGone,
    /// The drain's grace period ended.
    Closing,
}

/// Runs one client connection to completion.
pub async fn run(id: u64, client: TcpStream, ctx: Arc<Context>) {
    let peer = client
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let span = tracing::info_span!("conn", id, peer = %peer);
    Metrics::inc(&ctx.metrics.connections_total);
    Metrics::inc(&ctx.metrics.client_connections);
    serve(client, &ctx).instrument(span).await;
    ctx.metrics
        .client_connections
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
}

async fn serve(client: TcpStream, ctx: &Arc<Context>) {
    let cfg = &ctx.cfg;
    let local = client.local_addr().ok();
    let _ = client.set_nodelay(true);
    let client = match tls::accept(ctx.client_tls.as_ref(), client).await {
        Ok(s) => s,
        // A connection closed before its first byte (a TCP health check, a port scan) is
        // not worth a warning.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            debug!(error = %e, "client closed the connection before the TLS handshake");
            return;
        }
        Err(e) => {
            warn!(error = %e, "client TLS handshake failed; connection closed");
            return;
        }
    };
    let (upstream, picked) = match upstream::connect(
        &ctx.upstreams,
        ctx.upstream_tls.as_ref(),
        Duration::from_millis(cfg.connect_timeout_ms),
        &ctx.metrics.upstream_connect_failures,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "closing the client connection");
            return;
        }
    };
    debug!(node = picked.node, upstream = %picked.addr, "connected upstream");
    let home = socket::peer_addr(&upstream);
    let (client_rd, client_wr) = socket::into_split(client);
    let (upstream_rd, upstream_wr) = socket::into_split(upstream);
    let sent = Some(ctx.metrics.bytes_to_clients.clone());
    let (to_client, client_task) = Outbox::new(client_wr, sent);
    let (to_upstream, upstream_task) = Outbox::new(upstream_wr, None);
    let client_writer = tokio::spawn(client_task.in_current_span());
    let upstream_writer = tokio::spawn(upstream_task.in_current_span());
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            streams: StreamTable::with_capacity(cfg.upstream_streams),
            ..State::default()
        }),
        freed: Notify::new(),
        prepares_answered: Notify::new(),
        node: picked.node,
        local,
        closing: ctx.lifecycle.session_token(),
        client_stopped: CancellationToken::new(),
        ready: AtomicBool::new(false),
        home,
        links: replica::Links::default(),
        client: to_client.clone(),
        upstream: to_upstream.clone(),
    });

    // A block, so that both readers are gone at its end.
    let end = {
        let client_side = client_to_upstream(client_rd, ctx, &shared, &to_upstream, &to_client);
        let upstream_side = upstream_to_client(upstream_rd, ctx, &shared, &to_client, &to_upstream);
        tokio::pin!(upstream_side);
        let end = tokio::select! {
            end = client_side => end,
            end = &mut upstream_side => end,
        };
        match end {
            // The client reader stopped: deliver the answers to what it forwarded, then close.
            End::Closing => {
                shared.client_stopped.cancel();
                tokio::time::timeout(lifecycle::CLOSE_WAIT, &mut upstream_side)
                    .await
                    .unwrap_or(End::Closing)
            }
            other => other,
        }
    };
    match &end {
        End::ClientClosed => debug!("client closed the connection"),
        End::UpstreamClosed => {
            info!("upstream closed the connection; closing the client connection")
        }
        End::ClientIo(e) => debug!(error = %e, "client connection failed"),
        End::UpstreamIo(e) => {
            warn!(error = %e, "upstream connection failed; closing the client connection")
        }
        End::VersionRefused(e) => {
            debug!(error = %e, "protocol version refused (driver negotiation); answered and closed")
        }
        End::BadClientInput(e) => {
            warn!(error = %e, "malformed input from the client; answered and closed the connection")
        }
        End::BadUpstreamInput(e) => {
            warn!(error = %e, "malformed data from upstream; closing the client connection")
        }
        End::WriterGone => debug!("a socket writer stopped"),
        End::Closing => info!("drain grace period over; connection closed"),
    }
    // PREPAREs of this connection still in flight will never be answered: let other
    // connections prepare those shapes at once; a cluster-view refresh it carried is over.
    for p in shared.lock().streams.in_flight() {
        match p {
            Pending::Prepare { hash, .. } => ctx.rewriter.cache.abandoned(shared.node, *hash),
            Pending::ClusterRead(_) => ctx.cluster.abandon_refresh(),
            _ => {}
        }
    }
    shared.links.close_all();
    // The readers are gone: the writers write what is left and stop.
    to_client.close();
    to_upstream.close();
    let _ = tokio::time::timeout(FLUSH_GRACE, client_writer).await;
    upstream_writer.abort();
}

/// Reads client envelopes and forwards them upstream under proxy-owned stream ids.
async fn client_to_upstream(
    mut rd: impl AsyncRead + Unpin,
    ctx: &Arc<Context>,
    shared: &Arc<Shared>,
    to_upstream: &Outbox,
    to_client: &Outbox,
) -> End {
    let envelopes = EnvelopeDecoder::new(Direction::Request, ctx.cfg.max_frame_bytes);
    let mut scratch = rewrite::Scratch::default();
    let mut framed: Option<FramedDecoder> = None;
    let mut buf = BytesMut::new();
    let closing = shared.closing.cancelled();
    tokio::pin!(closing);
    loop {
        loop {
            if framed.is_none() {
                if let Some(lz4) = shared.lock().client_framing {
                    framed = Some(FramedDecoder::new(
                        SegmentDecoder::new(lz4),
                        envelopes.clone(),
                    ));
                }
            }
            let next = match &mut framed {
                Some(f) => f.decode(&mut buf),
                None => envelopes.decode(&mut buf).map_err(SegmentError::from),
            };
            let env = match next {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(e) => return refuse(e, to_client).await,
            };
            if env.header().opcode.0 > Opcode::AUTH_SUCCESS.0 {
                // Cassandra answers an opcode it does not know and then keeps failing every
                // later request on that connection; the proxy answers it the same way itself
                // and keeps the upstream connection sound.
                let h = env.header();
                debug!(opcode = h.opcode.0, "unknown opcode answered by the proxy");
                let msg = format!("Unknown opcode {}", h.opcode.0);
                let frame = protocol_error::build(h.version, h.stream.0, &msg);
                if to_client.send(Out::Envelope(frame)).await.is_err() {
                    return End::WriterGone;
                }
                continue;
            }
            ctx.metrics.request(env.header().opcode.0);
            if let Err(end) = forward_request(env, ctx, shared, to_upstream, &mut scratch).await {
                return end;
            }
        }
        // Everything this read brought leaves in one write per socket.
        to_upstream.flush();
        to_client.flush();
        // Checked before reading too: a client that always has more to send keeps the read
        // ready, and the biased select below would never look at `closing`.
        if shared.closing.is_cancelled() {
            return End::Closing;
        }
        reserve_read_room(&mut buf);
        let read = tokio::select! {
            biased;
            read = rd.read_buf(&mut buf) => read,
            () = &mut closing => return End::Closing,
        };
        if let Ok(n) = read {
            ctx.metrics
                .bytes_from_clients
                .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        match read {
            Ok(0) if buf.is_empty() => return End::ClientClosed,
            Ok(0) => return refuse_truncated(&buf, &envelopes, to_client).await,
            Ok(_) => {}
            Err(e) => return End::ClientIo(e),
        }
    }
}

/// The client stopped sending in the middle of a frame: answer (it may still be reading).
async fn refuse_truncated(buf: &[u8], envelopes: &EnvelopeDecoder, to_client: &Outbox) -> End {
    let (version, stream) = match envelopes.peek_header(buf) {
        Ok(Some(h)) => (h.version, h.stream.0),
        _ => (ProtocolVersion::V4, 0),
    };
    let msg = format!(
        "truncated frame: the connection ended after {} bytes of an incomplete frame",
        buf.len()
    );
    let _ = to_client
        .send(Out::Envelope(protocol_error::build(version, stream, &msg)))
        .await;
    End::BadClientInput(msg)
}

/// A read buffer's room for the next read: it starts at [`READ_MIN`] and doubles while reads
/// fill it (a large frame arrives in a few large reads), and once every byte read has been
/// handled, a buffer grown past [`READ_KEEP`] is given back (an idle connection holds only
/// what it needs; the frames split from it keep their own part alive until written).
fn reserve_read_room(buf: &mut BytesMut) {
    // An empty buffer may still share its allocation with frames split from it (a large
    // answer being written): it keeps that allocation only when it is its sole owner and the
    // allocation is small; otherwise it lets go of it.
    if buf.is_empty() {
        let keep =
            buf.capacity() <= READ_KEEP && buf.try_reclaim(READ_MIN) && buf.capacity() <= READ_KEEP;
        if !keep {
            *buf = BytesMut::new();
        }
    }
    if buf.capacity() - buf.len() < READ_MIN {
        buf.reserve(buf.len().max(READ_MIN));
    }
}

/// The smallest room a read is given.
const READ_MIN: usize = 4 * 1024;

/// A drained read buffer larger than this is given back.
const READ_KEEP: usize = 64 * 1024;

/// Answers malformed client input with a protocol ERROR; the session then ends.
async fn refuse(err: SegmentError, to_client: &Outbox) -> End {
    let frame = match &err {
        SegmentError::Envelope(e) => protocol_error::for_envelope_error(e),
        other => protocol_error::build(ProtocolVersion::V5, 0, &other.to_string()),
    };
    let _ = to_client.send(Out::Envelope(frame)).await;
    match err {
        SegmentError::Envelope(EnvelopeError::UnsupportedVersion { .. }) => {
            End::VersionRefused(err.to_string())
        }
        _ => End::BadClientInput(err.to_string()),
    }
}

/// The body of an envelope as plain bytes: decompressed when the v3/v4 compression flag is set.
fn plain_body<'e>(
    env: &'e Envelope,
    compression: Option<Compression>,
    max: usize,
) -> Option<Cow<'e, [u8]>> {
    let h = env.header();
    if h.flags.has(Flags::COMPRESSION) && h.version < ProtocolVersion::V5 {
        let alg = compression?;
        compression::decompress(alg, env.body(), max)
            .ok()
            .map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(env.body()))
    }
}

/// Takes an upstream stream id for `pending`, tagged with the statement shape of a QUERY (for
/// `/shapes`), waiting while every id is in flight. Before waiting, what was pushed toward the
/// server is written: its answers are what frees ids.
async fn allocate(
    shared: &Shared,
    to_upstream: &Outbox,
    pending: Pending,
    shape: Option<ShapeRef>,
) -> i16 {
    allocate_in(shared, to_upstream, pending, shape, Group::Other).await
}

/// [`allocate`] for a request whose response time is one of the control comparison's.
async fn allocate_in(
    shared: &Shared,
    to_upstream: &Outbox,
    mut pending: Pending,
    mut shape: Option<ShapeRef>,
    group: Group,
) -> i16 {
    loop {
        match shared.lock().streams.allocate_tagged(pending, shape, group) {
            Ok(id) => return id,
            Err(back) => (pending, shape) = back,
        }
        // All ids are in flight: wait for a response to free one (backpressure).
        let freed = shared.freed.notified();
        to_upstream.flush();
        freed.await;
    }
}

async fn send_upstream(to_upstream: &Outbox, mut frame: BytesMut, id: i16) -> Result<(), End> {
    frame[2..4].copy_from_slice(&id.to_be_bytes());
    to_upstream
        .send(Out::Envelope(frame))
        .await
        .map_err(|_| End::WriterGone)
}

async fn forward_request(
    env: Envelope,
    ctx: &Arc<Context>,
    shared: &Arc<Shared>,
    to_upstream: &Outbox,
    scratch: &mut rewrite::Scratch,
) -> Result<(), End> {
    let header = *env.header();
    let stream = header.stream.0;
    if header.opcode == Opcode::STARTUP {
        // STARTUP is never compressed; a body the proxy cannot read goes to the server as is.
        if let Ok(s) = StartupView::parse(env.body()) {
            let mut st = shared.lock();
            st.lz4_requested = s.compression() == Some(Compression::Lz4);
            st.compression = s.compression();
        }
        if ctx.cluster.enabled() {
            let mut st = shared.lock();
            st.handshake = replica::Handshake {
                version: Some(header.version),
                startup: Some(zeroize::Zeroizing::new(env.body().to_vec())),
                lz4: st.lz4_requested,
                ..replica::Handshake::default()
            };
        }
    }
    if header.opcode == Opcode::AUTH_RESPONSE && ctx.cluster.enabled() {
        let mut st = shared.lock();
        if !st.handshake.complete {
            st.handshake
                .auth
                .push(zeroize::Zeroizing::new(env.body().to_vec()));
        }
    }
    let is_batch = header.opcode == Opcode::BATCH;
    let is_query = header.opcode == Opcode::QUERY;
    // Rewriting waits until the connection is authenticated (see `Shared::ready`).
    let rewrite = ctx.cfg.rewrite && shared.ready.load(Ordering::Acquire);
    let client_prepared = header.opcode == Opcode::EXECUTE || header.opcode == Opcode::BATCH;
    // A client's EXECUTE of a statement it prepared with literals inline, and the client's own
    // prepared statements routing can send to a replica: one read of the body serves both.
    let literal_execute =
        header.opcode == Opcode::EXECUTE && rewrite && ctx.rewriter.literals.holds_any();
    let route_client = client_prepared && rewrite && ctx.cluster.may_route();
    if literal_execute || route_client {
        let (compression, keyspace, settled) = {
            let st = shared.lock();
            (st.compression, st.keyspace.clone(), st.use_in_flight == 0)
        };
        let body = plain_body(&env, compression, ctx.cfg.max_frame_bytes);
        let decided = match &body {
            Some(b) if literal_execute => literal_prepare::decide_execute(
                &ctx.rewriter,
                shared.node,
                &header,
                b,
                &mut scratch.values,
            ),
            _ => None,
        };
        match decided {
            Some(literal_prepare::Executed {
                decision: Decision::Execute { frame, used, route },
                statement,
            }) => {
                ctx.metrics.literal_execute(Ok(()));
                let shape = statement.shape();
                let same_keyspace = settled && keyspace.as_deref() == statement.keyspace();
                let rewritten = Rewritten {
                    stream,
                    original: env.into_frame().freeze(),
                    version: header.version,
                    used,
                    route,
                    topology: None,
                    same_keyspace,
                    client_execute: true,
                    literals: vec![statement],
                };
                return send_rewritten(ctx, shared, to_upstream, frame, rewritten, Some(shape))
                    .await;
            }
            Some(literal_prepare::Executed {
                decision: Decision::PassThrough { reason, .. },
                statement,
            }) => {
                // The server never saw the id: it learns it first.
                ctx.metrics.literal_execute(Err(reason));
                let original = env.into_frame().freeze();
                return materialize(
                    ctx,
                    shared,
                    to_upstream,
                    stream,
                    vec![statement],
                    original,
                    None,
                )
                .await;
            }
            None => {}
        }
        let route = body.as_deref().filter(|_| route_client).and_then(|b| {
            if header.opcode == Opcode::EXECUTE {
                routing::client_execute(ctx, &header, b)
            } else {
                routing::client_batch(ctx, &header, b)
            }
        });
        if let Some(route) = route {
            let same_keyspace = settled && keyspace.as_deref() == route.entry.keyspace.as_deref();
            let frame = env.into_frame();
            let req = routing::Request {
                stream,
                original: frame.clone().freeze(),
                version: header.version,
                hash: None,
                same_keyspace,
                shape: None,
                group: Group::Other,
                literals: Vec::new(),
            };
            let frame = match routing::route(ctx, shared, frame, route, req).await {
                Ok(()) => return Ok(()),
                Err((frame, _)) => frame,
            };
            let up = allocate(shared, to_upstream, Pending::client(stream), None).await;
            return send_upstream(to_upstream, frame, up).await;
        }
    }
    let topology_candidate = is_query
        || header.opcode == Opcode::PREPARE
        || header.opcode == Opcode::EXECUTE && ctx.topology.has_prepared();
    if topology_candidate || rewrite && is_batch {
        let (compression, keyspace, settled) = {
            let st = shared.lock();
            (st.compression, st.keyspace.clone(), st.use_in_flight == 0)
        };
        let ks = rewrite::ConnKeyspace {
            name: keyspace.as_deref(),
            settled,
        };
        let body = plain_body(&env, compression, ctx.cfg.max_frame_bytes);
        // A QUERY is parsed once here for the topology, schema-change and rewrite checks.
        let query = match &body {
            Some(b) if is_query => QueryRequest::parse(&header, b).ok(),
            _ => None,
        };
        // A topology read (system.local, system.peers...) gets its answer rewritten, whether
        // the request itself is rewritten or not.
        let topology = match (&query, &body) {
            (Some(q), _) => ctx.topology.classify_query(&q.query, ks.name),
            (None, Some(b)) if !is_query => ctx.topology.classify(&header, b, ks.name),
            _ => None,
        };
        let schema_change = topology.is_none()
            && query
                .as_ref()
                .is_some_and(|q| schema_agreement::is_schema_change(&q.query));
        let literal_candidate = header.opcode == Opcode::PREPARE
            && rewrite
            && ctx.cfg.prepare_literals
            && topology.is_none();
        if let (true, Some(b)) = (literal_candidate, &body) {
            let c = literal_prepare::ClientPrepare {
                stream,
                header,
                body: Bytes::copy_from_slice(b),
                original: Bytes::copy_from_slice(env.as_bytes()),
            };
            match literal_prepare_request(c, true, ctx, shared, to_upstream).await? {
                Ok(()) => return Ok(()),
                Err(c) => return pass_client_prepare(c, ctx, shared, to_upstream).await,
            }
        }
        if !(rewrite && (is_query || is_batch)) {
            let client_prepare =
                (header.opcode == Opcode::PREPARE && topology.is_none() && ctx.cluster.enabled())
                    .then(|| routing::client_prepare(stream, &header, body.as_deref(), ks))
                    .flatten();
            let pending =
                client_prepare.unwrap_or_else(|| as_sent(stream, false, topology, schema_change));
            let up = allocate(shared, to_upstream, pending, None).await;
            return send_upstream(to_upstream, env.into_frame(), up).await;
        }
        let node = shared.node;
        let now = Instant::now();
        let mut shape = None;
        let decision = match (&query, &body) {
            (Some(q), _) => rewrite::decide(
                &ctx.rewriter,
                node,
                &header,
                q,
                ks,
                now,
                scratch,
                &mut shape,
            ),
            (None, Some(b)) if is_batch => rewrite::decide_batch(
                &ctx.rewriter,
                node,
                &header,
                b,
                ks,
                now,
                &mut scratch.values,
            ),
            (None, Some(_)) => Decision::pass("malformed query"),
            (None, None) => Decision::pass("undecodable body"),
        };
        decision.record(shape.as_deref());
        match decision {
            Decision::Execute { frame, used, route } => {
                Metrics::inc(&ctx.metrics.queries_rewritten);
                let literals = match &body {
                    Some(b) if is_batch => {
                        literal_prepare::statements_in(&ctx.rewriter, &header, b)
                    }
                    _ => Vec::new(),
                };
                let rewritten = Rewritten {
                    stream,
                    original: env.into_frame().freeze(),
                    version: header.version,
                    used,
                    // A topology read's answer is rewritten at home.
                    route: route.filter(|_| topology.is_none()),
                    topology,
                    same_keyspace: true,
                    client_execute: false,
                    literals,
                };
                return send_rewritten(ctx, shared, to_upstream, frame, rewritten, shape).await;
            }
            Decision::PassThrough {
                reason,
                prepare,
                use_keyspace,
            } => {
                ctx.metrics.passthrough(reason);
                if use_keyspace {
                    hold_use(ctx, shared, to_upstream).await;
                    let mut st = shared.lock();
                    st.use_in_flight += 1;
                    st.keyspace_epoch += 1;
                }
                let literals = match &body {
                    Some(b) if is_batch => {
                        literal_prepare::statements_in(&ctx.rewriter, &header, b)
                    }
                    _ => Vec::new(),
                };
                if literals.is_empty() {
                    let pending = as_sent(stream, use_keyspace, topology, schema_change);
                    let group = if reason == control::REASON {
                        Group::Control
                    } else {
                        Group::Other
                    };
                    let up = allocate_in(shared, to_upstream, pending, shape, group).await;
                    send_upstream(to_upstream, env.into_frame(), up).await?;
                } else {
                    // A batch of statements the server never saw: it learns them first.
                    let original = env.into_frame().freeze();
                    materialize(ctx, shared, to_upstream, stream, literals, original, None).await?;
                }
                for p in prepare {
                    send_prepare(p, header.version, ctx, shared, to_upstream, None).await?;
                }
                return Ok(());
            }
        }
    }
    let up = allocate(shared, to_upstream, Pending::client(stream), None).await;
    send_upstream(to_upstream, env.into_frame(), up).await
}

/// A client request the proxy rewrote into an EXECUTE (or a BATCH of prepared statements).
struct Rewritten {
    stream: i16,
    /// What the client sent (replayed if the server no longer knows the shape).
    original: Bytes,
    version: ProtocolVersion,
    used: Used,
    route: Option<rewrite::Route>,
    topology: Option<topology::Read>,
    /// The client connection's keyspace is the statement's (see `routing::Request`).
    same_keyspace: bool,
    /// The client sent an EXECUTE (see `Pending::Rewritten`).
    client_execute: bool,
    /// See `Pending::Rewritten`.
    literals: Vec<Arc<literal_prepare::Statement>>,
}

/// Sends a rewritten request: to a replica of its partition when routing finds one ready,
/// else home.
async fn send_rewritten(
    ctx: &Arc<Context>,
    shared: &Arc<Shared>,
    to_upstream: &Outbox,
    frame: BytesMut,
    r: Rewritten,
    shape: Option<ShapeRef>,
) -> Result<(), End> {
    let frame = match r.route {
        Some(route) => {
            let hash = match &r.used {
                // A QUERY's answer loses the v5 metadata-changed flag; an EXECUTE's keeps it.
                Used::One { hash, .. } if !r.client_execute => Some(*hash),
                _ => None,
            };
            let routed = routing::Request {
                stream: r.stream,
                original: r.original.clone(),
                version: r.version,
                hash,
                same_keyspace: r.same_keyspace,
                shape: shape.clone(),
                group: if r.client_execute {
                    Group::Other
                } else {
                    Group::Rewritten
                },
                literals: r.literals.clone(),
            };
            let outcome = routing::route(ctx, shared, frame, route, routed).await;
            if let Some(s) = &shape {
                s.routing(outcome.as_ref().map(|_| ()).map_err(|(_, r)| *r));
            }
            match outcome {
                Ok(()) => return Ok(()),
                Err((frame, _)) => frame,
            }
        }
        None => frame,
    };
    // A QUERY sent as EXECUTE is the control comparison's other side.
    let group = if r.client_execute {
        Group::Other
    } else {
        Group::Rewritten
    };
    let pending = Pending::Rewritten {
        stream: r.stream,
        original: r.original,
        used: r.used,
        topology: r.topology,
        literals: (!r.literals.is_empty()).then(|| {
            Box::new(LiteralRequest {
                execute: r.client_execute,
                statements: r.literals,
            })
        }),
    };
    let up = allocate_in(shared, to_upstream, pending, shape, group).await;
    send_upstream(to_upstream, frame, up).await
}

/// Sends a client request that references statements prepared with literals inline the
/// server never saw (see [`literal_prepare`]): first a PREPARE of each of `statements` (one
/// after the other: the server runs a connection's requests concurrently), then `original` as
/// the client sent it. `up`: the upstream id to reuse (from the upstream reader, whose answers
/// are what frees ids), or `None` to take one.
async fn materialize(
    ctx: &Context,
    shared: &Shared,
    to_upstream: &Outbox,
    stream: i16,
    mut statements: Vec<Arc<literal_prepare::Statement>>,
    original: Bytes,
    up: Option<i16>,
) -> Result<(), End> {
    let version = ProtocolVersion::from_byte(original[0] & 0x7f).unwrap_or(ProtocolVersion::V4);
    let (frame, pending) = loop {
        let Some(s) = statements.pop() else {
            break (BytesMut::from(&original[..]), Pending::client(stream));
        };
        let keyspace = shared.lock().keyspace.clone();
        let Some((frame, exposed)) = s.prepare_frame(version, keyspace.as_deref()) else {
            continue;
        };
        Metrics::inc(&ctx.metrics.literal_materialized);
        if exposed {
            shared.lock().exposed_prepares += 1;
        }
        let pending = Pending::Materialize {
            stream,
            rest: statements,
            original,
            exposed,
        };
        break (frame, pending);
    };
    let up = match up {
        Some(up) => {
            shared.lock().streams.allocate_exact(up, pending);
            up
        }
        None => allocate(shared, to_upstream, pending, None).await,
    };
    send_upstream(to_upstream, frame, up).await
}

/// One of the proxy's PREPAREs whose keyspace the server takes from the connection was
/// answered (see [`hold_use`]).
fn exposed_prepare_answered(shared: &Shared) {
    let mut st = shared.lock();
    st.exposed_prepares -= 1;
    if st.exposed_prepares == 0 {
        shared.prepares_answered.notify_waiters();
    }
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
async fn hold_use(ctx: &Context, shared: &Shared, to_upstream: &Outbox) {
    let mut held = false;
    loop {
        let answered = shared.prepares_answered.notified();
        tokio::pin!(answered);
        answered.as_mut().enable();
        if shared.lock().exposed_prepares == 0 {
            break;
        }
        if !held {
            held = true;
            Metrics::inc(&ctx.metrics.uses_held);
        }
        // The PREPAREs may still sit in the outbox.
        to_upstream.flush();
        answered.await;
    }
}

/// Token-aware routing of rewritten EXECUTEs (see [`crate::cluster`] and [`crate::replica`]):
/// the replica chosen for the partition, its connection (opened by replaying the client's
/// handshake), the shape prepared there, and the answers back to the client.
mod routing {
    use super::*;
    use crate::cluster::READS;
    use crate::replica::{self, Link, LinkState, Routed};
    use crate::rewrite::Route;

    /// The client's request a rewritten EXECUTE stands for.
    pub(super) struct Request {
        pub stream: i16,
        /// What the client sent (sent home instead if the replica does not know the id).
        pub original: Bytes,
        pub version: ProtocolVersion,
        /// The shape's cache key, for a rewritten QUERY (for a v5 answer whose result
        /// metadata changed); `None` for a client's own EXECUTE.
        pub hash: Option<ShapeHash>,
        /// The client connection's keyspace is the statement's (a rewritten QUERY's always
        /// is). Otherwise the home node warns once about `USE` with prepared statements, which
        /// a replica connection would not: such a request goes home.
        pub same_keyspace: bool,
        /// The statement's shape and control-comparison group, for the response-time metrics.
        pub shape: Option<ShapeRef>,
        pub group: Group,
        /// See `Routed::Client::literals`.
        pub literals: Vec<Arc<literal_prepare::Statement>>,
    }

    fn home(
        ctx: &Context,
        reason: &'static str,
        frame: BytesMut,
    ) -> Result<(), (BytesMut, &'static str)> {
        ctx.metrics.routed_home(reason);
        Err((frame, reason))
    }

    /// Sends `frame` to a replica of its partition when one is ready for it; otherwise gives
    /// it back for the home connection (counted with why).
    pub(super) async fn route(
        ctx: &Arc<Context>,
        shared: &Arc<Shared>,
        frame: BytesMut,
        route: Route,
        req: Request,
    ) -> Result<(), (BytesMut, &'static str)> {
        let Some(home_addr) = shared.home else {
            return home(ctx, "home address unknown", frame);
        };
        if !req.same_keyspace {
            return home(ctx, "keyspace differs", frame);
        }
        let now = Instant::now();
        if ctx.cluster.begin_refresh(home_addr, now) {
            refresh(shared, req.version).await;
        }
        let Some(view) = ctx.cluster.current() else {
            return home(ctx, "no cluster view", frame);
        };
        if view.node_count() < 2 {
            return home(ctx, "single node", frame);
        }
        // The keyspace of the partition: the one keyspace of the statement's tables.
        let entry = &route.entry;
        let Some((keyspace, _)) = entry.tables.first() else {
            return home(ctx, "no table", frame);
        };
        if entry.tables.iter().any(|(k, _)| k != keyspace) {
            return home(ctx, "several keyspaces", frame);
        }
        let addr = match ctx
            .cluster
            .pick(&view, keyspace, route.token, home_addr, route.local_only)
        {
            Ok(a) => a,
            Err(reason) => return home(ctx, reason, frame),
        };
        let mut known = true;
        for e in std::iter::once(entry).chain(&route.others) {
            let (here, everywhere) = ctx.cluster.is_known(&view, addr, &e.id);
            known &= here;
            if !everywhere {
                // Prepared on every replica this connection reaches, as drivers prepare on
                // every node: a later request finds it wherever its partition is.
                let compression = shared.lock().compression;
                for l in shared.links.open_links() {
                    if !ctx.cluster.holds(l.addr, &e.id) && l.start_preparing(&e.id) {
                        let (ctx, e) = (ctx.clone(), e.clone());
                        tokio::spawn(prepare_on(ctx, l, e, compression).in_current_span());
                    }
                }
            }
        }
        if addr == home_addr {
            return home(ctx, crate::metrics::HOME_IS_THE_REPLICA, frame);
        }
        let link = match shared.links.get(addr, now) {
            LinkState::Open(l) => l,
            LinkState::NotYet(reason) => return home(ctx, reason, frame),
            LinkState::Absent => {
                open(ctx, shared, addr);
                return home(ctx, "replica connecting", frame);
            }
        };
        if !known {
            return home(ctx, "not prepared on the replica", frame);
        }
        let routed = Routed::Client {
            stream: req.stream,
            original: req.original,
            id: entry.id.clone(),
            hash: req.hash,
            read: entry
                .text
                .get(..7)
                .is_some_and(|t| t.eq_ignore_ascii_case("SELECT ")),
            tag: crate::streams::Tag {
                started: Some(now),
                shape: req.shape,
                group: req.group,
            },
            literals: req.literals,
        };
        match link.send(frame, routed).await {
            Ok(()) => {
                ctx.metrics.routed_to(addr);
                Ok(())
            }
            Err(frame) => home(ctx, "replica busy", frame),
        }
    }

    /// The pending entry of a client's PREPARE of a statement whose answer routing should
    /// remember (`None`: an ordinary client request; a v4 PREPARE while a USE is in flight,
    /// whose keyspace is not known).
    pub(super) fn client_prepare(
        stream: i16,
        header: &Header,
        body: Option<&[u8]>,
        ks: rewrite::ConnKeyspace<'_>,
    ) -> Option<Pending> {
        let rb = RequestBody::parse(header, body?).ok()?;
        let p = autoprep_protocol::message::prepare::PrepareView::parse(rb.message, header.version)
            .ok()?;
        let keyspace = match p.keyspace {
            Some(k) => Some(k.to_owned()),
            None if ks.settled => ks.name.map(str::to_owned),
            None => return None,
        };
        Some(Pending::ClientPrepare {
            stream,
            route: Some((std::str::from_utf8(p.query).ok()?.to_owned(), keyspace)),
            names_keyspace: p.keyspace.is_some(),
        })
    }

    /// Remembers a client's own PREPARED answer for routing its EXECUTEs.
    pub(super) fn client_prepared(
        ctx: &Context,
        env: &Envelope,
        text: String,
        keyspace: Option<String>,
        compression: Option<Compression>,
    ) {
        if env.header().opcode != Opcode::RESULT {
            return;
        }
        let Some(body) = plain_body(env, compression, ctx.cfg.max_frame_bytes) else {
            return;
        };
        let Ok(rb) = ResponseBody::parse(env.header(), &body) else {
            return;
        };
        let Ok(ResultView::Prepared(p)) = ResultView::parse(rb.message, env.header().version)
        else {
            return;
        };
        let pk_indexes: Vec<u16> = p.bind.pk_indexes().collect();
        if pk_indexes.is_empty() {
            return;
        }
        // The partition's keyspace and table: those of the bind variables (one table).
        let mut tables: Vec<(String, String)> = Vec::new();
        for c in p.bind.columns.iter() {
            let t = (c.keyspace.to_owned(), c.table.to_owned());
            if !tables.contains(&t) {
                tables.push(t);
            }
        }
        ctx.cluster.client_prepared(PreparedEntry {
            fingerprint: <[u8; 16]>::try_from(p.id).unwrap_or_default(),
            text,
            keyspace,
            id: Bytes::copy_from_slice(p.id),
            result_metadata_id: p.result_metadata_id.map(Bytes::copy_from_slice),
            bind_types: Vec::new(),
            pk_indexes,
            result_metadata: Bytes::new(),
            tables,
            prepared_message: Bytes::new(),
        });
    }

    /// What routing a client's own EXECUTE needs, when its statement is one the client
    /// prepared through autoprep with a partition key and the values bind it (positionally).
    pub(super) fn client_execute(ctx: &Context, header: &Header, body: &[u8]) -> Option<Route> {
        let rb = RequestBody::parse(header, body).ok()?;
        let e = autoprep_protocol::message::execute::ExecuteView::parse(rb.message, header.version)
            .ok()?;
        let entry = ctx.cluster.client_statement(e.id)?;
        let values = e.params.values.filter(|v| !v.named)?;
        let token = rewrite::partition_token(&entry.pk_indexes, values.raw)?;
        Some(Route {
            token,
            entry,
            others: Vec::new(),
            local_only: local_only(e.params.consistency, e.params.serial_consistency),
        })
    }

    /// A `LOCAL_*` consistency or serial consistency.
    fn local_only(consistency: u16, serial: Option<u16>) -> bool {
        rewrite::is_local_consistency(consistency)
            || serial.is_some_and(rewrite::is_local_consistency)
    }

    /// What routing a client's BATCH message needs, when every child is a statement the
    /// client prepared through autoprep and all name the same partition (a single-partition
    /// batch), with positional values.
    pub(super) fn client_batch(ctx: &Context, header: &Header, body: &[u8]) -> Option<Route> {
        use autoprep_protocol::message::batch::{BatchQuery, BatchView};
        let rb = RequestBody::parse(header, body).ok()?;
        let b = BatchView::parse(rb.message, header.version).ok()?;
        let mut token = None;
        let mut entries: Vec<Arc<PreparedEntry>> = Vec::new();
        for child in b.children() {
            let child = child.ok()?;
            let BatchQuery::Prepared(id) = child.query else {
                return None;
            };
            let entry = ctx.cluster.client_statement(id)?;
            if child.values.named {
                return None;
            }
            let t = rewrite::partition_token(&entry.pk_indexes, child.values.raw)?;
            if token.is_some_and(|first| first != t) {
                return None;
            }
            token = Some(t);
            let keyspace = |e: &PreparedEntry| e.tables.first().map(|t| t.0.clone());
            if entries
                .first()
                .is_some_and(|first| keyspace(first) != keyspace(&entry))
            {
                return None;
            }
            if !entries.iter().any(|e| e.id == entry.id) {
                entries.push(entry);
            }
        }
        let mut entries = entries.into_iter();
        Some(Route {
            token: token?,
            entry: entries.next()?,
            others: entries.collect(),
            local_only: local_only(b.params.consistency, b.params.serial_consistency),
        })
    }

    /// Sends the reads of a cluster-view refresh on the home connection.
    async fn refresh(shared: &Shared, version: ProtocolVersion) {
        for (part, text) in READS {
            let Some(frame) = schema_agreement::query_frame(version, text) else {
                continue;
            };
            let up = allocate(shared, &shared.upstream, Pending::ClusterRead(part), None).await;
            if send_upstream(&shared.upstream, frame, up).await.is_err() {
                return;
            }
        }
    }

    /// Opens the connection to the replica `addr` in the background.
    fn open(ctx: &Arc<Context>, shared: &Arc<Shared>, addr: std::net::SocketAddr) {
        let (ctx, shared) = (ctx.clone(), shared.clone());
        let task = async move {
            let handshake = shared.lock().handshake.clone();
            if !handshake.complete {
                shared.links.failed(addr, Instant::now());
                return;
            }
            let opened = replica::open(
                addr,
                &handshake,
                ctx.upstream_tls.as_ref(),
                ctx.cfg.max_frame_bytes,
            )
            .await;
            drop(handshake);
            match opened {
                Ok(o) => {
                    debug!(replica = %addr, "replica connection open");
                    let link = o.link.clone();
                    let reader = tokio::spawn(read(ctx, shared.clone(), o).in_current_span());
                    let compression = shared.lock().compression;
                    if spend_use_warning(&link, compression).await {
                        shared.links.opened(link, reader);
                    } else {
                        reader.abort();
                        link.close();
                        shared.links.failed(addr, Instant::now());
                    }
                }
                Err(e) => {
                    info!(replica = %addr, error = %e, "replica connection not opened; its requests go home");
                    shared.links.failed(addr, Instant::now());
                }
            }
        };
        tokio::spawn(task.in_current_span());
    }

    /// Spends the replica connection's once-per-connection warning "`USE <keyspace>` with
    /// prepared statements is considered to be an anti-pattern" on requests of the proxy's
    /// own, whose answers stop here. Cassandra (5.0.6) gives it on the first fresh PREPARE of
    /// an unqualified statement (`QueryProcessor.prepare`; not when the statement is already
    /// in its cache) or the first EXECUTE of one prepared in another keyspace than the
    /// connection's (`ExecuteMessage.execute`): a routed EXECUTE would otherwise carry it to a
    /// client that directly never sees it. So: `USE system`, PREPARE `SELECT key FROM local`
    /// (prepared in `system`), `USE system_schema`, EXECUTE it (a read of `system.local`).
    async fn spend_use_warning(link: &Link, compression: Option<Compression>) -> bool {
        let _turn = link.prepare_turn.lock().await;
        let version = link.version;
        let ok = |a: &Option<Envelope>| {
            a.as_ref()
                .is_some_and(|a| a.header().opcode == Opcode::RESULT)
        };
        let query = |q: &str| schema_agreement::query_frame(version, q);
        let Some(use_system) = query("USE system") else {
            return false;
        };
        if !ok(&link.request(use_system).await) {
            return false;
        }
        let Some(prepare) = prepare_frame(version, "SELECT key FROM local", None) else {
            return false;
        };
        let answer = link.request(prepare).await;
        let Some(id) = answer.as_ref().and_then(|a| prepared_id(a, compression)) else {
            return false;
        };
        let Some(use_other) = query("USE system_schema") else {
            return false;
        };
        if !ok(&link.request(use_other).await) {
            return false;
        }
        link.set_keyspace(Some("system_schema".to_owned()));
        let mut body = Vec::with_capacity(64);
        let params = autoprep_protocol::message::query::QueryParams {
            consistency: 0x0001,
            ..Default::default()
        };
        let encoded = autoprep_protocol::message::execute::encode_execute(
            version,
            &id,
            &[],
            &params,
            &mut body,
        );
        if encoded.is_err() {
            return false;
        }
        let execute = Envelope::request_frame(version, Opcode::EXECUTE, &body);
        ok(&link.request(execute).await)
    }

    /// Prepares `entry` on the replica of `link` (on v4 after setting its keyspace on that
    /// connection, never beside it); the node then holds the id.
    async fn prepare_on(
        ctx: Arc<Context>,
        link: Arc<Link>,
        entry: Arc<PreparedEntry>,
        compression: Option<Compression>,
    ) {
        let _turn = link.prepare_turn.lock().await;
        let version = link.version;
        let ks = entry.keyspace.clone();
        if version < ProtocolVersion::V5 && ks.is_some() && link.keyspace() != ks {
            let name = ks.as_deref().unwrap_or_default().replace('"', "\"\"");
            let ok = match schema_agreement::query_frame(version, &format!("USE \"{name}\"")) {
                Some(f) => link
                    .request(f)
                    .await
                    .is_some_and(|a| a.header().opcode == Opcode::RESULT),
                None => false,
            };
            if !ok {
                link.done_preparing(&entry.id);
                return;
            }
            link.set_keyspace(ks.clone());
        }
        let kf = if version >= ProtocolVersion::V5 {
            ks.as_deref()
        } else {
            None
        };
        if let Some(frame) = prepare_frame(version, &entry.text, kf) {
            if let Some(answer) = link.request(frame).await {
                // The id is md5 of keyspace and text on every node: the same id proves the
                // same statement (see `prepare_proof` for the home node's own proof).
                let same = prepared_id(&answer, compression).is_some_and(|id| id == entry.id);
                if same {
                    ctx.cluster.learn(link.addr, &entry.id);
                } else {
                    debug!(replica = %link.addr, "a replica's PREPARED answer differs; not routed there");
                }
            }
        }
        link.done_preparing(&entry.id);
    }

    /// The id of a PREPARED answer (the replica connection negotiated the client's
    /// `compression`, its STARTUP being the client's).
    fn prepared_id(env: &Envelope, compression: Option<Compression>) -> Option<Bytes> {
        if env.header().opcode != Opcode::RESULT {
            return None;
        }
        let body = plain_body(env, compression, usize::MAX)?;
        let rb = ResponseBody::parse(env.header(), &body).ok()?;
        match ResultView::parse(rb.message, env.header().version).ok()? {
            ResultView::Prepared(p) => Some(Bytes::copy_from_slice(p.id)),
            _ => None,
        }
    }

    /// Reads a replica connection's answers and gives each to the client under its own stream
    /// id; an UNPREPARED answer sends the client's request home instead. When the connection
    /// ends, requests still in flight on it may have run: the client gets an Overloaded error
    /// for each (drivers retry what is idempotent, as after a coordinator's failure).
    async fn read(ctx: Arc<Context>, shared: Arc<Shared>, o: replica::Opened) {
        let replica::Opened {
            link,
            reader: mut rd,
            mut decoder,
            mut buf,
            writer: _writer,
        } = o;
        let version = link.version;
        let compression = shared.lock().compression;
        'conn: loop {
            loop {
                let env = match decoder.decode(&mut buf) {
                    Ok(Some(env)) => env,
                    Ok(None) => break,
                    Err(_) => break 'conn,
                };
                if env.header().stream.0 < 0 {
                    continue;
                }
                match link.answered(env.header().stream.0) {
                    Some(Routed::Own(tx)) => {
                        let _ = tx.send(env);
                    }
                    Some(Routed::Client {
                        stream,
                        original,
                        id,
                        hash,
                        tag,
                        literals,
                        ..
                    }) => {
                        let unprepared = env.header().opcode == Opcode::ERROR
                            && unprepared_id(&env, compression, ctx.cfg.max_frame_bytes).is_some();
                        if unprepared {
                            ctx.cluster.forget(link.addr, &id);
                            Metrics::inc(&ctx.metrics.unprepared_recoveries);
                            // Home, as the client sent it (after the home node learns the
                            // statements it prepared with literals inline, if any).
                            let to = &shared.upstream;
                            if materialize(&ctx, &shared, to, stream, literals, original, None)
                                .await
                                .is_err()
                            {
                                break 'conn;
                            }
                            shared.upstream.flush();
                            continue;
                        }
                        ctx.metrics.responded(tag);
                        let mut env = match hash {
                            Some(hash) if version >= ProtocolVersion::V5 => {
                                without_metadata_change(env, shared.node, hash, &id, &ctx)
                            }
                            _ => env,
                        };
                        env.set_stream(StreamId(stream));
                        if shared
                            .client
                            .send(Out::Envelope(env.into_frame()))
                            .await
                            .is_err()
                        {
                            break 'conn;
                        }
                    }
                    None => {}
                }
            }
            shared.client.flush();
            reserve_read_room(&mut buf);
            match rd.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        shared.links.failed(link.addr, Instant::now());
        for r in link.take_in_flight() {
            if let Routed::Client {
                stream,
                original,
                read: true,
                literals,
                ..
            } = r
            {
                // A read changes nothing: it goes home.
                let to = &shared.upstream;
                let _ = materialize(&ctx, &shared, to, stream, literals, original, None).await;
                shared.upstream.flush();
            } else if let Routed::Client { stream, .. } = r {
                let msg = format!(
                    "autoprep: the connection to the replica {} ended with this request in flight; it may have run",
                    link.addr
                );
                let _ = shared
                    .client
                    .send(Out::Envelope(crate::limit::overloaded(
                        version, stream, &msg,
                    )))
                    .await;
            }
        }
        shared.client.flush();
        info!(replica = %link.addr, "replica connection ended; its requests go home");
    }
}

/// The pending entry of a request that goes upstream as the client sent it.
fn as_sent(
    stream: i16,
    use_keyspace: bool,
    topology: Option<topology::Read>,
    schema_change: bool,
) -> Pending {
    match topology {
        Some(read) => Pending::Topology { stream, read },
        None if schema_change => Pending::SchemaChange { stream },
        None => Pending::Client {
            stream,
            use_keyspace,
        },
    }
}

/// Sends the proxy's own PREPARE of a shape on this connection (so it inherits the
/// authentication and protocol version); its answer fills the cache and stops there. On v5 the
/// PREPARE names the keyspace the statement runs in, so that it never depends on the
/// connection's; on v4 the answer is used only if proven (see [`crate::prepare_proof`]).
async fn send_prepare(
    p: PrepareRequest,
    version: ProtocolVersion,
    ctx: &Context,
    shared: &Shared,
    to_upstream: &Outbox,
    client: Option<Box<literal_prepare::ClientPrepare>>,
) -> Result<(), End> {
    let Some(frame) = prepare_frame(version, &p.text, p.keyspace.as_deref()) else {
        ctx.rewriter.cache.abandoned(shared.node, p.hash);
        if let Some(c) = client {
            return pass_client_prepare(*c, ctx, shared, to_upstream).await;
        }
        return Ok(());
    };
    let epochs = Epochs::now(ctx, shared);
    let exposed = version < ProtocolVersion::V5 || p.keyspace.is_none();
    if exposed {
        shared.lock().exposed_prepares += 1;
    }
    let up = allocate(
        shared,
        to_upstream,
        Pending::Prepare {
            hash: p.hash,
            fingerprint: p.fingerprint,
            text: p.text,
            keyspace: p.keyspace,
            epochs,
            exposed,
            client,
        },
        None,
    )
    .await;
    send_upstream(to_upstream, frame, up).await
}

/// Sends a client's PREPARE of a statement with literals inline to the server as it was.
async fn pass_client_prepare(
    c: literal_prepare::ClientPrepare,
    ctx: &Context,
    shared: &Shared,
    to_upstream: &Outbox,
) -> Result<(), End> {
    let pending = client_prepare_pending(ctx, shared, &c.header, c.stream, &c.body);
    let up = allocate(shared, to_upstream, pending, None).await;
    send_upstream(to_upstream, BytesMut::from(&c.original[..]), up).await
}

/// The pending entry of a client's PREPARE forwarded as it was (remembered for routing when
/// routing is on).
fn client_prepare_pending(
    ctx: &Context,
    shared: &Shared,
    header: &Header,
    stream: i16,
    body: &[u8],
) -> Pending {
    let (keyspace, settled) = {
        let st = shared.lock();
        (st.keyspace.clone(), st.use_in_flight == 0)
    };
    let ks = rewrite::ConnKeyspace {
        name: keyspace.as_deref(),
        settled,
    };
    match routing::client_prepare(stream, header, Some(body), ks) {
        Some(Pending::ClientPrepare {
            stream,
            route,
            names_keyspace,
        }) => Pending::ClientPrepare {
            stream,
            route: route.filter(|_| ctx.cluster.enabled()),
            names_keyspace,
        },
        _ => Pending::client(stream),
    }
}

/// Decides a client's PREPARE of a statement with literals inline (see [`literal_prepare`]):
/// answers it here, or sends the PREPARE of its shape in its place; `Err` gives the PREPARE
/// back to be forwarded as it is (the reason counted).
async fn literal_prepare_request(
    c: literal_prepare::ClientPrepare,
    may_prepare: bool,
    ctx: &Context,
    shared: &Shared,
    to_upstream: &Outbox,
) -> Result<Result<(), literal_prepare::ClientPrepare>, End> {
    let (keyspace, settled, use_warning_due) = {
        let st = shared.lock();
        (
            st.keyspace.clone(),
            st.use_in_flight == 0,
            !st.use_warning_given,
        )
    };
    let conn = literal_prepare::Conn {
        node: shared.node,
        keyspace: rewrite::ConnKeyspace {
            name: keyspace.as_deref(),
            settled,
        },
        use_warning_due,
        may_prepare,
    };
    match literal_prepare::decide_prepare(&ctx.rewriter, &c.header, &c.body, conn, Instant::now()) {
        literal_prepare::PrepareDecision::Answer { message, warning } => {
            ctx.metrics.literal_prepare(Ok(()));
            if warning.is_some() {
                shared.lock().use_warning_given = true;
            }
            let frame = literal_prepare::answer_frame(
                c.header.version,
                c.stream,
                &message,
                warning.as_deref(),
            );
            shared
                .client
                .send(Out::Envelope(frame))
                .await
                .map_err(|_| End::WriterGone)?;
            Ok(Ok(()))
        }
        literal_prepare::PrepareDecision::PrepareShape(p) => {
            let version = c.header.version;
            send_prepare(p, version, ctx, shared, to_upstream, Some(Box::new(c))).await?;
            Ok(Ok(()))
        }
        literal_prepare::PrepareDecision::Pass(reason) => {
            if reason != literal_prepare::NO_LITERAL {
                ctx.metrics.literal_prepare(Err(reason));
            }
            Ok(Err(c))
        }
    }
}

/// The frame of a PREPARE of the proxy's own (`keyspace`: the v5 field).
fn prepare_frame(version: ProtocolVersion, text: &str, keyspace: Option<&str>) -> Option<BytesMut> {
    let mut body = Vec::with_capacity(text.len() + 16);
    encode_prepare(version, text.as_bytes(), keyspace, &mut body).ok()?;
    Some(Envelope::request_frame(version, Opcode::PREPARE, &body))
}

/// Reads server envelopes and returns each to the client under its own stream id.
async fn upstream_to_client(
    mut rd: impl AsyncRead + Unpin,
    ctx: &Context,
    shared: &Shared,
    to_client: &Outbox,
    to_upstream: &Outbox,
) -> End {
    let envelopes = EnvelopeDecoder::new(Direction::Response, ctx.cfg.max_frame_bytes);
    let mut framed: Option<FramedDecoder> = None;
    let mut buf = BytesMut::new();
    let client_stopped = shared.client_stopped.cancelled();
    tokio::pin!(client_stopped);
    loop {
        loop {
            let next = match &mut framed {
                Some(f) => f.decode(&mut buf),
                None => envelopes.decode(&mut buf).map_err(SegmentError::from),
            };
            let mut env = match next {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(e) => return End::BadUpstreamInput(e.to_string()),
            };
            let header = *env.header();
            if header.opcode == Opcode::READY || header.opcode == Opcode::AUTH_SUCCESS {
                shared.ready.store(true, Ordering::Release);
                shared.lock().handshake.complete = true;
            }
            if header.stream.0 < 0 && !keep_event(&env, ctx, shared) {
                continue;
            }
            if header.stream.0 >= 0 {
                let (pending, tag) = shared.lock().streams.release_tagged(header.stream.0);
                shared.freed.notify_one();
                let Some(pending) = pending else {
                    warn!(
                        stream = header.stream.0,
                        "response on a stream with no request; dropped"
                    );
                    continue;
                };
                match on_response(env, pending, ctx, shared, to_upstream).await {
                    Ok(Some(e)) => {
                        ctx.metrics.responded(tag);
                        env = e
                    }
                    Ok(None) => continue,
                    Err(end) => return end,
                }
            }
            if env.header().flags.has(Flags::WARNING) && ctx.cfg.prepare_literals {
                let compression = shared.lock().compression;
                if carries_use_warning(&env, compression, ctx.cfg.max_frame_bytes) {
                    shared.lock().use_warning_given = true;
                }
            }
            let starts_framing = framed.is_none()
                && header.version >= ProtocolVersion::V5
                && (header.opcode == Opcode::READY || header.opcode == Opcode::AUTHENTICATE);
            if starts_framing {
                let lz4 = shared.lock().lz4_requested;
                // Order matters: the upstream writer and the client reader switch before the
                // client can see READY and send its first framed request.
                if to_upstream.send(Out::StartFraming { lz4 }).await.is_err() {
                    return End::WriterGone;
                }
                shared.lock().client_framing = Some(lz4);
                framed = Some(FramedDecoder::new(
                    SegmentDecoder::new(lz4),
                    envelopes.clone(),
                ));
                let sent = to_client
                    .send(Out::Envelope(env.into_frame()))
                    .await
                    .is_ok()
                    && to_client.send(Out::StartFraming { lz4 }).await.is_ok();
                if !sent {
                    return End::WriterGone;
                }
                debug!(lz4, "v5 framing started");
                continue;
            }
            if to_client
                .send(Out::Envelope(env.into_frame()))
                .await
                .is_err()
            {
                return End::WriterGone;
            }
        }
        // Everything this read brought leaves in one write per socket.
        to_client.flush();
        to_upstream.flush();
        let stopping = shared.client_stopped.is_cancelled();
        let mut links_busy = false;
        {
            let mut st = shared.lock();
            if stopping && st.streams.in_use() == 0 {
                // Answers still due on replica connections are delivered first (their
                // readers give no signal here: looked at again shortly).
                if shared.links.in_flight() == 0 {
                    return End::Closing;
                }
                links_busy = true;
            }
            st.streams.shrink_if_idle();
        }
        reserve_read_room(&mut buf);
        let read = tokio::select! {
            biased;
            read = rd.read_buf(&mut buf) => read,
            () = &mut client_stopped, if !stopping => continue,
            () = tokio::time::sleep(Duration::from_millis(10)), if links_busy => continue,
        };
        match read {
            Ok(0) => return End::UpstreamClosed,
            Ok(_) => {}
            Err(e) => return End::UpstreamIo(e),
        }
    }
}

/// The response `env` without Cassandra's warning about `USE` with prepared statements (a
/// warning the server gives once per connection, which the client already had from the
/// proxy). The body is rebuilt uncompressed.
fn without_use_warning(env: Envelope, compression: Option<Compression>, max: usize) -> Envelope {
    use autoprep_protocol::primitives::write_string;
    let header = *env.header();
    let rebuilt = (|| {
        let body = plain_body(&env, compression, max)?;
        let rb = ResponseBody::parse(&header, &body).ok()?;
        let kept: Vec<&str> = rb
            .warnings?
            .collect::<Result<Vec<_>, _>>()
            .ok()?
            .into_iter()
            .filter(|w| !w.starts_with(literal_prepare::USE_WARNING_PREFIX))
            .collect();
        let mut out = Vec::with_capacity(body.len());
        out.extend_from_slice(rb.tracing_id.unwrap_or_default());
        if !kept.is_empty() {
            out.extend_from_slice(&(kept.len() as u16).to_be_bytes());
            for w in &kept {
                write_string(&mut out, w).ok()?;
            }
        }
        out.extend_from_slice(rb.custom_payload.unwrap_or_default());
        out.extend_from_slice(rb.message);
        let mut flags = header.flags.0 & !Flags::COMPRESSION;
        if kept.is_empty() {
            flags &= !Flags::WARNING;
        }
        Some(Envelope::new(
            Header {
                flags: Flags(flags),
                ..header
            },
            &out,
        ))
    })();
    rebuilt.unwrap_or(env)
}

/// Whether a response carries Cassandra's once-per-connection warning about `USE` with
/// prepared statements (the proxy gives it to the client itself when it answers a PREPARE:
/// see [`literal_prepare`]).
fn carries_use_warning(env: &Envelope, compression: Option<Compression>, max: usize) -> bool {
    let Some(body) = plain_body(env, compression, max) else {
        return false;
    };
    ResponseBody::parse(env.header(), &body)
        .ok()
        .and_then(|rb| rb.warnings)
        .is_some_and(|mut w| {
            w.any(|m| m.is_ok_and(|m| m.starts_with(literal_prepare::USE_WARNING_PREFIX)))
        })
}

/// Whether a server-initiated envelope (an EVENT) reaches the client (see [`topology`]).
fn keep_event(env: &Envelope, ctx: &Context, shared: &Shared) -> bool {
    let compression = shared.lock().compression;
    if env.header().opcode == Opcode::EVENT {
        let schema = schema_changed(env, compression, ctx.cfg.max_frame_bytes, ctx);
        ctx.cluster.event_seen(!schema);
    }
    let keep = topology::keep_event(env, compression, ctx.cfg.max_frame_bytes);
    if !keep {
        Metrics::inc(&ctx.metrics.events_dropped);
        debug!("topology or status event kept from the client");
    }
    keep
}

/// Handles a response to a request in flight. Returns the envelope to give the client (under
/// the client's stream id), or `None` when the response stops at the proxy.
async fn on_response(
    mut env: Envelope,
    pending: Pending,
    ctx: &Context,
    shared: &Shared,
    to_upstream: &Outbox,
) -> Result<Option<Envelope>, End> {
    // Only the rare branches below need the body, so only they read the negotiated compression:
    // most responses take no lock here.
    let compression = || shared.lock().compression;
    let max = ctx.cfg.max_frame_bytes;
    match pending {
        Pending::Client {
            stream,
            use_keyspace,
        } => {
            if use_keyspace {
                let ks = (env.header().opcode == Opcode::RESULT)
                    .then(|| set_keyspace(&env, compression(), max))
                    .flatten();
                let mut st = shared.lock();
                st.use_in_flight = st.use_in_flight.saturating_sub(1);
                if let Some(ks) = ks {
                    st.keyspace = Some(ks.into());
                }
            }
            if env.header().opcode == Opcode::SUPPORTED {
                let scylla = topology::announces_scylla(&env);
                ctx.rewriter.flavors.learn(shared.node, scylla);
                env = topology::supported(env, compression(), max);
            }
            env.set_stream(StreamId(stream));
            Ok(Some(env))
        }
        Pending::SchemaChange { stream } => {
            let up = env.header().stream.0;
            env.set_stream(StreamId(stream));
            let changed = schema_changed(&env, compression(), max, ctx);
            let hold = ctx.cfg.schema_agreement_wait_ms > 0 && changed;
            if !hold {
                return Ok(Some(env));
            }
            let step = schema_agreement::Check::start(env, Instant::now());
            schema_step(step, up, shared, to_upstream).await
        }
        Pending::SchemaCheck(check) => {
            let up = env.header().stream.0;
            let wait = Duration::from_millis(ctx.cfg.schema_agreement_wait_ms);
            let step = check.next(&env, compression(), max, Instant::now(), wait);
            schema_step(step, up, shared, to_upstream).await
        }
        Pending::Topology { stream, read } => {
            let mut env = ctx.topology.on_response(
                env,
                &read,
                shared.local,
                compression(),
                max,
                &ctx.metrics,
            );
            env.set_stream(StreamId(stream));
            Ok(Some(env))
        }
        Pending::Prepare {
            hash,
            fingerprint,
            text,
            keyspace,
            epochs,
            exposed,
            client,
        } => {
            if exposed {
                exposed_prepare_answered(shared);
            }
            if Epochs::now(ctx, shared) != epochs {
                // A USE or a schema change came between: the answer may describe either.
                Metrics::inc(&ctx.metrics.prepares_unproven);
                debug!("a PREPARE of the proxy's raced a USE or a schema change; not used");
                ctx.rewriter.cache.abandoned(shared.node, hash);
            } else {
                prepared(
                    &env,
                    shared.node,
                    (hash, fingerprint),
                    text,
                    keyspace,
                    ctx,
                    compression(),
                );
            }
            if let Some(c) = client {
                // The client's PREPARE it stood in for: answered from the shape now, or sent
                // as it was.
                if let Err(c) = literal_prepare_request(*c, false, ctx, shared, to_upstream).await?
                {
                    pass_client_prepare(c, ctx, shared, to_upstream).await?;
                }
            }
            Ok(None)
        }
        Pending::ClientPrepare {
            stream,
            route,
            names_keyspace,
        } => {
            if let Some((text, keyspace)) = route {
                routing::client_prepared(ctx, &env, text, keyspace, compression());
            }
            let given = !names_keyspace && shared.lock().use_warning_given;
            if given && env.header().flags.has(Flags::WARNING) {
                env = without_use_warning(env, compression(), max);
            }
            env.set_stream(StreamId(stream));
            Ok(Some(env))
        }
        Pending::Materialize {
            stream,
            rest,
            original,
            exposed,
        } => {
            if exposed {
                exposed_prepare_answered(shared);
            }
            // Whatever the answer, the client's request goes on: if the server still does not
            // know an id, it answers UNPREPARED, and the driver prepares it again.
            let up = env.header().stream.0;
            materialize(ctx, shared, to_upstream, stream, rest, original, Some(up)).await?;
            Ok(None)
        }
        Pending::ClusterRead(part) => {
            let body = plain_body(&env, compression(), max);
            let result = body.as_deref().and_then(|b| {
                let rb = ResponseBody::parse(env.header(), b).ok()?;
                (env.header().opcode == Opcode::RESULT)
                    .then(|| ResultView::parse(rb.message, env.header().version).ok())
                    .flatten()
            });
            ctx.cluster.answer(part, result);
            Ok(None)
        }
        Pending::Rewritten {
            stream,
            original,
            used,
            topology,
            literals,
        } => {
            let client_execute = literals.as_ref().is_some_and(|l| l.execute);
            if env.header().opcode == Opcode::ERROR {
                if let Some(unknown) = unprepared_id(&env, compression(), max) {
                    for hash in used.with_id(&unknown) {
                        ctx.rewriter.cache.invalidate(shared.node, hash, &unknown);
                    }
                    if ctx.rewriter.flavors.is_scylla(shared.node) {
                        ctx.rewriter.flavors.evicted(shared.node, Instant::now());
                    }
                    if let Some(literals) = literals {
                        // The client's request names ids the server never saw: it learns them
                        // first (replayed as it is, it would be answered UNPREPARED).
                        Metrics::inc(&ctx.metrics.unprepared_recoveries);
                        let up = Some(env.header().stream.0);
                        let statements = literals.statements;
                        materialize(ctx, shared, to_upstream, stream, statements, original, up)
                            .await?;
                        return Ok(None);
                    }
                    let pending = match topology {
                        Some(read) => Pending::Topology { stream, read },
                        None => Pending::client(stream),
                    };
                    return replay(&env, pending, original, ctx, shared, to_upstream).await;
                }
            }
            let mut env = match &used {
                Used::One { hash, id }
                    if env.header().version >= ProtocolVersion::V5 && !client_execute =>
                {
                    without_metadata_change(env, shared.node, *hash, id, ctx)
                }
                _ => env,
            };
            if let Some(read) = &topology {
                let (c, m) = (compression(), &ctx.metrics);
                env = ctx.topology.on_response(env, read, shared.local, c, max, m);
            }
            env.set_stream(StreamId(stream));
            Ok(Some(env))
        }
    }
}

/// Carries out a step of a schema-agreement check: the held answer goes to the client, or the
/// next question goes upstream (after its delay) under `up`, the id whose answer just arrived.
async fn schema_step(
    step: schema_agreement::Step,
    up: i16,
    shared: &Shared,
    to_upstream: &Outbox,
) -> Result<Option<Envelope>, End> {
    match step {
        schema_agreement::Step::Forward(env) => Ok(Some(env)),
        schema_agreement::Step::Ask {
            check,
            request,
            delay,
        } => {
            shared
                .lock()
                .streams
                .allocate_exact(up, Pending::SchemaCheck(check));
            if delay.is_zero() {
                send_upstream(to_upstream, request, up).await?;
            } else {
                let to_upstream = to_upstream.clone();
                let later = async move {
                    tokio::time::sleep(delay).await;
                    let _ = send_upstream(&to_upstream, request, up).await;
                    to_upstream.flush();
                };
                tokio::spawn(later.in_current_span());
            }
            Ok(None)
        }
    }
}

/// The statement did not run (UNPREPARED): replay the client's original request under the
/// same upstream id, its answer awaited as `pending` (a plain client request, or a topology
/// read); the shape will be prepared again on this node.
async fn replay(
    env: &Envelope,
    pending: Pending,
    original: Bytes,
    ctx: &Context,
    shared: &Shared,
    to_upstream: &Outbox,
) -> Result<Option<Envelope>, End> {
    Metrics::inc(&ctx.metrics.unprepared_recoveries);
    debug!("the server no longer knows a rewritten statement (UNPREPARED); replaying the original request");
    let up = env.header().stream.0;
    shared.lock().streams.allocate_exact(up, pending);
    send_upstream(to_upstream, BytesMut::from(&original[..]), up).await?;
    Ok(None)
}

fn set_keyspace(env: &Envelope, compression: Option<Compression>, max: usize) -> Option<String> {
    let body = plain_body(env, compression, max)?;
    let rb = ResponseBody::parse(env.header(), &body).ok()?;
    match ResultView::parse(rb.message, env.header().version).ok()? {
        ResultView::SetKeyspace(k) => Some(k.to_owned()),
        _ => None,
    }
}

/// The id of an UNPREPARED error, if `env` is one.
fn unprepared_id(env: &Envelope, compression: Option<Compression>, max: usize) -> Option<Bytes> {
    let body = plain_body(env, compression, max)?;
    let rb = ResponseBody::parse(env.header(), &body).ok()?;
    match ErrorView::parse(rb.message, env.header().version)
        .ok()?
        .detail
    {
        ErrorDetail::Unprepared { id } => Some(Bytes::copy_from_slice(id)),
        _ => None,
    }
}

impl Epochs {
    /// The epochs as they stand.
    fn now(ctx: &Context, shared: &Shared) -> Epochs {
        Epochs {
            keyspace: shared.lock().keyspace_epoch,
            schema: ctx.rewriter.cache.schema_epoch(),
        }
    }
}

/// A RESULT Schema_change (the answer to a client's DDL) or a SCHEMA_CHANGE event: whether
/// `env` is one. The prepared shapes it concerns are dropped from the cache.
fn schema_changed(
    env: &Envelope,
    compression: Option<Compression>,
    max: usize,
    ctx: &Context,
) -> bool {
    let Some((keyspace, table)) = schema_agreement::changed_schema(env, compression, max) else {
        return false;
    };
    let dropped = ctx
        .rewriter
        .cache
        .schema_changed(&keyspace, table.as_deref());
    Metrics::add(&ctx.metrics.schema_invalidations, dropped as u64);
    // The server forgets the statements of that table: so does the map of statements prepared
    // with literals inline (their next EXECUTE is answered UNPREPARED, as directly).
    ctx.rewriter
        .literals
        .schema_changed(&keyspace, table.as_deref());
    debug!(
        keyspace,
        table, dropped, "schema change seen; prepared shapes of it dropped"
    );
    true
}

/// Records the answer to the proxy's own PREPARE in the cache, under the shape's hash (with
/// its MD5 fingerprint).
fn prepared(
    env: &Envelope,
    node: u32,
    (hash, fingerprint): (ShapeHash, [u8; 16]),
    text: String,
    keyspace: Option<String>,
    ctx: &Context,
    compression: Option<Compression>,
) {
    let now = Instant::now();
    let entry = (|| {
        if env.header().opcode != Opcode::RESULT {
            return None;
        }
        let body = plain_body(env, compression, ctx.cfg.max_frame_bytes)?;
        let rb = ResponseBody::parse(env.header(), &body).ok()?;
        let ResultView::Prepared(p) = ResultView::parse(rb.message, env.header().version).ok()?
        else {
            return None;
        };
        let mut bind_types = Vec::with_capacity(p.bind.columns.len());
        for c in p.bind.columns.iter() {
            bind_types.push(c.column_type().ok()?);
        }
        let proven = prepare_proof::expected_tables(&text, keyspace.as_deref())
            .filter(|expected| prepare_proof::binds_belong(&p.bind.columns, expected));
        let Some(tables) = proven else {
            return Some(Err(()));
        };
        Some(Ok(PreparedEntry {
            text,
            fingerprint,
            keyspace,
            id: Bytes::copy_from_slice(p.id),
            result_metadata_id: p.result_metadata_id.map(Bytes::copy_from_slice),
            bind_types,
            pk_indexes: p.bind.pk_indexes().collect(),
            result_metadata: Bytes::copy_from_slice(p.result.columns.map_or(&[][..], |c| c.raw())),
            tables,
            prepared_message: Bytes::copy_from_slice(rb.message),
        }))
    })();
    match entry {
        Some(Err(())) => {
            Metrics::inc(&ctx.metrics.prepares_unproven);
            debug!("a PREPARED answer not proven to be the shape's keyspace and table; not used");
            ctx.rewriter.cache.abandoned(node, hash);
        }
        Some(Ok(e)) => {
            // A normalized shape carries no literal values: safe to log.
            debug!(shape = %e.text, binds = e.bind_types.len(), "shape prepared");
            Metrics::inc(&ctx.metrics.prepares_ok);
            ctx.rewriter.cache.prepared(node, hash, e);
        }
        None => {
            Metrics::inc(&ctx.metrics.prepares_failed);
            ctx.rewriter.shapes.prepare_failed(hash);
            debug!("PREPARE of a shape failed; it passes through for a while");
            ctx.rewriter.cache.failed(node, hash, "prepare failed", now);
        }
    }
}

/// v5: a Rows answer to EXECUTE says when the result metadata changed since PREPARE (and
/// carries the new metadata id). The cache takes the new id; the client, which sent a QUERY,
/// gets the Rows a QUERY would have got: without that flag and id.
fn without_metadata_change(
    env: Envelope,
    node: u32,
    hash: ShapeHash,
    id: &[u8],
    ctx: &Context,
) -> Envelope {
    let header = *env.header();
    if header.opcode != Opcode::RESULT {
        return env;
    }
    let body = env.body();
    let Ok(rb) = ResponseBody::parse(&header, body) else {
        return env;
    };
    let prefix = body.len() - rb.message.len();
    let m = rb.message;
    // kind, flags, column count
    let Some(head) = m.get(..12) else { return env };
    let kind = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let flags = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    if kind != 2 || flags & metadata_flags::METADATA_CHANGED == 0 {
        return env;
    }
    let Ok(ResultView::Rows(rows)) = ResultView::parse(m, header.version) else {
        return env;
    };
    let Some(new_id) = rows.metadata.new_metadata_id else {
        return env;
    };
    // The new id sits right after the optional paging state.
    let mut pos = 12;
    if flags & metadata_flags::HAS_MORE_PAGES != 0 {
        let Some(l) = m.get(pos..pos + 4) else {
            return env;
        };
        pos += 4 + usize::try_from(i32::from_be_bytes([l[0], l[1], l[2], l[3]])).unwrap_or(0);
    }
    let id_end = pos + 2 + new_id.len();
    if m.get(pos..id_end).is_none() {
        return env;
    }
    ctx.rewriter.cache.update_result_metadata(
        node,
        hash,
        id,
        Bytes::copy_from_slice(new_id),
        Bytes::copy_from_slice(rows.metadata.columns.map_or(&[][..], |c| c.raw())),
    );
    let mut out = Vec::with_capacity(body.len());
    out.extend_from_slice(&body[..prefix + 4]);
    out.extend_from_slice(&(flags & !metadata_flags::METADATA_CHANGED).to_be_bytes());
    out.extend_from_slice(&m[8..pos]);
    out.extend_from_slice(&m[id_end..]);
    Envelope::new(header, &out)
}
