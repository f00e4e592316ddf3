//! The server side of a connection: each answer finds its request by the upstream stream id
//! and is dispatched on what that request was pending for.

use super::answer::{carries_use_warning, without_use_warning};
use super::conn::{Conn, Id};
use super::end::End;
use super::pending::{Epochs, Pending, RewrittenAnswer};
use super::routing;
use super::send::{
    exposed_prepare_answered, literal_prepare_request, materialize, pass_client_prepare,
    send_original, unprepared,
};

use crate::control::Group;
use crate::metrics::Metrics;
use crate::rewrite::Used;
use crate::schema_agreement;
use crate::topology;
use crate::wire::FrameReader;
use crate::writer::Out;
use autoprep_protocol::envelope::Flags;
use autoprep_protocol::envelope::{Envelope, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::ResponseBody;
use bytes::BytesMut;

use crate::stamp::Stamp;
use crate::streams::Tag;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use tokio::io::AsyncRead;
use tracing::{debug, warn, Instrument};

/// Reads server envelopes (through `reader`, which may hold some already) and returns each to
/// the client under its own stream id.
pub(super) async fn upstream_to_client(
    mut rd: impl AsyncRead + Unpin,
    mut reader: FrameReader,
    conn: &Arc<Conn>,
) -> End {
    let client_stopped = conn.client_stopped.cancelled();
    tokio::pin!(client_stopped);
    // When the last read returned: the clock is read once for every answer one read brought.
    let mut read_at = Stamp::now();
    loop {
        loop {
            if let Some(run) = answer_run(&mut reader, read_at, conn) {
                if conn.client.send(Out::Envelope(run)).await.is_err() {
                    return End::WriterGone;
                }
            }
            let env = match reader.decode() {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(e) => return End::BadUpstreamInput(e.to_string()),
            };
            let (env, tag) = match released(env, conn) {
                Released::Answer(env, tag) => (env, tag),
                Released::Stop => continue,
                Released::Unprepared(u) => match recover(u, conn).await {
                    Ok(()) => continue,
                    Err(end) => return end,
                },
                Released::Pending(env, pending, tag) => match on_response(env, pending, conn).await
                {
                    Ok(Some(env)) => (env, tag),
                    Ok(None) => continue,
                    Err(end) => return end,
                },
            };
            answered(&env, tag, read_at, conn);
            let given = if starts_framing(&env, &reader) {
                start_framing(env, &mut reader, conn).await
            } else {
                conn.answer(env.into_frame()).await
            };
            if let Err(end) = given {
                return end;
            }
        }
        // Everything this read brought leaves in one write per socket.
        conn.client.flush();
        conn.upstream.flush();
        let stopping = conn.client_stopped.is_cancelled();
        let mut links_busy = false;
        {
            let mut st = conn.lock();
            if stopping && st.streams.in_use() == 0 {
                // Answers still due on replica connections are delivered first (their
                // readers give no signal here: looked at again shortly).
                if conn.links.in_flight() == 0 {
                    return End::Closing;
                }
                links_busy = true;
            }
            st.streams.shrink_if_idle();
        }
        let read = tokio::select! {
            biased;
            read = reader.read_from(&mut rd) => read,
            () = &mut client_stopped, if !stopping => continue,
            // An async block: a disabled branch's future is still built, and building a
            // `Sleep` reads the clock.
            () = async { tokio::time::sleep(Duration::from_millis(10)).await }, if links_busy => continue,
        };
        match read {
            Ok(0) => return End::UpstreamClosed,
            Ok(_) => read_at = Stamp::now(),
            Err(e) => return End::UpstreamIo(e),
        }
    }
}

/// What a server envelope is once its stream id is released.
enum Released {
    /// An answer to give the client as it is (under the client's stream id, already set).
    Answer(Envelope, Tag),
    /// Nothing for the client (an event kept from it, an answer on a stream with no request).
    Stop,
    /// An answer to what `Pending` says, for [`on_response`].
    Pending(Envelope, Pending, Tag),
    /// A rewritten request answered UNPREPARED, for [`recover`].
    Unprepared(Unprepared),
}

/// One server envelope: its upstream stream id released, and what is left to do. The common
/// answer, to a request forwarded as it was, is given its client stream id here, with no
/// future built for it (nor for anything else that waits for nothing: see `hop-icount`).
fn released(mut env: Envelope, conn: &Conn) -> Released {
    let header = *env.header();
    if header.opcode == Opcode::READY || header.opcode == Opcode::AUTH_SUCCESS {
        conn.ready.store(true, Ordering::Release);
        conn.lock().handshake.complete = true;
    }
    if header.stream.0 < 0 {
        return match keep_event(&env, conn) {
            true => Released::Answer(env, Tag::default()),
            false => Released::Stop,
        };
    }
    let (pending, tag, wake) = {
        let mut st = conn.lock();
        let (pending, tag) = st.streams.release_tagged(header.stream.0);
        (pending, tag, st.senders_to_wake(1))
    };
    conn.wake_senders(wake);
    let Some(pending) = pending else {
        warn!(
            stream = header.stream.0,
            "response on a stream with no request; dropped"
        );
        return Released::Stop;
    };
    if let Some(stream) = pending.plain_client() {
        if header.opcode != Opcode::SUPPORTED {
            env.set_stream(StreamId(stream));
            return Released::Answer(env, tag);
        }
    }
    match pending {
        Pending::Rewritten(r) => match rewritten_answer(env, r, conn) {
            Ok(env) => Released::Answer(env, tag),
            Err(u) => Released::Unprepared(u),
        },
        pending => Released::Pending(env, pending, tag),
    }
}

/// Notes an answer the client is about to get: its span ends (if sampled), its response time
/// is recorded, and a `USE` warning it carries is remembered.
fn answered(env: &Envelope, tag: Tag, read_at: Stamp, conn: &Conn) {
    let header = env.header();
    if header.stream.0 >= 0 {
        if conn.tracing.enabled() {
            // The request's span, if sampled.
            let facts = conn.take_facts(header.stream.0);
            let answered = crate::otel::Answer::envelope(env, || conn.wire().compression);
            (conn.tracing).answered(facts, &tag, read_at, answered, conn.home);
        }
        conn.metrics.responded_at(tag, read_at);
    }
    if header.flags.has(Flags::WARNING)
        && conn.settings.prepare_literals
        && carries_use_warning(env, conn.wire())
    {
        conn.lock().use_warning_given = true;
    }
}

/// Whether `env` is the READY (or AUTHENTICATE) of a v5 connection, after which both sides
/// are framed.
fn starts_framing(env: &Envelope, reader: &FrameReader) -> bool {
    let header = env.header();
    !reader.is_framed()
        && header.version >= ProtocolVersion::V5
        && (header.opcode == Opcode::READY || header.opcode == Opcode::AUTHENTICATE)
}

/// Gives the client the answer that starts v5 framing, switching both sides.
async fn start_framing(env: Envelope, reader: &mut FrameReader, conn: &Conn) -> Result<(), End> {
    let lz4 = conn.lock().lz4_requested;
    // Order matters: the upstream writer and the client reader switch before the client can
    // see READY and send its first framed request.
    if conn.upstream.send(Out::StartFraming { lz4 }).await.is_err() {
        return Err(End::HomeGone);
    }
    let _ = conn.client_framing.set(lz4);
    reader.start_framing(lz4);
    conn.answer(env.into_frame()).await?;
    if conn.client.send(Out::StartFraming { lz4 }).await.is_err() {
        return Err(End::WriterGone);
    }
    debug!(lz4, "v5 framing started");
    Ok(())
}

/// The answers at the front of what was read that go back as they are (RESULTs and ERRORs
/// without warnings, to requests forwarded as sent), each under its client's stream id, as one
/// buffer: what the loop above would do to each, without splitting, pushing and joining each
/// one (see [`FrameReader::take_run`]). `None` when the first answer needs more.
fn answer_run(reader: &mut FrameReader, read_at: Stamp, conn: &Conn) -> Option<BytesMut> {
    if !reader.may_have_run() {
        return None;
    }
    let traced = conn.tracing.enabled();
    // An error's span reads its code: while tracing, an ERROR takes the loop's path.
    let plain_error = if traced {
        Opcode::RESULT
    } else {
        Opcode::ERROR
    };
    let mut st = conn.lock();
    // Whether an answer of this run may have a span: a request is noted (none can be noted
    // while the run holds the lock) or slow answers are traced. At 1 % sampling with no slow
    // rule, most runs look at nothing more.
    let slow = traced && conn.tracing.traces_slow();
    let watch = slow || (traced && st.traces.any());
    let mut released = 0u32;
    let run = reader.take_run(|h| {
        let plain = h.stream.0 >= 0
            && (h.opcode == Opcode::RESULT || h.opcode == plain_error)
            && !h.flags.has(Flags::WARNING);
        if !plain {
            return None;
        }
        let (stream, tag) = st.streams.release_if(h.stream.0, Pending::plain_client)?;
        if watch && (slow || st.traces.may_have(stream)) {
            // The request's span, if sampled (noted, or by the slow rule).
            let facts = st.traces.take(stream);
            let answered = crate::otel::Answer::Header(h);
            (conn.tracing).answered(facts, &tag, read_at, answered, conn.home);
        }
        conn.metrics.responded_at(tag, read_at);
        released += 1;
        Some(StreamId(stream))
    });
    let wake = st.senders_to_wake(released);
    drop(st);
    conn.wake_senders(wake);
    run
}

/// Whether a server-initiated envelope (an EVENT) reaches the client (see [`topology`]).
fn keep_event(env: &Envelope, conn: &Conn) -> bool {
    let wire = conn.wire();
    if env.header().opcode == Opcode::EVENT {
        let schema = conn.rewriter.schema_changed(env, wire);
        conn.cluster.event_seen(!schema);
    }
    let keep = topology::keep_event(env, wire);
    if !keep {
        Metrics::inc(&conn.metrics.events_dropped);
        debug!("topology or status event kept from the client");
    }
    keep
}

/// Handles a response to a request in flight. Returns the envelope to give the client (under
/// the client's stream id), or `None` when the response stops at the proxy.
async fn on_response(
    mut env: Envelope,
    pending: Pending,
    conn: &Arc<Conn>,
) -> Result<Option<Envelope>, End> {
    let wire = conn.wire();
    let up = env.header().stream.0;
    match pending {
        Pending::Client {
            stream,
            use_keyspace,
        } => Ok(Some(client_answer(env, stream, use_keyspace, conn))),
        Pending::Again { stream, .. } => Ok(Some(client_answer(env, stream, false, conn))),
        Pending::SchemaChange { stream } => {
            env.set_stream(StreamId(stream));
            let changed = conn.rewriter.schema_changed(&env, wire);
            if conn.settings.schema_agreement_wait_ms == 0 || !changed {
                return Ok(Some(env));
            }
            let step = schema_agreement::Check::start(env, Instant::now());
            schema_step(step, up, conn).await
        }
        Pending::SchemaCheck(check) => {
            let wait = Duration::from_millis(conn.settings.schema_agreement_wait_ms);
            let step = check.next(&env, wire, Instant::now(), wait);
            schema_step(step, up, conn).await
        }
        Pending::Topology { stream, read } => {
            let mut env = (conn.topology).on_response(env, &read, conn.local, wire, &conn.metrics);
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
                exposed_prepare_answered(conn);
            }
            let shape = (hash, fingerprint, text, keyspace);
            prepare_answered(&env, shape, epochs, conn);
            if let Some(c) = client {
                // The client's PREPARE it stood in for: answered from the shape now, or sent
                // as it was.
                if let Err(c) = literal_prepare_request(*c, false, conn).await? {
                    pass_client_prepare(c, conn).await?;
                }
            }
            Ok(None)
        }
        Pending::ClientPrepare {
            stream,
            route,
            names_keyspace,
            ..
        } => {
            if let Some((text, keyspace)) = route {
                routing::client_prepared(conn, &env, text, keyspace);
            }
            let given = !names_keyspace && conn.lock().use_warning_given;
            if given && env.header().flags.has(Flags::WARNING) {
                env = without_use_warning(env, wire);
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
                exposed_prepare_answered(conn);
            }
            // Whatever the answer, the client's request goes on: if the server still does not
            // know an id, it answers UNPREPARED, and the driver prepares it again.
            materialize(conn, stream, rest, original, Id::Reuse(up)).await?;
            Ok(None)
        }
        Pending::ClusterRead(part) => {
            let body = wire.body(&env);
            let result = body.as_deref().and_then(|b| {
                let rb = ResponseBody::parse(env.header(), b).ok()?;
                (env.header().opcode == Opcode::RESULT)
                    .then(|| ResultView::parse(rb.message, env.header().version).ok())
                    .flatten()
            });
            conn.cluster.answer(part, result);
            Ok(None)
        }
        // `released` answers these without a future; kept so that this match stays whole.
        Pending::Rewritten(r) => match rewritten_answer(env, r, conn) {
            Ok(env) => Ok(Some(env)),
            Err(u) => recover(u, conn).await.map(|()| None),
        },
    }
}

/// The answer to a client request forwarded as it was: a `USE`'s sets the connection's
/// keyspace, a SUPPORTED loses the keys that would lead the driver around the proxy.
fn client_answer(mut env: Envelope, stream: i16, use_keyspace: bool, conn: &Conn) -> Envelope {
    let wire = conn.wire();
    if use_keyspace {
        let ks = wire.set_keyspace(&env);
        let mut st = conn.lock();
        st.use_in_flight = st.use_in_flight.saturating_sub(1);
        if let Some(ks) = ks {
            st.keyspace = Some(ks.into());
        }
    }
    if env.header().opcode == Opcode::SUPPORTED {
        let scylla = topology::announces_scylla(&env);
        conn.rewriter.flavors.learn(conn.node, scylla);
        env = topology::supported(env, wire);
    }
    env.set_stream(StreamId(stream));
    env
}

/// The answer to the proxy's own PREPARE of a shape (`hash`, `fingerprint`, `text`,
/// `keyspace`): cached when proven, unless a `USE` or a schema change came between.
fn prepare_answered(
    env: &Envelope,
    (hash, fingerprint, text, keyspace): (
        autoprep_cache::ShapeHash,
        [u8; 16],
        String,
        Option<String>,
    ),
    epochs: Epochs,
    conn: &Conn,
) {
    if conn.epochs() != epochs {
        // A USE or a schema change came between: the answer may describe either.
        Metrics::inc(&conn.metrics.prepares_unproven);
        debug!("a PREPARE of the proxy's raced a USE or a schema change; not used");
        conn.rewriter.cache.abandoned(conn.node, hash);
        return;
    }
    let (node, wire) = (conn.node, conn.wire());
    let id = (conn.rewriter).prepared(env, node, (hash, fingerprint), text, keyspace, wire);
    if let (Some(id), Some(home)) = (id, conn.home) {
        // The node holds it for every connection of the process: neither a replica
        // connection to it nor a connection homed there prepares it again.
        conn.cluster.learn(home, &id);
    }
}

/// A rewritten request answered UNPREPARED, under upstream id `up`.
struct Unprepared {
    up: i16,
    r: RewrittenAnswer,
}

/// The answer to a rewritten request: UNPREPARED leads to [`recover`]; any other answer goes
/// back as the client's request would have got it. Nothing here waits (no future is built).
fn rewritten_answer(
    env: Envelope,
    r: RewrittenAnswer,
    conn: &Conn,
) -> Result<Envelope, Unprepared> {
    let wire = conn.wire();
    if let Some(unknown) = wire.unprepared_id(&env) {
        for hash in r.used.with_id(&unknown) {
            conn.rewriter.cache.invalidate(conn.node, hash, &unknown);
        }
        if conn.rewriter.flavors.is_scylla(conn.node) {
            conn.rewriter.flavors.evicted(conn.node, Instant::now());
        }
        let up = env.header().stream.0;
        return Err(Unprepared { up, r });
    }
    let client_execute = r.literals.as_ref().is_some_and(|l| l.execute);
    let mut env = match &r.used {
        Used::One { hash, id }
            if env.header().version >= ProtocolVersion::V5 && !client_execute =>
        {
            (conn.rewriter).without_metadata_change(env, conn.node, *hash, id)
        }
        _ => env,
    };
    if let Some(read) = &r.topology {
        env = (conn.topology).on_response(env, read, conn.local, wire, &conn.metrics);
    }
    env.set_stream(StreamId(r.stream));
    Ok(env)
}

/// Sends the client's request home as it was, its rewrite answered UNPREPARED.
async fn recover(u: Unprepared, conn: &Conn) -> Result<(), End> {
    let r = u.r;
    let literals = r.literals.map(|l| l.statements).unwrap_or_default();
    unprepared(conn);
    send_original(
        conn,
        r.stream,
        r.topology,
        r.original,
        literals,
        Id::Reuse(u.up),
    )
    .await
}

/// Carries out a step of a schema-agreement check: the held answer goes to the client, or the
/// next question goes upstream (after its delay) under `up`, the id whose answer just arrived.
async fn schema_step(
    step: schema_agreement::Step,
    up: i16,
    conn: &Arc<Conn>,
) -> Result<Option<Envelope>, End> {
    match step {
        schema_agreement::Step::Forward(env) => Ok(Some(env)),
        schema_agreement::Step::Ask {
            check,
            request,
            delay,
        } => {
            let pending = Pending::SchemaCheck(check);
            if delay.is_zero() {
                conn.send(request, pending, None, Group::Other, Id::Reuse(up))
                    .await?;
            } else {
                conn.lock().streams.allocate_exact(up, pending);
                let conn = conn.clone();
                let later = async move {
                    tokio::time::sleep(delay).await;
                    let _ = conn.push(request, up).await;
                    conn.upstream.flush();
                };
                tokio::spawn(later.in_current_span());
            }
            Ok(None)
        }
    }
}
