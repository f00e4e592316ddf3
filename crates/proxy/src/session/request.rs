//! The client side of a connection. Each request read is *classified* ([`classify`]: what it
//! is, what the rewrite makes of it) into a [`Route`], which [`send`] carries out: home as the
//! client sent it, rewritten, to a replica of its partition, or behind the proxy's own
//! PREPAREs. Classifying is synchronous and sends nothing; every wait (a free stream id, a
//! `USE` held back, a replica connection) belongs to sending.

use super::conn::{refuse, refuse_truncated, FrameReader};
use super::end::End;
use super::pending::{as_sent, client_prepare, LiteralRequest, Pending};
use super::routing;
use super::send::{
    allocate, allocate_in, hold_use, literal_prepare_request, materialize, pass_client_prepare,
    send_prepare, send_upstream,
};
use super::state::{Shared, State};
use crate::context::Context;
use crate::control::{self, Group};
use crate::metrics::Metrics;
use crate::protocol_error;
use crate::replica;
use crate::rewrite::literal_prepare;
use crate::rewrite::{self, ConnKeyspace, Decision, PrepareRequest, Used};
use crate::schema_agreement;
use crate::shapes::ShapeRef;
use crate::stamp::Stamp;
use crate::topology;
use crate::writer::{Out, Outbox};
use autoprep_protocol::compression::{plain_body, Compression};
use autoprep_protocol::envelope::{Direction, Envelope, Header, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::query::QueryRequest;
use autoprep_protocol::message::startup::StartupView;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::AsyncRead;
use tracing::debug;

/// Reads client envelopes and forwards them upstream under proxy-owned stream ids.
pub(super) async fn client_to_upstream(
    mut rd: impl AsyncRead + Unpin,
    ctx: &Arc<Context>,
    shared: &Arc<Shared>,
    to_upstream: &Outbox,
    to_client: &Outbox,
) -> End {
    let mut reader = FrameReader::new(Direction::Request, ctx.cfg.max_frame_bytes);
    let mut scratch = rewrite::Scratch::default();
    let closing = shared.closing.cancelled();
    tokio::pin!(closing);
    // When the last read returned: the clock is read once for every request one read brought.
    let mut read_at = Stamp::now();
    // Whether this connection asked for the cluster view's first read (see
    // `routing::first_view`).
    let mut view_asked = false;
    loop {
        loop {
            if !reader.is_framed() {
                if let Some(&lz4) = shared.client_framing.get() {
                    reader.start_framing(lz4);
                }
            }
            if let Some(run) = plain_run(&mut reader, read_at, ctx, shared) {
                if to_upstream.send(Out::Envelope(run)).await.is_err() {
                    return End::WriterGone;
                }
            }
            let env = match reader.next() {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(e) => return refuse(e, to_client).await,
            };
            // The common request, an EXECUTE the proxy neither rewrites nor routes, is
            // classified and sent without building a `Route` (moved a few times otherwise).
            let env = match plain_execute(env, read_at, ctx, shared) {
                Ok((frame, up)) => {
                    if let Err(end) = send_upstream(to_upstream, frame, up).await {
                        return end;
                    }
                    continue;
                }
                Err(env) => env,
            };
            let route = match classify(env, ctx, shared, &mut scratch) {
                // The common request, home as sent, takes its id and is pushed here, without
                // building `send`'s (large) future; it waits in `send` when no id is free.
                Route::AsSent(a) => match a.id_now(read_at, shared) {
                    Ok((frame, up)) => {
                        if let Err(end) = send_upstream(to_upstream, frame, up).await {
                            return end;
                        }
                        continue;
                    }
                    Err(a) => Route::AsSent(a),
                },
                route => route,
            };
            if let Err(end) = send(route, ctx, shared, to_upstream).await {
                return end;
            }
        }
        if !view_asked {
            view_asked = routing::first_view(ctx, shared).await;
        }
        // Everything this read brought leaves in one write per socket.
        to_upstream.flush();
        to_client.flush();
        // Checked before reading too: a client that always has more to send keeps the read
        // ready, and the biased select below would never look at `closing`.
        if shared.closing.is_cancelled() {
            return End::Closing;
        }
        let read = tokio::select! {
            biased;
            read = reader.read_from(&mut rd) => read,
            () = &mut closing => return End::Closing,
        };
        if let Ok(n) = read {
            ctx.metrics
                .bytes_from_clients
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        match read {
            Ok(0) if reader.unread().is_empty() => return End::ClientClosed,
            Ok(0) => return refuse_truncated(reader.unread(), reader.envelopes(), to_client).await,
            Ok(_) => read_at = Stamp::now(),
            Err(e) => return End::ClientIo(e),
        }
    }
}

/// What becomes of one client request.
enum Route {
    /// Answered by the proxy itself (an opcode Cassandra does not know).
    Answer(BytesMut),
    /// Home, as the client sent it.
    AsSent(AsSent),
    /// Rewritten into an EXECUTE (or a BATCH of prepared statements): to a replica of its
    /// partition when routing finds one ready, else home.
    Rewritten(Rewritten),
    /// The client's own prepared statement: to a replica of its partition when routing finds
    /// one ready, else home as sent.
    Replica {
        frame: BytesMut,
        route: rewrite::Route,
        req: routing::Request,
    },
    /// A request naming statements the client prepared with literals inline that the server
    /// never saw: they are prepared there first, then the request goes as sent.
    Materialize {
        stream: i16,
        statements: Vec<Arc<literal_prepare::Statement>>,
        original: Bytes,
        then: ShapePrepares,
    },
    /// A client's PREPARE with literals inline: answered from its shape, or sent behind the
    /// proxy's PREPARE of the shape, or sent as it was (decided when sent: the shape may be
    /// prepared by then).
    LiteralPrepare(literal_prepare::ClientPrepare),
}

/// A request that goes home as the client sent it.
struct AsSent {
    frame: BytesMut,
    /// What its answer is awaited as.
    pending: Pending,
    shape: Option<ShapeRef>,
    group: Group,
    then: ShapePrepares,
}

impl AsSent {
    /// Its frame and an upstream id taken now, when nothing has to happen before it is sent
    /// (a `USE` waits for the proxy's exposed PREPAREs) or after (the proxy's own PREPAREs)
    /// and an id is free; otherwise it is given back for [`send`]. (Given back by value: it
    /// moves once, to `send`; boxing it would allocate for every request that waits.)
    #[allow(clippy::result_large_err)]
    fn id_now(self, read_at: Stamp, shared: &Shared) -> Result<(BytesMut, i16), AsSent> {
        let plain = self.then.prepares.is_empty()
            && !matches!(
                self.pending,
                Pending::Client {
                    use_keyspace: true,
                    ..
                }
            );
        if !plain {
            return Err(self);
        }
        let AsSent {
            frame,
            pending,
            shape,
            group,
            then,
        } = self;
        let taken = shared
            .lock()
            .streams
            .allocate_at(pending, shape, group, read_at);
        match taken {
            Ok(up) => Ok((frame, up)),
            Err((pending, shape)) => Err(AsSent {
                frame,
                pending,
                shape,
                group,
                then,
            }),
        }
    }
}

/// The proxy's own PREPAREs of shapes, sent after the request (the rewrite asked for them).
struct ShapePrepares {
    version: ProtocolVersion,
    prepares: Vec<PrepareRequest>,
}

impl Route {
    /// Home as sent, awaited as `pending`, with nothing else to do.
    fn as_sent(env: Envelope, pending: Pending) -> Route {
        let version = env.header().version;
        Route::AsSent(AsSent {
            frame: env.into_frame(),
            pending,
            shape: None,
            group: Group::Other,
            then: ShapePrepares {
                version,
                prepares: Vec::new(),
            },
        })
    }
}

/// The connection's state a request is classified under, read once.
struct ConnState {
    compression: Option<Compression>,
    keyspace: Option<Arc<str>>,
    /// No `USE` in flight.
    settled: bool,
}

impl ConnState {
    fn of(shared: &Shared) -> ConnState {
        let st = shared.lock();
        ConnState {
            compression: st.compression,
            keyspace: st.keyspace.clone(),
            settled: st.use_in_flight == 0,
        }
    }

    fn keyspace(&self) -> ConnKeyspace<'_> {
        ConnKeyspace {
            name: self.keyspace.as_deref(),
            settled: self.settled,
        }
    }
}

/// Classifies one client request. Only the opcodes the proxy may act on have their body read
/// (decompressed once); everything else goes home as sent.
fn classify(
    env: Envelope,
    ctx: &Context,
    shared: &Shared,
    scratch: &mut rewrite::Scratch,
) -> Route {
    let header = *env.header();
    if header.opcode.0 > Opcode::AUTH_SUCCESS.0 {
        // Cassandra answers an opcode it does not know and then keeps failing every later
        // request on that connection; the proxy answers it the same way itself and keeps the
        // upstream connection sound.
        debug!(
            opcode = header.opcode.0,
            "unknown opcode answered by the proxy"
        );
        let msg = format!("Unknown opcode {}", header.opcode.0);
        return Route::Answer(protocol_error::build(header.version, header.stream.0, &msg));
    }
    ctx.metrics.request(header.opcode.0);
    note_handshake(&env, ctx, shared);
    // [otel hook] The request's facts for its span, while tracing is on.
    if ctx.tracing.enabled() {
        let st = &mut *shared.lock();
        let facts = crate::otel::Facts::of(&env, st.compression, st.keyspace.clone());
        st.traces.note(header.stream.0, facts);
    }
    let i = Interest::of(header.opcode, ctx, shared);
    let env = if i.literal_execute || i.route_client {
        match classify_prepared(env, &i, ctx, shared, scratch) {
            Ok(route) => return route,
            Err(env) => env,
        }
    } else {
        env
    };
    if i.text {
        return classify_text(env, i.rewrite, ctx, shared, scratch);
    }
    Route::as_sent(env, Pending::client(header.stream.0))
}

/// What the proxy reads a client request for, from its opcode and the connection's state; a
/// request it reads for nothing goes home as sent, its body unread.
struct Interest {
    /// The connection is authenticated and rewriting is on (see `Shared::ready`).
    rewrite: bool,
    /// An EXECUTE of a statement the client may have prepared with literals inline.
    literal_execute: bool,
    /// An EXECUTE or BATCH of the client's own prepared statements, which routing may send to
    /// a replica (one read of the body serves this and `literal_execute`).
    route_client: bool,
    /// CQL text to look at (QUERY, PREPARE, a BATCH to rewrite) or an EXECUTE that may read
    /// the topology.
    text: bool,
}

impl Interest {
    fn of(opcode: Opcode, ctx: &Context, shared: &Shared) -> Interest {
        let rewrite = ctx.cfg.rewrite && shared.ready.load(Ordering::Acquire);
        let (is_batch, is_execute) = (opcode == Opcode::BATCH, opcode == Opcode::EXECUTE);
        Interest {
            rewrite,
            literal_execute: is_execute && rewrite && ctx.rewriter.literals.holds_any(),
            route_client: (is_execute || is_batch) && rewrite && ctx.cluster.may_route(),
            text: opcode == Opcode::QUERY
                || opcode == Opcode::PREPARE
                || is_execute && ctx.topology.has_prepared()
                || rewrite && is_batch,
        }
    }

    /// Read for nothing: home as sent.
    fn none(&self) -> bool {
        !(self.literal_execute || self.route_client || self.text)
    }
}

/// A client EXECUTE that [`classify`] would send home as it is (read for nothing: see
/// [`Interest`]), with the upstream id
/// it takes now; `Err` gives back any other request, and this one when every id is in flight
/// (`send` then waits for one).
#[allow(clippy::result_large_err)]
fn plain_execute(
    env: Envelope,
    read_at: Stamp,
    ctx: &Context,
    shared: &Shared,
) -> Result<(BytesMut, i16), Envelope> {
    let header = env.header();
    if header.opcode != Opcode::EXECUTE || !Interest::of(header.opcode, ctx, shared).none() {
        return Err(env);
    }
    let traced = ctx.tracing.enabled(); // [otel hook]
    match plain_execute_id(&mut shared.lock(), header, read_at, traced) {
        Some(up) => {
            ctx.metrics.request(Opcode::EXECUTE.0);
            Ok((env.into_frame(), up))
        }
        None => Err(env),
    }
}

/// The upstream id a plain EXECUTE (with `header`, once [`Interest`] found it read for
/// nothing) takes now; `None` for another request, or when every id is in flight.
fn plain_execute_id(st: &mut State, header: &Header, read_at: Stamp, traced: bool) -> Option<i16> {
    if header.opcode != Opcode::EXECUTE {
        return None;
    }
    // [otel hook] While tracing, a request with a custom payload (a client's traceparent) is
    // classified: its body is read.
    if traced
        && header
            .flags
            .has(autoprep_protocol::envelope::Flags::CUSTOM_PAYLOAD)
    {
        return None;
    }
    let pending = Pending::client(header.stream.0);
    let up = st
        .streams
        .allocate_at(pending, None, Group::Other, read_at)
        .ok()?;
    // [otel hook] Its facts for its span: the opcode and the connection's keyspace only.
    if traced {
        let facts = crate::otel::Facts::of_header(header, st.keyspace.clone());
        st.traces.note(header.stream.0, facts);
    }
    Some(up)
}

/// The plain EXECUTEs (see [`plain_execute`]) at the front of what was read, each under the
/// upstream id it takes, as one buffer: what [`plain_execute`] would do to each, without
/// splitting, pushing and joining each one (see [`FrameReader::take_run`]). `None` when the
/// first needs more or no id is free.
fn plain_run(
    reader: &mut FrameReader,
    read_at: Stamp,
    ctx: &Context,
    shared: &Shared,
) -> Option<BytesMut> {
    if !reader.may_have_run() || !Interest::of(Opcode::EXECUTE, ctx, shared).none() {
        return None;
    }
    let traced = ctx.tracing.enabled(); // [otel hook]
    let mut st = shared.lock();
    let mut n = 0;
    let run = reader.take_run(|h| {
        let up = plain_execute_id(&mut st, h, read_at, traced)?;
        n += 1;
        Some(StreamId(up))
    });
    drop(st);
    ctx.metrics.requests_of(Opcode::EXECUTE.0, n);
    run
}

/// Keeps what the connection's handshake negotiates (compression) and, when routing is on,
/// what opening a replica connection replays (STARTUP and AUTH_RESPONSE bodies).
fn note_handshake(env: &Envelope, ctx: &Context, shared: &Shared) {
    let header = env.header();
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
}

/// A client's EXECUTE or BATCH of statements it prepared: an EXECUTE of a statement prepared
/// with literals inline runs as its shape (or the server learns the statement first), and a
/// statement routing knows goes to a replica. `Err` gives the request back when neither applies.
fn classify_prepared(
    env: Envelope,
    i: &Interest,
    ctx: &Context,
    shared: &Shared,
    scratch: &mut rewrite::Scratch,
) -> Result<Route, Envelope> {
    let header = *env.header();
    let stream = header.stream.0;
    let conn = ConnState::of(shared);
    let body = plain_body(&env, conn.compression, ctx.cfg.max_frame_bytes);
    let decided = match &body {
        Some(b) if i.literal_execute => literal_prepare::decide_execute(
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
            let same_keyspace = conn.settled && conn.keyspace.as_deref() == statement.keyspace();
            return Ok(Route::Rewritten(Rewritten {
                frame,
                shape: Some(shape),
                stream,
                original: env.into_frame().freeze(),
                version: header.version,
                used,
                route,
                topology: None,
                same_keyspace,
                client_execute: true,
                literals: vec![statement],
            }));
        }
        Some(literal_prepare::Executed {
            decision: Decision::PassThrough { reason, .. },
            statement,
        }) => {
            // The server never saw the id: it learns it first.
            ctx.metrics.literal_execute(Err(reason));
            return Ok(Route::Materialize {
                stream,
                statements: vec![statement],
                original: env.into_frame().freeze(),
                then: ShapePrepares {
                    version: header.version,
                    prepares: Vec::new(),
                },
            });
        }
        None => {}
    }
    let route = body.as_deref().filter(|_| i.route_client).and_then(|b| {
        if header.opcode == Opcode::EXECUTE {
            routing::client_execute(ctx, &header, b)
        } else {
            routing::client_batch(ctx, &header, b)
        }
    });
    let Some(route) = route else {
        return Err(env);
    };
    let same_keyspace = conn.settled && conn.keyspace.as_deref() == route.entry.keyspace.as_deref();
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
    Ok(Route::Replica { frame, route, req })
}

/// A request with CQL text (QUERY, PREPARE, BATCH) or an EXECUTE of a topology read: the
/// topology and schema-change checks, then the rewrite's decision.
fn classify_text(
    env: Envelope,
    rewrite: bool,
    ctx: &Context,
    shared: &Shared,
    scratch: &mut rewrite::Scratch,
) -> Route {
    let header = *env.header();
    let stream = header.stream.0;
    let (is_query, is_batch) = (
        header.opcode == Opcode::QUERY,
        header.opcode == Opcode::BATCH,
    );
    let conn = ConnState::of(shared);
    let ks = conn.keyspace();
    let body = plain_body(&env, conn.compression, ctx.cfg.max_frame_bytes);
    // A QUERY is parsed once here for the topology, schema-change and rewrite checks.
    let query = match &body {
        Some(b) if is_query => QueryRequest::parse(&header, b).ok(),
        _ => None,
    };
    // A topology read (system.local, system.peers...) gets its answer rewritten, whether the
    // request itself is rewritten or not.
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
        return Route::LiteralPrepare(literal_prepare::ClientPrepare {
            stream,
            header,
            body: Bytes::copy_from_slice(b),
            original: Bytes::copy_from_slice(env.as_bytes()),
        });
    }
    if !(rewrite && (is_query || is_batch)) {
        let client_prepare =
            (header.opcode == Opcode::PREPARE && topology.is_none() && ctx.cluster.enabled())
                .then(|| client_prepare(stream, &header, body.as_deref(), ks))
                .flatten();
        let pending =
            client_prepare.unwrap_or_else(|| as_sent(stream, false, topology, schema_change));
        return Route::as_sent(env, pending);
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
        (None, Some(b)) if is_batch => rewrite::batch::decide_batch(
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
    // [otel hook] What the rewrite made of it.
    if ctx.tracing.enabled() {
        let outcome = match &decision {
            Decision::Execute { .. } => "rewritten",
            Decision::PassThrough { reason, .. } => *reason,
        };
        shared.lock().traces.rewrite(stream, outcome);
    }
    // The statements a BATCH names that the client prepared with literals inline.
    let literals = match &body {
        Some(b) if is_batch => literal_prepare::statements_in(&ctx.rewriter, &header, b),
        _ => Vec::new(),
    };
    match decision {
        Decision::Execute { frame, used, route } => {
            Metrics::inc(&ctx.metrics.queries_rewritten);
            Route::Rewritten(Rewritten {
                frame,
                shape,
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
            })
        }
        Decision::PassThrough {
            reason,
            prepare,
            use_keyspace,
        } => {
            ctx.metrics.passthrough(reason);
            let then = ShapePrepares {
                version: header.version,
                prepares: prepare,
            };
            if !literals.is_empty() {
                // A batch of statements the server never saw: it learns them first.
                return Route::Materialize {
                    stream,
                    statements: literals,
                    original: env.into_frame().freeze(),
                    then,
                };
            }
            let group = if reason == control::REASON {
                Group::Control
            } else {
                Group::Other
            };
            Route::AsSent(AsSent {
                frame: env.into_frame(),
                pending: as_sent(stream, use_keyspace, topology, schema_change),
                shape,
                group,
                then,
            })
        }
    }
}

/// Carries out a request's route.
async fn send(
    route: Route,
    ctx: &Arc<Context>,
    shared: &Arc<Shared>,
    to_upstream: &Outbox,
) -> Result<(), End> {
    match route {
        Route::Answer(frame) => shared
            .client
            .send(Out::Envelope(frame))
            .await
            .map_err(|_| End::WriterGone),
        Route::AsSent(a) => {
            if let Pending::Client {
                use_keyspace: true, ..
            } = a.pending
            {
                // The keyspace is not known until the USE is answered; it never runs beside a
                // PREPARE of the proxy's that takes its keyspace from the connection.
                hold_use(ctx, shared, to_upstream).await;
                let mut st = shared.lock();
                st.use_in_flight += 1;
                st.keyspace_epoch += 1;
            }
            let up = allocate_in(shared, to_upstream, a.pending, a.shape, a.group).await;
            send_upstream(to_upstream, a.frame, up).await?;
            prepare_shapes(a.then, ctx, shared, to_upstream).await
        }
        Route::Rewritten(r) => send_rewritten(ctx, shared, to_upstream, r).await,
        Route::Replica { frame, route, req } => {
            let stream = req.stream;
            let outcome = routing::route(ctx, shared, frame, route, req).await;
            // [otel hook] Where routing sent it.
            if ctx.tracing.enabled() {
                let to = outcome.as_ref().map(|_| ()).map_err(|(_, why)| *why);
                shared.lock().traces.routing(stream, to);
            }
            let frame = match outcome {
                Ok(()) => return Ok(()),
                Err((frame, _)) => frame,
            };
            let up = allocate(shared, to_upstream, Pending::client(stream), None).await;
            send_upstream(to_upstream, frame, up).await
        }
        Route::Materialize {
            stream,
            statements,
            original,
            then,
        } => {
            materialize(ctx, shared, to_upstream, stream, statements, original, None).await?;
            prepare_shapes(then, ctx, shared, to_upstream).await
        }
        Route::LiteralPrepare(c) => {
            match literal_prepare_request(c, true, ctx, shared, to_upstream).await? {
                Ok(()) => Ok(()),
                Err(c) => pass_client_prepare(c, ctx, shared, to_upstream).await,
            }
        }
    }
}

/// Sends the proxy's own PREPAREs the rewrite asked for.
async fn prepare_shapes(
    then: ShapePrepares,
    ctx: &Context,
    shared: &Shared,
    to_upstream: &Outbox,
) -> Result<(), End> {
    for p in then.prepares {
        send_prepare(p, then.version, ctx, shared, to_upstream, None).await?;
    }
    Ok(())
}

/// A client request the proxy rewrote into an EXECUTE (or a BATCH of prepared statements).
struct Rewritten {
    /// The request the proxy sends.
    frame: BytesMut,
    /// The statement's shape, for its statistics.
    shape: Option<ShapeRef>,
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
    r: Rewritten,
) -> Result<(), End> {
    // A QUERY sent as EXECUTE is the control comparison's other side.
    let group = if r.client_execute {
        Group::Other
    } else {
        Group::Rewritten
    };
    let shape = r.shape;
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
                group,
                literals: r.literals.clone(),
            };
            let outcome = routing::route(ctx, shared, r.frame, route, routed).await;
            // [otel hook] Where routing sent it.
            if ctx.tracing.enabled() {
                let to = outcome.as_ref().map(|_| ()).map_err(|(_, why)| *why);
                shared.lock().traces.routing(r.stream, to);
            }
            if let Some(s) = &shape {
                s.routing(outcome.as_ref().map(|_| ()).map_err(|(_, r)| *r));
            }
            match outcome {
                Ok(()) => return Ok(()),
                Err((frame, _)) => frame,
            }
        }
        None => r.frame,
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
