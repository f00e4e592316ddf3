//! A new home for a client connection whose home node failed (design change 1 of the book's
//! soak chapter).
//!
//! When the home connection ends (the node was killed, restarted, or closed the connection;
//! not a protocol error), the client connection stays open if another contact point can be
//! reached: the client's handshake is replayed there exactly as for a replica connection
//! ([`replica::replay`]: its STARTUP, then its authentication), then its keyspace (`USE`) and
//! its event registrations (`REGISTER`), and the session goes on with a new [`Conn`]. A
//! driver that knows only autoprep never sees its only node go down for a node failure.
//!
//! What was in flight on the failed home gets exactly one answer each: a request that may
//! repeat (a `SELECT`, a write that running twice leaves as running once, a conditional write,
//! which never applies twice: see [`autoprep_protocol::cql::idempotent::may_repeat`]) is sent
//! again to the new home from the original bytes the proxy keeps of it, as a driver sends it
//! to its next host, and so are a client's PREPARE (which changes nothing but the node's
//! cache) and requests the node never had (a request behind the proxy's PREPAREs of the
//! statements it names, a client's PREPARE behind the proxy's PREPARE of its shape); anything
//! else is answered with the `Overloaded` error a replica connection's end gives ("it may have
//! run", see [`ended_in_flight`]); a schema change's answer held for agreement is given as it is. What
//! is sent toward the old home afterwards goes on to the new one (see `Conn::send`).
//!
//! The session's task opens the new home while its client reader is not polled: the client
//! reader swaps to the new `Conn` at its next read, holding no request half-handled; requests
//! it pushes in between (those of the read it was handling) find the old stream table closed
//! and go on to the new home, or, when they were already pushed, were answered above.
//!
//! New homes are contact points (`--upstream`), whose index is the prepared-statement cache's
//! node id: tried in the order a new client connection would (see
//! [`crate::contact_points::ContactPoints::pick`]), the failed node, now in back-off, last.
//! Statements the client prepared on the old home are answered UNPREPARED by the new one and
//! prepared again by the driver, as on any node; the proxy's shapes are prepared there again.

use super::answer::ended_in_flight;
use super::conn::{Conn, Id, Place};
use super::pending::{Pending, RewrittenAnswer};
use super::send::{materialize, pass_client_prepare, send_original};
use super::state::State;

use crate::context::Context;
use crate::metrics::Metrics;
use crate::replica::{self, OpenError, Replayed};
use crate::rewrite::literal_prepare::{ClientPrepare, Statement};
use crate::schema_agreement;
use crate::socket::ReadHalf;
use crate::upstream::UpstreamTls;
use crate::wire::{FrameReader, Wire};
use autoprep_protocol::envelope::{Direction, Envelope, EnvelopeDecoder, Opcode, ProtocolVersion};
use autoprep_protocol::message::query::QueryRequest;
use autoprep_protocol::message::RequestBody;
use bytes::{Bytes, BytesMut};

use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinHandle;
use tracing::{debug, info};

/// A client connection's new home, for its upstream reader.
pub(super) struct NewHome {
    pub(super) conn: Arc<Conn>,
    pub(super) socket: ReadHalf,
    /// Its frames (v5 framing started by the handshake's replay), with anything read already.
    pub(super) frames: FrameReader,
    /// The new home's writer task.
    pub(super) writer: JoinHandle<()>,
}

/// The home connection of `old` failed: answers what was in flight there, opens a new home on
/// another node, hands the connection over to it and sends there what goes again. `None` when
/// the client's handshake cannot be replayed or no node could be reached: the session ends
/// (and closes the client connection, as before there were new homes).
pub(super) async fn rehome(ctx: &Context, old: &Arc<Conn>) -> Option<NewHome> {
    if !old.lock().handshake.complete {
        // Nothing to replay: the client connection closes as the home did, with no answer
        // to what it had sent (as before there were new homes).
        debug!("the home failed during the client's handshake: nothing to replay");
        old.hand_over(None);
        return None;
    }
    let (in_flight, state, waiters) = {
        let mut st = old.lock();
        let waiters = st.id_waiters;
        let (in_flight, state) = st.hand_over(ctx.cfg.upstream_streams);
        (in_flight, state, waiters)
    };
    // Senders waiting for an id or for a USE's turn on the old home stop waiting: its table is
    // closed, and what they send goes on to the new home.
    old.wake_senders(waiters);
    old.prepares_answered.notify_waiters();
    old.upstream.close();
    // The old `Conn` lives until the client reader's next read: its socket should not.
    old.upstream.release();
    let version = state.handshake.version.unwrap_or(ProtocolVersion::V4);
    let mut again = Vec::new();
    let mut overloaded = 0u64;
    for p in in_flight {
        match fate(p, old.wire()) {
            Fate::MayHaveRun(stream) => {
                overloaded += 1;
                let answer = ended_in_flight(version, stream, "the home node", old.home);
                let _ = old.answer(answer).await;
            }
            Fate::Held(env) => {
                let _ = old.answer(env.into_frame()).await;
            }
            Fate::Prepare { hash, client } => {
                old.rewriter.cache.abandoned(old.node, hash);
                again.extend(client.map(Fate::ClientPrepare));
            }
            Fate::ClusterRead => old.cluster.abandon_refresh(),
            again_ @ (Fate::Again(_)
            | Fate::Forwarded { .. }
            | Fate::Materialize { .. }
            | Fate::ClientPrepare(_)) => again.push(again_),
        }
    }
    old.client.flush();
    Metrics::add(&old.metrics.home_in_flight_overloaded, overloaded);
    let Some((home, node)) = open(ctx, Some(old.node), &state).await else {
        Metrics::inc(&old.metrics.home_rehome_failed);
        old.hand_over(None);
        return None;
    };
    let Replayed {
        out,
        socket,
        frames,
        writer,
        peer,
    } = home;
    if let Some(peer) = peer {
        ctx.upstreams.connected(node, peer);
        ctx.metrics.homed_on(peer);
    }
    let place = Place {
        node: u32::try_from(node).unwrap_or(u32::MAX),
        local: old.local,
        home: peer,
        client: old.client.clone(),
        upstream: out,
    };
    let conn = Arc::new(old.rehomed(place, state));
    old.hand_over(Some(conn.clone()));
    Metrics::inc(&ctx.metrics.home_rehomed);
    Metrics::add(&ctx.metrics.home_in_flight_resent, again.len() as u64);
    let addr = |a: Option<std::net::SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
    info!(
        from = %addr(old.home),
        to = %addr(peer),
        overloaded,
        resent = again.len(),
        "home connection failed; the client connection moved to a new home"
    );
    for a in again {
        // An error means the new home failed too: its own end answers what it holds.
        let _ = match a {
            Fate::Again(r) => {
                let literals = r.literals.map(|l| l.statements).unwrap_or_default();
                send_original(&conn, r.stream, r.topology, r.original, literals, Id::Take).await
            }
            Fate::Forwarded { stream, original } => {
                send_original(&conn, stream, None, original, Vec::new(), Id::Take).await
            }
            Fate::Materialize {
                stream,
                rest,
                original,
            } => materialize(&conn, stream, rest, original, Id::Take).await,
            Fate::ClientPrepare(c) => pass_client_prepare(*c, &conn).await,
            _ => Ok(()),
        };
    }
    conn.upstream.flush();
    Some(NewHome {
        conn,
        socket,
        frames,
        writer,
    })
}

/// What becomes of a request in flight on a home that failed.
#[derive(Debug)]
enum Fate {
    /// Answered `Overloaded` (it may have run), on this client stream id.
    MayHaveRun(i16),
    /// A schema change's answer held for schema agreement: the change ran; given as it is.
    Held(Envelope),
    /// A rewritten request that may repeat: sent again to the new home as the client sent it.
    Again(RewrittenAnswer),
    /// A request forwarded as it was that may repeat: sent again too.
    Forwarded { stream: i16, original: Bytes },
    /// A PREPARE of the statements a client request names that the client prepared with
    /// literals inline: the request itself did not run; all of it goes to the new home.
    Materialize {
        stream: i16,
        rest: Vec<Arc<Statement>>,
        original: Bytes,
    },
    /// The proxy's PREPARE of a shape: abandoned on the old node; the client's PREPARE it
    /// stood in for, if any, goes to the new home as the client sent it.
    Prepare {
        hash: autoprep_cache::ShapeHash,
        client: Option<Box<ClientPrepare>>,
    },
    /// That client PREPARE.
    ClientPrepare(Box<ClientPrepare>),
    /// A read of the proxy's own for the cluster view: its refresh is abandoned.
    ClusterRead,
}

/// What becomes of `pending`, in flight on a home that failed (`wire`: its bodies).
fn fate(pending: Pending, wire: Wire) -> Fate {
    match pending {
        Pending::Client { stream, .. }
        | Pending::Topology { stream, .. }
        | Pending::SchemaChange { stream } => Fate::MayHaveRun(stream),
        // A PREPARE changes nothing but the node's cache: it goes again.
        Pending::ClientPrepare {
            stream, original, ..
        } => match client_prepare_of(stream, original, wire) {
            Some(c) => Fate::ClientPrepare(Box::new(c)),
            None => Fate::MayHaveRun(stream),
        },
        Pending::SchemaCheck(check) => Fate::Held(check.held()),
        Pending::Rewritten(r) if may_repeat(&r, wire) => Fate::Again(r),
        Pending::Again { stream, original } => Fate::Forwarded { stream, original },
        Pending::Rewritten(r) => Fate::MayHaveRun(r.stream),
        Pending::Materialize {
            stream,
            rest,
            original,
            ..
        } => Fate::Materialize {
            stream,
            rest,
            original,
        },
        Pending::Prepare { hash, client, .. } => Fate::Prepare { hash, client },
        Pending::ClusterRead(_) => Fate::ClusterRead,
    }
}

/// Whether a rewritten request may repeat (see
/// [`autoprep_protocol::cql::idempotent::may_repeat`]): a QUERY whose text may, an EXECUTE of
/// statements prepared with literals inline that may, or a BATCH (not a counter batch) of text
/// children that may (a child by id has no text here).
fn may_repeat(r: &RewrittenAnswer, wire: Wire) -> bool {
    use autoprep_protocol::cql::idempotent::may_repeat as text_may;
    use autoprep_protocol::message::batch::{BatchQuery, BatchView};
    const COUNTER_BATCH: u8 = 2;
    let mut frame = BytesMut::from(&r.original[..]);
    let decoded = EnvelopeDecoder::new(Direction::Request, wire.max_frame).decode(&mut frame);
    let Ok(Some(env)) = decoded else {
        return false;
    };
    let header = env.header();
    match header.opcode {
        Opcode::QUERY => wire.body(&env).is_some_and(|b| {
            QueryRequest::parse(header, &b).is_ok_and(|q| text_may(q.query.query))
        }),
        Opcode::EXECUTE => r.literals.as_ref().is_some_and(|l| {
            !l.statements.is_empty() && l.statements.iter().all(|s| s.may_repeat())
        }),
        Opcode::BATCH => wire.body(&env).is_some_and(|b| {
            let Ok(rb) = RequestBody::parse(header, &b) else {
                return false;
            };
            let Ok(batch) = BatchView::parse(rb.message, header.version) else {
                return false;
            };
            batch.batch_type != COUNTER_BATCH
                && batch
                    .children()
                    .all(|c| c.is_ok_and(|c| matches!(c.query, BatchQuery::Text(t) if text_may(t))))
        }),
        _ => false,
    }
}

/// The client's PREPARE `original` (client stream id `stream`), to pass on to the new home as
/// the client sent it.
fn client_prepare_of(stream: i16, original: Bytes, wire: Wire) -> Option<ClientPrepare> {
    let mut frame = BytesMut::from(&original[..]);
    let env = EnvelopeDecoder::new(Direction::Request, wire.max_frame)
        .decode(&mut frame)
        .ok()??;
    let body = Bytes::copy_from_slice(&wire.body(&env)?);
    Some(ClientPrepare {
        stream,
        header: *env.header(),
        body,
        original,
    })
}

/// Opens a new home for a connection homed on contact point `failed` (or, with `None`, one
/// taken over from a draining process: see `super::adopt`): the contact points in the order a
/// new client connection would try them, `failed` marked as failed first (so tried last, and
/// by new client connections too). The new home and its contact point's index.
pub(super) async fn open(
    ctx: &Context,
    failed: Option<u32>,
    state: &State,
) -> Option<(Replayed, usize)> {
    if let Some(failed) = failed {
        ctx.upstreams.failed(failed as usize, Instant::now());
    }
    let order = {
        let cfg = &ctx.cfg;
        let place = |addr| ctx.cluster.place(addr, cfg.routing_remote_failover);
        ctx.upstreams
            .pick(Instant::now(), &ctx.cluster.homing(&place))
    };
    let tls = ctx.upstream_tls.as_ref();
    let max_frame = ctx.cfg.max_frame_bytes;
    for i in order {
        let Some(addr) = ctx.upstreams.addr(i) else {
            continue;
        };
        let opened = tokio::time::timeout(
            replica::OPEN_TIMEOUT,
            replay_home(addr, state, tls, max_frame),
        )
        .await
        .unwrap_or(Err(OpenError::Timeout));
        match opened {
            Ok(home) => {
                ctx.upstreams.succeeded(i);
                return Some((home, i));
            }
            Err(e) => {
                debug!(node = %addr, error = %e, "no new home there");
                if matches!(e, OpenError::Connect(_) | OpenError::Timeout) {
                    Metrics::inc(&ctx.metrics.upstream_connect_failures);
                }
                ctx.upstreams.failed(i, Instant::now());
            }
        }
    }
    None
}

/// Connects to `addr` and replays on it what the client connection set up on its home: the
/// handshake (as for a replica connection), then its keyspace and its event registrations.
async fn replay_home(
    addr: &str,
    state: &State,
    tls: Option<&UpstreamTls>,
    max_frame: usize,
) -> Result<Replayed, OpenError> {
    let mut home = replica::replay(addr, &state.handshake, tls, max_frame).await?;
    let version = state.handshake.version.unwrap_or(ProtocolVersion::V4);
    if let Some(ks) = &state.keyspace {
        let name = ks.replace('"', "\"\"");
        let frame = schema_agreement::query_frame(version, &format!("USE \"{name}\""))
            .ok_or(OpenError::Diverged("the keyspace cannot be set"))?;
        if home.ask(frame).await?.header().opcode != Opcode::RESULT {
            return Err(OpenError::Diverged("the USE was refused"));
        }
    }
    for body in &state.registered {
        let frame = Envelope::request_frame(version, Opcode::REGISTER, body);
        if home.ask(frame).await?.header().opcode != Opcode::READY {
            return Err(OpenError::Diverged("the REGISTER was refused"));
        }
    }
    Ok(home)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::Used;
    use autoprep_protocol::envelope::{Flags, Header, StreamId};
    use zeroize::Zeroizing;

    use crate::stand_in::{answer, MAX};

    fn wire() -> Wire {
        Wire {
            compression: None,
            max_frame: MAX,
        }
    }

    fn query(text: &str) -> Bytes {
        let frame = schema_agreement::query_frame(ProtocolVersion::V4, text).unwrap();
        frame.freeze()
    }

    fn prepare_frame(text: &str) -> Bytes {
        let frame = crate::session::send::prepare_frame(ProtocolVersion::V4, text, None).unwrap();
        frame.freeze()
    }

    /// A BATCH of `batch_type` with `texts` as its text children.
    fn batch(batch_type: u8, texts: &[&str]) -> Bytes {
        use autoprep_protocol::message::batch::{
            encode_batch, BatchChild, BatchParams, BatchQuery,
        };
        use autoprep_protocol::message::query::Values;
        let children: Vec<BatchChild<'_>> = texts
            .iter()
            .map(|t| BatchChild {
                query: BatchQuery::Text(t.as_bytes()),
                values: Values {
                    count: 0,
                    named: false,
                    raw: &[],
                },
            })
            .collect();
        let params = BatchParams {
            consistency: 1,
            ..Default::default()
        };
        let mut body = Vec::new();
        encode_batch(
            ProtocolVersion::V4,
            batch_type,
            &children,
            &params,
            &mut body,
        )
        .unwrap();
        Envelope::request_frame(ProtocolVersion::V4, Opcode::BATCH, &body).freeze()
    }

    fn rewritten(stream: i16, text: &str) -> Pending {
        rewritten_from(stream, query(text))
    }

    fn rewritten_from(stream: i16, original: Bytes) -> Pending {
        Pending::Rewritten(RewrittenAnswer {
            stream,
            original,
            used: Used::One {
                hash: autoprep_cache::ShapeHash(1),
                id: Bytes::from_static(b"id"),
            },
            topology: None,
            literals: None,
        })
    }

    #[test]
    fn what_may_repeat_goes_again_and_what_may_have_run_otherwise_is_answered_overloaded() {
        for (stream, text) in [
            (3, "SELECT v FROM t WHERE k = 1"),
            (3, "INSERT INTO t (k) VALUES (1)"),
            (3, "INSERT INTO t (k) VALUES (1) IF NOT EXISTS"),
            (3, "BEGIN BATCH INSERT INTO t (k) VALUES (1) APPLY BATCH"),
        ] {
            assert!(matches!(
                fate(rewritten(stream, text), wire()),
                Fate::Again(r) if r.stream == 3
            ));
        }
        for text in [
            "UPDATE t SET l = l + [1] WHERE k = 1 IF v = 0",
            "UPDATE t SET c = c + 1 WHERE k = 1",
            "INSERT INTO t (k, v) VALUES (1, now())",
        ] {
            assert!(matches!(
                fate(rewritten(4, text), wire()),
                Fate::MayHaveRun(4)
            ));
        }
        let forwarded = Pending::Again {
            stream: 9,
            original: query("INSERT INTO t (k) VALUES (?)"),
        };
        assert!(matches!(
            fate(forwarded, wire()),
            Fate::Forwarded { stream: 9, .. }
        ));
        let (logged, counter) = (0, 2);
        let plain = ["INSERT INTO t (k) VALUES (1)", "DELETE FROM t WHERE k = 2"];
        assert!(matches!(
            fate(rewritten_from(3, batch(logged, &plain)), wire()),
            Fate::Again(r) if r.stream == 3
        ));
        for (batch_type, texts) in [
            (counter, &plain[..]),
            (
                logged,
                &[
                    "INSERT INTO t (k) VALUES (1)",
                    "UPDATE t SET l = l + [1] WHERE k = 1",
                ],
            ),
        ] {
            assert!(matches!(
                fate(rewritten_from(4, batch(batch_type, texts)), wire()),
                Fate::MayHaveRun(4)
            ));
        }
        assert!(matches!(
            fate(Pending::client(5), wire()),
            Fate::MayHaveRun(5)
        ));
        let prepare = Pending::ClientPrepare {
            stream: 6,
            route: None,
            names_keyspace: false,
            original: prepare_frame("INSERT INTO t (k) VALUES (1)"),
        };
        assert!(matches!(
            fate(prepare, wire()),
            Fate::ClientPrepare(c) if c.stream == 6 && c.header.opcode == Opcode::PREPARE
        ));
        assert!(matches!(
            fate(Pending::SchemaChange { stream: 7 }, wire()),
            Fate::MayHaveRun(7)
        ));
        let materialize = Pending::Materialize {
            stream: 8,
            rest: Vec::new(),
            original: query("SELECT v FROM t"),
            exposed: true,
        };
        assert!(matches!(
            fate(materialize, wire()),
            Fate::Materialize { stream: 8, .. }
        ));
        assert!(matches!(
            fate(Pending::ClusterRead(crate::cluster::Part::Local), wire()),
            Fate::ClusterRead
        ));
        // A frame that cannot be read is not known to be a read.
        let mut broken = rewritten(9, "SELECT v FROM t");
        if let Pending::Rewritten(r) = &mut broken {
            r.original = Bytes::from_static(b"\x04\x00");
        }
        assert!(matches!(fate(broken, wire()), Fate::MayHaveRun(9)));
    }

    #[test]
    fn a_held_schema_change_answer_is_given() {
        let header = Header {
            version: ProtocolVersion::V4,
            direction: Direction::Response,
            flags: Flags(0),
            stream: StreamId(11),
            opcode: Opcode::RESULT,
            length: 0,
        };
        // RESULT kind Schema_change (5), then its body.
        let mut body = 5i32.to_be_bytes().to_vec();
        for s in ["CREATED", "TABLE", "ks", "t"] {
            body.extend((s.len() as u16).to_be_bytes());
            body.extend(s.as_bytes());
        }
        let answer = Envelope::new(header, &body);
        let step = schema_agreement::Check::start(answer.clone(), Instant::now());
        let schema_agreement::Step::Ask { check, .. } = step else {
            panic!("a schema change is held");
        };
        match fate(Pending::SchemaCheck(check), wire()) {
            Fate::Held(env) => assert_eq!(env.as_bytes(), answer.as_bytes()),
            other => panic!("{other:?}"),
        }
    }

    /// A stand-in node that answers STARTUP with READY, a QUERY with a RESULT (or, with
    /// `refuse_use`, an ERROR), a REGISTER with READY.
    async fn node(refuse_use: bool) -> (String, tokio::sync::mpsc::Receiver<(Opcode, Vec<u8>)>) {
        let (addr, seen) = crate::stand_in::spawn(move |h| match h.opcode {
            Opcode::QUERY if refuse_use => {
                answer(h.version, h.stream.0, Opcode::ERROR, b"\0\0\x22\0\0\x01x")
            }
            Opcode::QUERY => answer(h.version, h.stream.0, Opcode::RESULT, &1i32.to_be_bytes()),
            _ => answer(h.version, h.stream.0, Opcode::READY, &[]),
        })
        .await;
        (addr.to_string(), seen)
    }

    fn state() -> State {
        let mut st = State {
            keyspace: Some("My\"Ks".into()),
            registered: vec![Bytes::from_static(b"\0\x01\0\x0dSCHEMA_CHANGE")],
            ..State::default()
        };
        st.handshake = replica::Handshake {
            version: Some(ProtocolVersion::V4),
            startup: Some(Zeroizing::new(b"\0\0".to_vec())),
            auth: Vec::new(),
            lz4: false,
            complete: true,
        };
        st
    }

    #[tokio::test]
    async fn a_new_home_gets_the_handshake_then_the_keyspace_then_the_registrations() {
        let (addr, mut seen) = node(false).await;
        replay_home(&addr, &state(), None, MAX)
            .await
            .expect("opened");
        assert_eq!(
            seen.recv().await.unwrap(),
            (Opcode::STARTUP, b"\0\0".to_vec())
        );
        let (op, body) = seen.recv().await.unwrap();
        assert_eq!(op, Opcode::QUERY);
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("USE \"My\"\"Ks\""), "{text}");
        assert_eq!(
            seen.recv().await.unwrap(),
            (Opcode::REGISTER, b"\0\x01\0\x0dSCHEMA_CHANGE".to_vec())
        );
    }

    #[tokio::test]
    async fn a_node_that_refuses_the_keyspace_is_no_new_home() {
        let (addr, _seen) = node(true).await;
        let opened = replay_home(&addr, &state(), None, MAX).await;
        assert!(matches!(opened, Err(OpenError::Diverged(_))));
    }
}
