//! The client side of a connection. Each request read is *classified* ([`classify`]: what it
//! is, what the rewrite makes of it) into a [`Route`], which [`send`] carries out: home as the
//! client sent it, rewritten, to a replica of its partition, or behind the proxy's own
//! PREPAREs. Classifying is synchronous and sends nothing; every wait (a free stream id, a
//! `USE` held back, a replica connection) belongs to sending.

use super::classify::{plan, text_plan, Facts, Plan, TextFacts, TextPlan};
use super::conn::{Conn, Id};
use super::end::{refuse, refuse_truncated, End};
use super::pending::{as_sent, client_prepare, LiteralRequest, Pending, RewrittenAnswer};
use super::routing;
use super::send::{literal_prepare_request, materialize, pass_client_prepare, send_prepare};
use super::state::State;
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
use crate::wire::FrameReader;
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::{Envelope, Flags, Header, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::query::QueryRequest;
use autoprep_protocol::message::startup::StartupView;
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::AsyncRead;
use tracing::debug;

/// Reads client envelopes (through `reader`, which may hold some already) and forwards them
/// upstream under proxy-owned stream ids, through `conn`, and through each new home it is
/// handed over to (see `super::rehome`) from the read after. Both are borrowed: at a drain's
/// hand-over the session passes the socket and what `reader` holds to the next process.
pub(super) async fn client_to_upstream(
    rd: &mut (impl AsyncRead + Unpin),
    reader: &mut FrameReader,
    mut conn: Arc<Conn>,
) -> End {
    let mut scratch = rewrite::Scratch::default();
    // Every home of the connection shares its drain token.
    let closing_token = conn.closing.clone();
    let closing = closing_token.cancelled();
    tokio::pin!(closing);
    // When the last read returned: the clock is read once for every request one read brought.
    let mut read_at = Stamp::now();
    // Whether this connection asked for the cluster view's first read (see
    // `routing::first_view`).
    let mut view_asked = false;
    loop {
        loop {
            if !reader.is_framed() {
                if let Some(&lz4) = conn.client_framing.get() {
                    reader.start_framing(lz4);
                }
            }
            if let Some(run) = plain_run(reader, read_at, &conn) {
                // Gone, the home's end answers what its table holds (these among them).
                let _ = conn.upstream.send(crate::writer::Out::Envelope(run)).await;
            }
            let env = match reader.decode() {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(e) => return refuse(e, &conn.client).await,
            };
            let sent = match on_request(env, read_at, &conn, &mut scratch) {
                Next::Pushed(wait) => wait.await,
                Next::Route(route) => send(route, &conn).await,
            };
            match sent {
                // The home's end answers it (see `super::rehome`); the client goes on.
                Ok(()) | Err(End::HomeGone) => {}
                Err(end) => return end,
            }
        }
        if !view_asked {
            view_asked = routing::first_view(&conn).await;
        }
        // Everything this read brought leaves in one write per socket.
        conn.upstream.flush();
        conn.client.flush();
        // Checked before reading too: a client that always has more to send keeps the read
        // ready, and the biased select below would never look at `closing`.
        if conn.closing.is_cancelled() {
            return End::Closing;
        }
        let read = tokio::select! {
            biased;
            read = reader.read_from(rd) => read,
            () = &mut closing => return End::Closing,
        };
        if let Ok(n) = read {
            conn.metrics
                .bytes_from_clients
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        match read {
            Ok(0) if reader.unread().is_empty() => return End::ClientClosed,
            Ok(0) => {
                return refuse_truncated(reader.unread(), reader.envelopes(), &conn.client).await
            }
            Ok(_) => read_at = Stamp::now(),
            Err(e) => return End::ClientIo(e),
        }
        // Between two reads no request is half-handled: the place to move to a new home.
        while let Some(next) = conn.moved_to() {
            conn = next.clone();
        }
    }
}

/// What is left of a client request once [`on_request`] has looked at it.
// Unboxed: it moves once, and boxing would allocate for every request that waits.
#[allow(clippy::large_enum_variant)]
enum Next<W> {
    /// Pushed toward the server under an id taken now; `W` waits for room in the outbox.
    Pushed(W),
    /// A route that waits for something (an id, a `USE`'s turn, a replica, the proxy's own
    /// requests), carried out by [`send`].
    Route(Route),
}

/// One client request: the express lanes (a plain EXECUTE; a request home, as sent or
/// rewritten, with an id free) take their id and are pushed here, with no future built for
/// them but the outbox's (see `scripts/hop-icount.sh`); every other route is left to [`send`].
fn on_request<'a>(
    env: Envelope,
    read_at: Stamp,
    conn: &'a Arc<Conn>,
    scratch: &mut rewrite::Scratch,
) -> Next<impl Future<Output = Result<(), End>> + Send + 'a> {
    let env = if env.header().opcode == Opcode::EXECUTE {
        match plain_execute(env, read_at, conn) {
            Ok((frame, up)) => return Next::Pushed(conn.push(frame, up)),
            Err(env) => env,
        }
    } else {
        env
    };
    let home = match classify(env, conn, scratch) {
        Route::Home(h) => h,
        Route::Rewritten(r) if r.route.is_none() => r.home(),
        route => return Next::Route(route),
    };
    match home.id_now(read_at, conn) {
        Ok((frame, up)) => Next::Pushed(conn.push(frame, up)),
        Err(h) => Next::Route(Route::Home(h)),
    }
}

/// What becomes of one client request.
enum Route {
    /// Answered by the proxy itself (an opcode Cassandra does not know).
    Answer(BytesMut),
    /// Home (see [`Home`]).
    Home(Home),
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

/// A request that goes home under an upstream id of its own: as the client sent it, or
/// rewritten with no replica to route it to.
struct Home {
    frame: BytesMut,
    /// What its answer is awaited as.
    pending: Pending,
    shape: Option<ShapeRef>,
    group: Group,
    then: ShapePrepares,
}

impl Home {
    /// Its frame and an upstream id taken now, when nothing has to happen before it is sent
    /// (a `USE` waits for the proxy's exposed PREPAREs) or after (the proxy's own PREPAREs)
    /// and an id is free; otherwise it is given back for [`send`]. (Given back by value: it
    /// moves once, to `send`; boxing it would allocate for every request that waits.)
    #[allow(clippy::result_large_err)]
    fn id_now(self, read_at: Stamp, conn: &Conn) -> Result<(BytesMut, i16), Home> {
        if !self.then.prepares.is_empty() || self.pending.is_use() {
            return Err(self);
        }
        let Home {
            frame,
            pending,
            shape,
            group,
            then,
        } = self;
        match conn.try_take(pending, shape, group, read_at) {
            Ok(up) => Ok((frame, up)),
            Err((pending, shape)) => Err(Home {
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
        Route::Home(Home {
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
    keyspace: Option<Arc<str>>,
    /// No `USE` in flight.
    settled: bool,
}

impl ConnState {
    fn of(conn: &Conn) -> ConnState {
        let st = conn.lock();
        ConnState {
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

impl Facts {
    /// The facts of a request with `opcode` on `conn`.
    fn of(opcode: Opcode, conn: &Conn) -> Facts {
        Facts {
            opcode,
            rewrite: conn.settings.rewrite && conn.ready.load(Ordering::Acquire),
            literals_held: conn.rewriter.literals.holds_any(),
            may_route: conn.cluster.may_route(),
            topology_prepared: conn.topology.has_prepared(),
        }
    }
}

/// Classifies one client request. Only the opcodes the proxy may act on have their body read
/// (decompressed once); everything else goes home as sent.
fn classify(env: Envelope, conn: &Conn, scratch: &mut rewrite::Scratch) -> Route {
    let header = *env.header();
    let facts = Facts::of(header.opcode, conn);
    let plan = plan(&facts);
    if plan == Plan::Unknown {
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
    conn.metrics.request(header.opcode.0);
    if matches!(
        header.opcode,
        Opcode::STARTUP | Opcode::AUTH_RESPONSE | Opcode::REGISTER
    ) {
        note_handshake(&env, conn);
    }
    if conn.tracing.enabled() {
        note_facts(&env, conn);
    }
    match plan {
        Plan::Prepared {
            literal_execute,
            route_client,
            then_text,
        } => match classify_prepared(env, literal_execute, route_client, conn, scratch) {
            Ok(route) => route,
            Err(env) if then_text => classify_text(env, facts.rewrite, conn, scratch),
            Err(env) => Route::as_sent(env, Pending::client(header.stream.0)),
        },
        Plan::Text => classify_text(env, facts.rewrite, conn, scratch),
        Plan::AsSent | Plan::Unknown => Route::as_sent(env, Pending::client(header.stream.0)),
    }
}

/// Notes a request's facts for its span (tracing on) when the head sampler keeps it or it may
/// name a client's parent span; otherwise forgets an earlier request's on its stream id.
fn note_facts(env: &Envelope, conn: &Conn) {
    let stream = env.header().stream.0;
    let drawn = conn.tracing.draw();
    if drawn.is_none() && !crate::otel::Facts::may_have_parent(env, || conn.wire().compression) {
        if conn.any_noted() {
            conn.lock().traces.clear(stream);
        }
        return;
    }
    let st = &mut *conn.lock();
    let mut facts = crate::otel::Facts::of(env, conn.wire().compression, st.keyspace.clone());
    facts.drawn = drawn;
    if drawn.is_some() || facts.parent.is_some() {
        st.traces.note(stream, facts);
    } else {
        st.traces.clear(stream);
    }
}

/// A client EXECUTE that [`classify`] would send home as it is (read for nothing: see
/// [`plan`]), with the upstream id it takes now; `Err` gives it back when it is read for
/// something, or when every id is in flight (`send` then waits for one).
#[allow(clippy::result_large_err)]
fn plain_execute(env: Envelope, read_at: Stamp, conn: &Conn) -> Result<(BytesMut, i16), Envelope> {
    let header = env.header();
    if plan(&Facts::of(header.opcode, conn)) != Plan::AsSent {
        return Err(env);
    }
    let mut draws = conn.traced().map(crate::otel::Tracing::draws);
    match plain_execute_id(&mut conn.lock(), header, read_at, draws.as_mut()) {
        Some(up) => {
            conn.metrics.request(Opcode::EXECUTE.0);
            Ok((env.into_frame(), up))
        }
        None => Err(env),
    }
}

/// The upstream id a plain EXECUTE (with `header`, once [`plan`] found it read for nothing)
/// takes now; `None` for another request, or when every id is in flight. `draws` is the head
/// sampler's, while tracing.
fn plain_execute_id(
    st: &mut State,
    header: &Header,
    read_at: Stamp,
    draws: Option<&mut crate::otel::Draws>,
) -> Option<i16> {
    if header.opcode != Opcode::EXECUTE {
        return None;
    }
    // While tracing, a request with a custom payload (a client's traceparent) is classified:
    // its body is read.
    if draws.is_some() && header.flags.has(Flags::CUSTOM_PAYLOAD) {
        return None;
    }
    let pending = Pending::client(header.stream.0);
    let up = st
        .streams
        .allocate_at(pending, None, Group::Other, read_at)
        .ok()?;
    if let Some(draws) = draws {
        match draws.draw() {
            Some(drawn) => {
                // Its facts for its span: the opcode and the connection's keyspace only.
                let mut facts = crate::otel::Facts::of_header(header, st.keyspace.clone());
                facts.drawn = Some(drawn);
                st.traces.note(header.stream.0, facts);
            }
            None => st.traces.clear(header.stream.0),
        }
    }
    Some(up)
}

/// The plain EXECUTEs (see [`plain_execute`]) at the front of what was read, each under the
/// upstream id it takes, as one buffer: what [`plain_execute`] would do to each, without
/// splitting, pushing and joining each one (see [`FrameReader::take_run`]). `None` when the
/// first needs more or no id is free.
fn plain_run(reader: &mut FrameReader, read_at: Stamp, conn: &Conn) -> Option<BytesMut> {
    if reader.next_opcode() != Some(Opcode::EXECUTE)
        || plan(&Facts::of(Opcode::EXECUTE, conn)) != Plan::AsSent
    {
        return None;
    }
    // The sampler's countdown, taken once for the run.
    let mut draws = conn.traced().map(crate::otel::Tracing::draws);
    // A nullable pointer, tested per request (not the option's tag read from memory).
    let mut tracing = draws.as_mut();
    let mut st = conn.lock();
    let mut n = 0;
    let run = reader.take_run(|h| {
        let up = plain_execute_id(&mut st, h, read_at, tracing.as_deref_mut())?;
        n += 1;
        Some(StreamId(up))
    });
    drop(st);
    conn.metrics.requests_of(Opcode::EXECUTE.0, n);
    run
}

/// Keeps what the connection's handshake negotiates (compression), and what opening a
/// replica connection or a new home replays (STARTUP and AUTH_RESPONSE bodies, and the
/// events the client REGISTERs for: see `super::rehome`).
fn note_handshake(env: &Envelope, conn: &Conn) {
    let header = env.header();
    if header.opcode == Opcode::STARTUP {
        // STARTUP is never compressed; a body the proxy cannot read goes to the server as is.
        if let Ok(s) = StartupView::parse(env.body()) {
            conn.negotiate(s.compression());
            conn.lock().lz4_requested = s.compression() == Some(Compression::Lz4);
        }
        let mut st = conn.lock();
        st.handshake = replica::Handshake {
            version: Some(header.version),
            startup: Some(zeroize::Zeroizing::new(env.body().to_vec())),
            lz4: st.lz4_requested,
            ..replica::Handshake::default()
        };
    }
    if header.opcode == Opcode::AUTH_RESPONSE {
        let mut st = conn.lock();
        if !st.handshake.complete {
            st.handshake
                .auth
                .push(zeroize::Zeroizing::new(env.body().to_vec()));
        }
    }
    if header.opcode == Opcode::REGISTER {
        // Replayed as it is; a body the proxy cannot read is not (a new home then does not
        // deliver events: nothing could be asked of it).
        let body = conn.wire().body(env);
        let message = body.as_deref().and_then(|b| {
            let rb = autoprep_protocol::message::RequestBody::parse(header, b).ok()?;
            Some(Bytes::copy_from_slice(rb.message))
        });
        if let Some(body) = message {
            let mut st = conn.lock();
            if !st.registered.contains(&body) {
                st.registered.push(body);
            }
        }
    }
}

/// A client's EXECUTE or BATCH of statements it prepared: an EXECUTE of a statement prepared
/// with literals inline runs as its shape (or the server learns the statement first), and a
/// statement routing knows goes to a replica. `Err` gives the request back when neither applies.
fn classify_prepared(
    env: Envelope,
    literal_execute: bool,
    route_client: bool,
    conn: &Conn,
    scratch: &mut rewrite::Scratch,
) -> Result<Route, Envelope> {
    let header = *env.header();
    let state = ConnState::of(conn);
    let body = conn.wire().body(&env);
    let decided = match &body {
        Some(b) if literal_execute => literal_prepare::decide_execute(
            &conn.rewriter,
            conn.node,
            &header,
            b,
            &mut scratch.values,
        ),
        _ => None,
    };
    if let Some(executed) = decided {
        drop(body);
        return Ok(literal_execute_route(env, executed, &state, conn));
    }
    let route = body.as_deref().filter(|_| route_client).and_then(|b| {
        if header.opcode == Opcode::EXECUTE {
            routing::client_execute(conn, &header, b)
        } else {
            routing::client_batch(conn, &header, b)
        }
    });
    drop(body);
    let Some(route) = route else {
        return Err(env);
    };
    let same_keyspace =
        state.settled && state.keyspace.as_deref() == route.entry.keyspace.as_deref();
    let frame = env.into_frame();
    let req = routing::Request {
        stream: header.stream.0,
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

/// An EXECUTE of a statement the client prepared with literals inline: run as its shape, or,
/// when the shape cannot serve it, the server learns the statement first.
fn literal_execute_route(
    env: Envelope,
    executed: literal_prepare::Executed,
    state: &ConnState,
    conn: &Conn,
) -> Route {
    let header = *env.header();
    let literal_prepare::Executed {
        decision,
        statement,
    } = executed;
    match decision {
        Decision::Execute { frame, used, route } => {
            conn.metrics.literal_execute(Ok(()));
            let same_keyspace = state.settled && state.keyspace.as_deref() == statement.keyspace();
            Route::Rewritten(Rewritten {
                frame,
                shape: Some(statement.shape()),
                stream: header.stream.0,
                original: env.into_frame().freeze(),
                version: header.version,
                used,
                route,
                topology: None,
                same_keyspace,
                client_execute: true,
                literals: vec![statement],
            })
        }
        Decision::PassThrough { reason, .. } => {
            // The server never saw the id: it learns it first.
            conn.metrics.literal_execute(Err(reason));
            Route::Materialize {
                stream: header.stream.0,
                statements: vec![statement],
                original: env.into_frame().freeze(),
                then: ShapePrepares {
                    version: header.version,
                    prepares: Vec::new(),
                },
            }
        }
    }
}

/// A request with CQL text (QUERY, PREPARE, BATCH) or an EXECUTE of a topology read: the
/// topology and schema-change checks, then the rewrite's decision.
fn classify_text(
    env: Envelope,
    rewrite: bool,
    conn: &Conn,
    scratch: &mut rewrite::Scratch,
) -> Route {
    let header = *env.header();
    let stream = header.stream.0;
    let is_query = header.opcode == Opcode::QUERY;
    let state = ConnState::of(conn);
    let ks = state.keyspace();
    let body = conn.wire().body(&env);
    // A QUERY is parsed once here for the topology, schema-change and rewrite checks.
    let query = match &body {
        Some(b) if is_query => QueryRequest::parse(&header, b).ok(),
        _ => None,
    };
    // A topology read (system.local, system.peers...) gets its answer rewritten, whether the
    // request itself is rewritten or not.
    let topology = match (&query, &body) {
        (Some(q), _) => conn.topology.classify_query(&q.query, ks.name),
        (None, Some(b)) if !is_query => conn.topology.classify(&header, b, ks.name),
        _ => None,
    };
    let schema_change = topology.is_none()
        && query
            .as_ref()
            .is_some_and(|q| schema_agreement::is_schema_change(&q.query));
    let facts = TextFacts {
        opcode: header.opcode,
        rewrite,
        prepare_literals: conn.settings.prepare_literals,
        routing: conn.cluster.enabled(),
        topology: topology.is_some(),
        body: body.is_some(),
    };
    match text_plan(&facts) {
        TextPlan::LiteralPrepare => {
            let body = Bytes::copy_from_slice(body.as_deref().unwrap_or_default());
            Route::LiteralPrepare(literal_prepare::ClientPrepare {
                stream,
                header,
                body,
                original: Bytes::copy_from_slice(env.as_bytes()),
            })
        }
        TextPlan::AsSent { client_prepare: cp } => {
            let client_prepare = cp
                .then(|| client_prepare(stream, &header, body.as_deref(), ks, env.as_bytes()))
                .flatten();
            drop(body);
            let pending =
                client_prepare.unwrap_or_else(|| as_sent(stream, false, topology, schema_change));
            Route::as_sent(env, pending)
        }
        TextPlan::Decide => {
            let mut shape = None;
            let decision = match (&query, &body) {
                (Some(q), _) => rewrite::decide(
                    &conn.rewriter,
                    conn.node,
                    &header,
                    q,
                    ks,
                    Instant::now(),
                    scratch,
                    &mut shape,
                ),
                (None, Some(b)) if !is_query => rewrite::batch::decide_batch(
                    &conn.rewriter,
                    conn.node,
                    &header,
                    b,
                    ks,
                    Instant::now(),
                    &mut scratch.values,
                ),
                (None, Some(_)) => Decision::pass("malformed query"),
                (None, None) => Decision::pass("undecodable body"),
            };
            decision.record(shape.as_deref());
            if conn.any_noted() {
                // What the rewrite made of it, for its span.
                let outcome = match &decision {
                    Decision::Execute { .. } => "rewritten",
                    Decision::PassThrough { reason, .. } => *reason,
                };
                conn.lock().traces.rewrite(stream, outcome);
            }
            // The statements a BATCH names that the client prepared with literals inline.
            let literals = match &body {
                Some(b) if !is_query => literal_prepare::statements_in(&conn.rewriter, &header, b),
                _ => Vec::new(),
            };
            drop(body);
            let decided = Decided {
                decision,
                shape,
                literals,
                topology,
                schema_change,
            };
            decided_route(env, decided, conn)
        }
    }
}

/// What the rewrite decided for a QUERY or BATCH, and what [`decided_route`] needs with it.
struct Decided {
    decision: Decision,
    shape: Option<ShapeRef>,
    literals: Vec<Arc<literal_prepare::Statement>>,
    topology: Option<topology::Read>,
    schema_change: bool,
}

/// The route of a QUERY or BATCH the rewrite decided.
fn decided_route(env: Envelope, d: Decided, conn: &Conn) -> Route {
    let header = *env.header();
    let stream = header.stream.0;
    match d.decision {
        Decision::Execute { frame, used, route } => {
            Metrics::inc(&conn.metrics.queries_rewritten);
            Route::Rewritten(Rewritten {
                frame,
                shape: d.shape,
                stream,
                original: env.into_frame().freeze(),
                version: header.version,
                used,
                // A topology read's answer is rewritten at home.
                route: route.filter(|_| d.topology.is_none()),
                topology: d.topology,
                same_keyspace: true,
                client_execute: false,
                literals: d.literals,
            })
        }
        Decision::PassThrough {
            reason,
            prepare,
            use_keyspace,
        } => {
            conn.metrics.passthrough(reason);
            let then = ShapePrepares {
                version: header.version,
                prepares: prepare,
            };
            if !d.literals.is_empty() {
                // A batch of statements the server never saw: it learns them first.
                return Route::Materialize {
                    stream,
                    statements: d.literals,
                    original: env.into_frame().freeze(),
                    then,
                };
            }
            let group = if reason == control::REASON {
                Group::Control
            } else {
                Group::Other
            };
            Route::Home(Home {
                frame: env.into_frame(),
                pending: as_sent(stream, use_keyspace, d.topology, d.schema_change),
                shape: d.shape,
                group,
                then,
            })
        }
    }
}

/// Carries out a request's route.
async fn send(route: Route, conn: &Arc<Conn>) -> Result<(), End> {
    match route {
        Route::Answer(frame) => conn.answer(frame).await,
        Route::Home(h) => send_home(h, conn).await,
        Route::Rewritten(r) => send_rewritten(conn, r).await,
        Route::Replica { frame, route, req } => {
            let stream = req.stream;
            // Its copy, made for routing, is kept when it may go again (see `rehome`).
            let again = route.repeatable().then(|| req.original.clone());
            let outcome = routing::route(conn, frame, route, req).await;
            traced_routing(conn, stream, &outcome);
            let frame = match outcome {
                Ok(()) => return Ok(()),
                Err((frame, _)) => frame,
            };
            let pending = match again {
                Some(original) => Pending::Again { stream, original },
                None => Pending::client(stream),
            };
            conn.send(frame, pending, None, Group::Other, Id::Take)
                .await
        }
        Route::Materialize {
            stream,
            statements,
            original,
            then,
        } => {
            materialize(conn, stream, statements, original, Id::Take).await?;
            prepare_shapes(then, conn).await
        }
        Route::LiteralPrepare(c) => match literal_prepare_request(c, true, conn).await? {
            Ok(()) => Ok(()),
            Err(c) => pass_client_prepare(c, conn).await,
        },
    }
}

/// Sends a request home under an upstream id of its own (a `USE` after the proxy's exposed
/// PREPAREs), then the proxy's own PREPAREs it asked for.
async fn send_home(h: Home, conn: &Conn) -> Result<(), End> {
    if h.pending.is_use() {
        // The keyspace is not known until the USE is answered; it never runs beside a
        // PREPARE of the proxy's that takes its keyspace from the connection.
        conn.hold_use().await;
        let mut st = conn.lock();
        st.use_in_flight += 1;
        st.keyspace_epoch += 1;
    }
    conn.send(h.frame, h.pending, h.shape, h.group, Id::Take)
        .await?;
    prepare_shapes(h.then, conn).await
}

/// Sends the proxy's own PREPAREs the rewrite asked for.
async fn prepare_shapes(then: ShapePrepares, conn: &Conn) -> Result<(), End> {
    for p in then.prepares {
        send_prepare(p, then.version, conn, None).await?;
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

impl Rewritten {
    /// A QUERY sent as EXECUTE is the control comparison's other side.
    fn group(&self) -> Group {
        match self.client_execute {
            true => Group::Other,
            false => Group::Rewritten,
        }
    }

    /// Home, awaited as what its answer needs (see [`RewrittenAnswer`]).
    fn home(self) -> Home {
        let group = self.group();
        let pending = Pending::Rewritten(RewrittenAnswer {
            stream: self.stream,
            original: self.original,
            used: self.used,
            topology: self.topology,
            literals: (!self.literals.is_empty()).then(|| {
                Box::new(LiteralRequest {
                    execute: self.client_execute,
                    statements: self.literals,
                })
            }),
        });
        Home {
            frame: self.frame,
            pending,
            shape: self.shape,
            group,
            then: ShapePrepares {
                version: self.version,
                prepares: Vec::new(),
            },
        }
    }
}

/// Sends a rewritten request: to a replica of its partition when routing finds one ready,
/// else home.
async fn send_rewritten(conn: &Arc<Conn>, mut r: Rewritten) -> Result<(), End> {
    if let Some(route) = r.route.take() {
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
            shape: r.shape.clone(),
            group: r.group(),
            literals: r.literals.clone(),
        };
        let outcome = routing::route(conn, r.frame, route, routed).await;
        traced_routing(conn, r.stream, &outcome);
        if let Some(s) = &r.shape {
            s.routing(outcome.as_ref().map(|_| ()).map_err(|(_, r)| *r));
        }
        match outcome {
            Ok(()) => return Ok(()),
            Err((frame, _)) => r.frame = frame,
        }
    }
    send_home(r.home(), conn).await
}

/// Where routing sent client stream `stream`'s request, for its span (while tracing is on).
fn traced_routing(conn: &Conn, stream: i16, outcome: &Result<(), (BytesMut, &'static str)>) {
    if conn.any_noted() {
        let to = outcome.as_ref().map(|_| ()).map_err(|(_, why)| *why);
        conn.lock().traces.routing(stream, to);
    }
}
