//! The server side of a connection: each answer finds its request by the upstream stream id
//! and is dispatched on what that request was pending for.

use super::answer::{carries_use_warning, set_keyspace, unprepared_id, without_use_warning};
use super::conn::FrameReader;
use super::end::End;
use super::pending::{Epochs, Pending};
use super::routing;
use super::send::{
    exposed_prepare_answered, literal_prepare_request, materialize, pass_client_prepare,
    send_upstream,
};
use super::state::Shared;

use crate::context::Context;
use crate::metrics::Metrics;
use crate::rewrite::Used;
use crate::schema_agreement;
use crate::topology;
use crate::writer::{Out, Outbox};
use autoprep_protocol::compression::plain_body;
use autoprep_protocol::envelope::Flags;
use autoprep_protocol::envelope::{Direction, Envelope, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::ResponseBody;
use bytes::{Bytes, BytesMut};

use crate::stamp::Stamp;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;
use tokio::io::AsyncRead;
use tracing::{debug, warn, Instrument};

/// Reads server envelopes and returns each to the client under its own stream id.
pub(super) async fn upstream_to_client(
    mut rd: impl AsyncRead + Unpin,
    ctx: &Context,
    shared: &Shared,
    to_client: &Outbox,
    to_upstream: &Outbox,
) -> End {
    let mut reader = FrameReader::new(Direction::Response, ctx.cfg.max_frame_bytes);
    let client_stopped = shared.client_stopped.cancelled();
    tokio::pin!(client_stopped);
    // When the last read returned: the clock is read once for every answer one read brought.
    let mut read_at = Stamp::now();
    loop {
        loop {
            if let Some(run) = answer_run(&mut reader, read_at, ctx, shared) {
                if to_client.send(Out::Envelope(run)).await.is_err() {
                    return End::WriterGone;
                }
            }
            let mut env = match reader.next() {
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
                let (pending, tag, wake) = {
                    let mut st = shared.lock();
                    let (pending, tag) = st.streams.release_tagged(header.stream.0);
                    (pending, tag, st.senders_to_wake(1))
                };
                shared.wake_senders(wake);
                let Some(pending) = pending else {
                    warn!(
                        stream = header.stream.0,
                        "response on a stream with no request; dropped"
                    );
                    continue;
                };
                let answer = match pending.plain_client() {
                    // The common answer handled here as `on_response` would, without building
                    // its (large) future: to a request forwarded as it was.
                    Some(stream) if header.opcode != Opcode::SUPPORTED => {
                        env.set_stream(StreamId(stream));
                        Ok(Some(env))
                    }
                    _ => on_response(env, pending, ctx, shared, to_upstream).await,
                };
                match answer {
                    Ok(Some(e)) => {
                        // [otel hook] The request's span, if sampled.
                        if ctx.tracing.enabled() {
                            let (facts, c) = {
                                let mut st = shared.lock();
                                (st.traces.take(e.header().stream.0), st.compression)
                            };
                            let answer = crate::otel::Answer::Envelope(&e, c);
                            ctx.tracing
                                .answered(facts, &tag, read_at, answer, shared.home);
                        }
                        ctx.metrics.responded_at(tag, read_at);
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
            let starts_framing = !reader.is_framed()
                && header.version >= ProtocolVersion::V5
                && (header.opcode == Opcode::READY || header.opcode == Opcode::AUTHENTICATE);
            if starts_framing {
                let lz4 = shared.lock().lz4_requested;
                // Order matters: the upstream writer and the client reader switch before the
                // client can see READY and send its first framed request.
                if to_upstream.send(Out::StartFraming { lz4 }).await.is_err() {
                    return End::WriterGone;
                }
                let _ = shared.client_framing.set(lz4);
                reader.start_framing(lz4);
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

/// The answers at the front of what was read that go back as they are (RESULTs and ERRORs
/// without warnings, to requests forwarded as sent), each under its client's stream id, as one
/// buffer: what the loop above would do to each, without splitting, pushing and joining each
/// one (see [`FrameReader::take_run`]). `None` when the first answer needs more.
fn answer_run(
    reader: &mut FrameReader,
    read_at: Stamp,
    ctx: &Context,
    shared: &Shared,
) -> Option<BytesMut> {
    if !reader.may_have_run() {
        return None;
    }
    let mut st = shared.lock();
    let mut released = 0u32;
    let run = reader.take_run(|h| {
        let plain = h.stream.0 >= 0
            && (h.opcode == Opcode::RESULT || h.opcode == Opcode::ERROR)
            && !h.flags.has(Flags::WARNING)
            // [otel hook] An error's span reads its code: it takes the loop's path.
            && !(h.opcode == Opcode::ERROR && ctx.tracing.enabled());
        if !plain {
            return None;
        }
        let (stream, tag) = st.streams.release_if(h.stream.0, Pending::plain_client)?;
        // [otel hook] The request's span, if sampled.
        if ctx.tracing.enabled() {
            let facts = st.traces.take(stream);
            let answer = crate::otel::Answer::Header(h);
            ctx.tracing
                .answered(facts, &tag, read_at, answer, shared.home);
        }
        ctx.metrics.responded_at(tag, read_at);
        released += 1;
        Some(StreamId(stream))
    });
    let wake = st.senders_to_wake(released);
    drop(st);
    shared.wake_senders(wake);
    run
}

/// Whether a server-initiated envelope (an EVENT) reaches the client (see [`topology`]).
pub(super) fn keep_event(env: &Envelope, ctx: &Context, shared: &Shared) -> bool {
    let compression = shared.lock().compression;
    if env.header().opcode == Opcode::EVENT {
        let schema = ctx
            .rewriter
            .schema_changed(env, compression, ctx.cfg.max_frame_bytes);
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
pub(super) async fn on_response(
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
            let changed = ctx.rewriter.schema_changed(&env, compression(), max);
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
                ctx.rewriter.prepared(
                    &env,
                    shared.node,
                    (hash, fingerprint),
                    text,
                    keyspace,
                    compression(),
                    max,
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
                    ctx.rewriter
                        .without_metadata_change(env, shared.node, *hash, id)
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
pub(super) async fn schema_step(
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
pub(super) async fn replay(
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
