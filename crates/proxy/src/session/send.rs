//! Sending what the proxy asks of the home connection itself: the proxy's own PREPAREs (of a
//! shape, of a client's statement with literals inline) with the `USE` they hold back, the
//! statements a request names that the server must learn first, and the recovery from an
//! UNPREPARED answer to a rewritten request. Every frame leaves through [`Conn::send`].

use super::conn::{Conn, Id};
use super::end::End;
use super::pending::{client_prepare, Pending};

use crate::control::Group;
use crate::metrics::Metrics;
use crate::rewrite::literal_prepare;
use crate::rewrite::{self, PrepareRequest};
use autoprep_protocol::envelope::{Envelope, Opcode, ProtocolVersion};
use autoprep_protocol::message::prepare::encode_prepare;
use bytes::{Bytes, BytesMut};

use std::sync::Arc;
use std::time::Instant;
use tracing::debug;

/// Sends a client request that references statements prepared with literals inline the
/// server never saw (see [`literal_prepare`]): first a PREPARE of each of `statements` (one
/// after the other: the server runs a connection's requests concurrently), then `original` as
/// the client sent it. `id`: see [`Id`].
pub(super) async fn materialize(
    conn: &Conn,
    stream: i16,
    mut statements: Vec<Arc<literal_prepare::Statement>>,
    original: Bytes,
    id: Id,
) -> Result<(), End> {
    let version = ProtocolVersion::from_byte(original[0] & 0x7f).unwrap_or(ProtocolVersion::V4);
    let (frame, pending) = loop {
        let Some(s) = statements.pop() else {
            break (BytesMut::from(&original[..]), Pending::client(stream));
        };
        let keyspace = conn.lock().keyspace.clone();
        let Some((frame, exposed)) = s.prepare_frame(version, keyspace.as_deref()) else {
            continue;
        };
        Metrics::inc(&conn.metrics.literal_materialized);
        if exposed {
            conn.lock().exposed_prepares += 1;
        }
        let pending = Pending::Materialize {
            stream,
            rest: statements,
            original,
            exposed,
        };
        break (frame, pending);
    };
    conn.send(frame, pending, None, Group::Other, id).await
}

/// A rewritten request was answered UNPREPARED (the statement did not run): counted and
/// logged; the caller sends the client's original request home with [`send_original`], after
/// the home node learns the statements it names that the client prepared with literals inline
/// (replayed as it is, it would be answered UNPREPARED). The shape will be prepared again. One
/// recovery for the answers of the home connection and of a replica connection.
pub(super) fn unprepared(conn: &Conn) {
    Metrics::inc(&conn.metrics.unprepared_recoveries);
    debug!(
        "the server does not know a rewritten statement (UNPREPARED); sending the original request"
    );
}

/// Sends the client's `original` request (client stream id `stream`) home as it was: first
/// what the home node must learn of the statements it names that the client prepared with
/// literals inline (`literals`), and a topology read's answer is still rewritten
/// (`topology`). After an UNPREPARED answer to its rewrite, or when it was a read in flight
/// on a home that failed (see `super::rehome`).
pub(super) async fn send_original(
    conn: &Conn,
    stream: i16,
    topology: Option<crate::topology::Read>,
    original: Bytes,
    literals: Vec<Arc<literal_prepare::Statement>>,
    id: Id,
) -> Result<(), End> {
    if !literals.is_empty() {
        return materialize(conn, stream, literals, original, id).await;
    }
    let then = match topology {
        Some(read) => Pending::Topology { stream, read },
        None => Pending::client(stream),
    };
    let frame = BytesMut::from(&original[..]);
    conn.send(frame, then, None, Group::Other, id).await
}

/// One of the proxy's PREPAREs whose keyspace the server takes from the connection was
/// answered (see [`Conn::hold_use`]).
pub(super) fn exposed_prepare_answered(conn: &Conn) {
    let mut st = conn.lock();
    st.exposed_prepares -= 1;
    if st.exposed_prepares == 0 {
        conn.prepares_answered.notify_waiters();
    }
}

/// Sends the proxy's own PREPARE of a shape on this connection (so it inherits the
/// authentication and protocol version); its answer fills the cache and stops there. On v5 the
/// PREPARE names the keyspace the statement runs in, so that it never depends on the
/// connection's; on v4 the answer is used only if proven (see [`crate::prepare_proof`]).
pub(super) async fn send_prepare(
    p: PrepareRequest,
    version: ProtocolVersion,
    conn: &Conn,
    client: Option<Box<literal_prepare::ClientPrepare>>,
) -> Result<(), End> {
    if let (None, Some(home)) = (&client, conn.home) {
        // Prepared on the home node already, by another connection of the process (as its
        // home, or through a replica connection): the node's prepared statements are shared
        // by all its connections, and the id is the same on every node.
        let holds = |id: &[u8]| conn.cluster.holds(home, id);
        if conn.rewriter.cache.adopt(conn.node, p.hash, holds) {
            debug!("the home node already holds the shape's statement: not prepared again");
            return Ok(());
        }
    }
    let Some(frame) = prepare_frame(version, &p.text, p.keyspace.as_deref()) else {
        conn.rewriter.cache.abandoned(conn.node, p.hash);
        if let Some(c) = client {
            return pass_client_prepare(*c, conn).await;
        }
        return Ok(());
    };
    let epochs = conn.epochs();
    let exposed = version < ProtocolVersion::V5 || p.keyspace.is_none();
    if exposed {
        conn.lock().exposed_prepares += 1;
    }
    let pending = Pending::Prepare {
        hash: p.hash,
        fingerprint: p.fingerprint,
        text: p.text,
        keyspace: p.keyspace,
        epochs,
        exposed,
        client,
    };
    conn.send(frame, pending, None, Group::Other, Id::Take)
        .await
}

/// Sends a client's PREPARE of a statement with literals inline to the server as it was.
pub(super) async fn pass_client_prepare(
    c: literal_prepare::ClientPrepare,
    conn: &Conn,
) -> Result<(), End> {
    let pending = client_prepare_pending(conn, &c);
    let frame = BytesMut::from(&c.original[..]);
    conn.send(frame, pending, None, Group::Other, Id::Take)
        .await
}

/// The pending entry of a client's PREPARE forwarded as it was (remembered for routing when
/// routing is on).
fn client_prepare_pending(conn: &Conn, c: &literal_prepare::ClientPrepare) -> Pending {
    let (keyspace, settled) = {
        let st = conn.lock();
        (st.keyspace.clone(), st.use_in_flight == 0)
    };
    let ks = rewrite::ConnKeyspace {
        name: keyspace.as_deref(),
        settled,
    };
    match client_prepare(c.stream, &c.header, Some(&c.body), ks, &c.original) {
        Some(Pending::ClientPrepare {
            stream,
            route,
            names_keyspace,
            original,
        }) => Pending::ClientPrepare {
            stream,
            route: route.filter(|_| conn.cluster.enabled()),
            names_keyspace,
            original,
        },
        _ => Pending::client(c.stream),
    }
}

/// Decides a client's PREPARE of a statement with literals inline (see [`literal_prepare`]):
/// answers it here, or sends the PREPARE of its shape in its place; `Err` gives the PREPARE
/// back to be forwarded as it is (the reason counted).
pub(super) async fn literal_prepare_request(
    c: literal_prepare::ClientPrepare,
    may_prepare: bool,
    conn: &Conn,
) -> Result<Result<(), literal_prepare::ClientPrepare>, End> {
    let (keyspace, settled, use_warning_due) = {
        let st = conn.lock();
        (
            st.keyspace.clone(),
            st.use_in_flight == 0,
            !st.use_warning_given,
        )
    };
    let lp_conn = literal_prepare::Conn {
        node: conn.node,
        keyspace: rewrite::ConnKeyspace {
            name: keyspace.as_deref(),
            settled,
        },
        use_warning_due,
        may_prepare,
    };
    let decided = literal_prepare::decide_prepare(
        &conn.rewriter,
        &c.header,
        &c.body,
        lp_conn,
        Instant::now(),
    );
    match decided {
        literal_prepare::PrepareDecision::Answer { message, warning } => {
            conn.metrics.literal_prepare(Ok(()));
            if warning.is_some() {
                conn.lock().use_warning_given = true;
            }
            let frame = literal_prepare::answer_frame(
                c.header.version,
                c.stream,
                &message,
                warning.as_deref(),
            );
            conn.answer(frame).await?;
            Ok(Ok(()))
        }
        literal_prepare::PrepareDecision::PrepareShape(p) => {
            let version = c.header.version;
            send_prepare(p, version, conn, Some(Box::new(c))).await?;
            Ok(Ok(()))
        }
        literal_prepare::PrepareDecision::Pass(reason) => {
            if reason != literal_prepare::NO_LITERAL {
                conn.metrics.literal_prepare(Err(reason));
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
