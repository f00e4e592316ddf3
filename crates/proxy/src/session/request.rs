//! The client side of a connection: each request read is classified (what it is, what the
//! rewrite makes of it), given a route (home as sent, rewritten, to a replica, behind the
//! proxy's own PREPAREs) and sent.

use super::conn::{refuse, refuse_truncated, reserve_read_room};
use super::end::End;
use super::pending::{as_sent, client_prepare, LiteralRequest, Pending};
use super::routing;
use super::send::{
    allocate, allocate_in, hold_use, literal_prepare_request, materialize, pass_client_prepare,
    send_prepare, send_upstream,
};
use super::state::Shared;

use crate::context::Context;
use crate::control::{self, Group};
use crate::metrics::Metrics;
use crate::protocol_error;
use crate::replica;
use crate::rewrite::literal_prepare;
use crate::rewrite::{self, Decision, Used};
use crate::schema_agreement;
use crate::shapes::ShapeRef;
use crate::topology;
use crate::writer::{Out, Outbox};
use autoprep_protocol::compression::{plain_body, Compression};
use autoprep_protocol::envelope::{Direction, Envelope, EnvelopeDecoder, Opcode, ProtocolVersion};
use autoprep_protocol::message::query::QueryRequest;
use autoprep_protocol::message::startup::StartupView;
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder, SegmentError};
use bytes::{Bytes, BytesMut};

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt};
use tracing::debug;

/// Reads client envelopes and forwards them upstream under proxy-owned stream ids.
pub(super) async fn client_to_upstream(
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

pub(super) async fn forward_request(
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
                    .then(|| client_prepare(stream, &header, body.as_deref(), ks))
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
pub(super) struct Rewritten {
    pub(super) stream: i16,
    /// What the client sent (replayed if the server no longer knows the shape).
    pub(super) original: Bytes,
    pub(super) version: ProtocolVersion,
    pub(super) used: Used,
    pub(super) route: Option<rewrite::Route>,
    pub(super) topology: Option<topology::Read>,
    /// The client connection's keyspace is the statement's (see `routing::Request`).
    pub(super) same_keyspace: bool,
    /// The client sent an EXECUTE (see `Pending::Rewritten`).
    pub(super) client_execute: bool,
    /// See `Pending::Rewritten`.
    pub(super) literals: Vec<Arc<literal_prepare::Statement>>,
}

/// Sends a rewritten request: to a replica of its partition when routing finds one ready,
/// else home.
pub(super) async fn send_rewritten(
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
