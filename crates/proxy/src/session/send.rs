//! Sending on the home connection: an upstream stream id taken for what the request is
//! pending for, then the frame; and the proxy's own PREPAREs (of a shape, of a client's
//! statement with literals inline) with the `USE` they hold back.

use super::end::End;
use super::pending::{client_prepare, Epochs, Pending};
use super::state::Shared;

use crate::context::Context;
use crate::control::Group;
use crate::metrics::Metrics;
use crate::rewrite::literal_prepare;
use crate::rewrite::{self, PrepareRequest};
use crate::shapes::ShapeRef;
use crate::writer::{Out, Outbox};
use autoprep_protocol::envelope::Header;
use autoprep_protocol::envelope::{Envelope, Opcode, ProtocolVersion};
use autoprep_protocol::message::prepare::encode_prepare;
use bytes::{Bytes, BytesMut};

use std::sync::Arc;
use std::time::Instant;

/// Takes an upstream stream id for `pending`, tagged with the statement shape of a QUERY (for
/// `/shapes`), waiting while every id is in flight. Before waiting, what was pushed toward the
/// server is written: its answers are what frees ids.
pub(super) async fn allocate(
    shared: &Shared,
    to_upstream: &Outbox,
    pending: Pending,
    shape: Option<ShapeRef>,
) -> i16 {
    allocate_in(shared, to_upstream, pending, shape, Group::Other).await
}

/// [`allocate`] for a request whose response time is one of the control comparison's.
pub(super) async fn allocate_in(
    shared: &Shared,
    to_upstream: &Outbox,
    mut pending: Pending,
    mut shape: Option<ShapeRef>,
    group: Group,
) -> i16 {
    let mut waiting = false;
    loop {
        {
            let mut st = shared.lock();
            if waiting {
                st.id_waiters -= 1;
            }
            match st.streams.allocate_tagged(pending, shape, group) {
                Ok(id) => return id,
                Err(back) => (pending, shape) = back,
            }
            // Counted under the lock the allocation failed under: every release after it
            // sees the count and signals `freed` (whose permit waits if nobody listens yet).
            st.id_waiters += 1;
            waiting = true;
        }
        // All ids are in flight: wait for a response to free one (backpressure).
        let freed = shared.freed.notified();
        to_upstream.flush();
        freed.await;
    }
}

pub(super) async fn send_upstream(
    to_upstream: &Outbox,
    mut frame: BytesMut,
    id: i16,
) -> Result<(), End> {
    frame[2..4].copy_from_slice(&id.to_be_bytes());
    to_upstream
        .send(Out::Envelope(frame))
        .await
        .map_err(|_| End::WriterGone)
}

/// Sends a client request that references statements prepared with literals inline the
/// server never saw (see [`literal_prepare`]): first a PREPARE of each of `statements` (one
/// after the other: the server runs a connection's requests concurrently), then `original` as
/// the client sent it. `up`: the upstream id to reuse (from the upstream reader, whose answers
/// are what frees ids), or `None` to take one.
pub(super) async fn materialize(
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
pub(super) fn exposed_prepare_answered(shared: &Shared) {
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
pub(super) async fn hold_use(ctx: &Context, shared: &Shared, to_upstream: &Outbox) {
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

/// Sends the proxy's own PREPARE of a shape on this connection (so it inherits the
/// authentication and protocol version); its answer fills the cache and stops there. On v5 the
/// PREPARE names the keyspace the statement runs in, so that it never depends on the
/// connection's; on v4 the answer is used only if proven (see [`crate::prepare_proof`]).
pub(super) async fn send_prepare(
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
pub(super) async fn pass_client_prepare(
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
pub(super) fn client_prepare_pending(
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
    match client_prepare(stream, header, Some(body), ks) {
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
pub(super) async fn literal_prepare_request(
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
pub(super) fn prepare_frame(
    version: ProtocolVersion,
    text: &str,
    keyspace: Option<&str>,
) -> Option<BytesMut> {
    let mut body = Vec::with_capacity(text.len() + 16);
    encode_prepare(version, text.as_bytes(), keyspace, &mut body).ok()?;
    Some(Envelope::request_frame(version, Opcode::PREPARE, &body))
}
