//! Token-aware routing of rewritten EXECUTEs (see [`crate::cluster`] and [`crate::replica`]):
//! the replica chosen for the partition, its connection (opened by replaying the client's
//! handshake), the shape prepared there, and the answers back to the client.

use super::answer::ended_in_flight;
use super::conn::{Conn, Id};
use super::pending::Pending;
use super::send::{prepare_frame, send_original, unprepared};

use crate::control::Group;
use crate::metrics::Metrics;
use crate::rewrite::literal_prepare;
use crate::rewrite::{self};
use crate::schema_agreement;
use crate::shapes::ShapeRef;
use crate::wire::Wire;
use autoprep_cache::{PreparedEntry, ShapeHash};
use autoprep_protocol::envelope::Header;
use autoprep_protocol::envelope::{Envelope, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::RequestBody;
use bytes::{Bytes, BytesMut};

use crate::cluster::READS;
use crate::replica::{self, Link, LinkState, Routed, RoutedRequest};
use crate::rewrite::Route;
use std::sync::Arc;
use std::time::Instant;
use tracing::{debug, info, Instrument};

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
    /// See `RoutedRequest::literals`.
    pub literals: Vec<Arc<literal_prepare::Statement>>,
}

fn home(
    conn: &Conn,
    reason: &'static str,
    frame: BytesMut,
) -> Result<(), (BytesMut, &'static str)> {
    conn.metrics.routed_home(reason);
    Err((frame, reason))
}

/// Sends `frame` to a replica of its partition when one is ready for it; otherwise gives
/// it back for the home connection (counted with why).
pub(super) async fn route(
    conn: &Arc<Conn>,
    frame: BytesMut,
    route: Route,
    req: Request,
) -> Result<(), (BytesMut, &'static str)> {
    let Some(home_addr) = conn.home else {
        return home(conn, "home address unknown", frame);
    };
    if !req.same_keyspace {
        return home(conn, "keyspace differs", frame);
    }
    let now = Instant::now();
    if conn.cluster.begin_refresh(home_addr, now) {
        refresh(conn, req.version).await;
    }
    let Some(view) = conn.cluster.current() else {
        return home(conn, "no cluster view", frame);
    };
    if view.node_count() < 2 {
        return home(conn, "single node", frame);
    }
    // The keyspace of the partition: the one keyspace of the statement's tables.
    let entry = &route.entry;
    let Some((keyspace, _)) = entry.tables.first() else {
        return home(conn, "no table", frame);
    };
    if entry.tables.iter().any(|(k, _)| k != keyspace) {
        return home(conn, "several keyspaces", frame);
    }
    let addr = match conn
        .cluster
        .pick(&view, keyspace, route.token, home_addr, route.local_only)
    {
        Ok(a) => a,
        Err(reason) => return home(conn, reason, frame),
    };
    let mut known = true;
    for e in std::iter::once(entry).chain(&route.others) {
        let (here, everywhere) = conn.cluster.is_known(&view, home_addr, addr, &e.id);
        known &= here;
        if !everywhere {
            // Prepared on every replica this connection reaches, as drivers prepare on
            // every node: a later request finds it wherever its partition is.
            for l in conn.links.open_links() {
                if !conn.cluster.holds(l.addr, &e.id) && l.start_preparing(&e.id) {
                    let (conn, e) = (conn.clone(), e.clone());
                    tokio::spawn(async move { prepare_on(&conn, l, e).await }.in_current_span());
                }
            }
        }
    }
    if addr == home_addr {
        return home(conn, crate::metrics::HOME_IS_THE_REPLICA, frame);
    }
    let link = match conn.links.get(addr, now) {
        LinkState::Open(l) => l,
        LinkState::NotYet(reason) => return home(conn, reason, frame),
        LinkState::Absent => {
            open(conn, addr);
            return home(conn, "replica connecting", frame);
        }
    };
    if !known {
        return home(conn, "not prepared on the replica", frame);
    }
    let routed = Routed::Client(RoutedRequest {
        stream: req.stream,
        original: req.original,
        id: entry.id.clone(),
        hash: req.hash,
        repeatable: route.repeatable(),
        tag: crate::streams::Tag {
            started: Some(crate::stamp::Stamp::of(now)),
            shape: req.shape,
            group: req.group,
        },
        literals: req.literals,
    });
    match link.send(frame, routed).await {
        Ok(()) => {
            conn.metrics.routed_to(addr);
            Ok(())
        }
        Err(frame) => home(conn, "replica busy", frame),
    }
}

/// Remembers a client's own PREPARED answer for routing its EXECUTEs.
pub(super) fn client_prepared(conn: &Conn, env: &Envelope, text: String, keyspace: Option<String>) {
    let statement = conn.wire().with_result(env, |r| {
        let ResultView::Prepared(p) = r else {
            return None;
        };
        let pk_indexes: Vec<u16> = p.bind.pk_indexes().collect();
        if pk_indexes.is_empty() {
            return None;
        }
        // The partition's keyspace and table: those of the bind variables (one table).
        let mut tables: Vec<(String, String)> = Vec::new();
        for c in p.bind.columns.iter() {
            let t = (c.keyspace.to_owned(), c.table.to_owned());
            if !tables.contains(&t) {
                tables.push(t);
            }
        }
        Some(crate::cluster::ClientStatement {
            text,
            keyspace,
            id: Bytes::copy_from_slice(p.id),
            result_metadata_id: p.result_metadata_id.map(Bytes::copy_from_slice),
            pk_indexes,
            tables,
        })
    });
    if let Some(statement) = statement {
        conn.cluster.client_prepared(statement);
    }
}

/// What routing a client's own EXECUTE needs, when its statement is one the client
/// prepared through autoprep with a partition key and the values bind it (positionally).
pub(super) fn client_execute(conn: &Conn, header: &Header, body: &[u8]) -> Option<Route> {
    use autoprep_protocol::message::execute::ExecuteView;
    let rb = RequestBody::parse(header, body).ok()?;
    // The id first: an EXECUTE of a statement not prepared through autoprep (common on a
    // cluster of several nodes, and before the view is read) needs no parameters read.
    let entry = conn
        .cluster
        .client_statement(ExecuteView::id_of(rb.message).ok()?)?;
    let e = ExecuteView::parse(rb.message, header.version).ok()?;
    let values = e.params.values.filter(|v| !v.named)?;
    let token = rewrite::partition_token(&entry.pk_indexes, values.raw)?;
    let local_only = rewrite::local_only(
        e.params.consistency,
        e.params.serial_consistency,
        entry.conditional,
    );
    Some(Route {
        token,
        entry,
        others: Vec::new(),
        local_only,
    })
}

/// What routing a client's BATCH message needs, when every child is a statement the
/// client prepared through autoprep and all name the same partition (a single-partition
/// batch), with positional values.
pub(super) fn client_batch(conn: &Conn, header: &Header, body: &[u8]) -> Option<Route> {
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
        let entry = conn.cluster.client_statement(id)?;
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
    // A batch with one conditional statement is a conditional batch.
    let conditional = entries.iter().any(|e| e.conditional);
    let mut entries = entries.into_iter();
    Some(Route {
        token: token?,
        entry: entries.next()?,
        others: entries.collect(),
        local_only: rewrite::local_only(
            b.params.consistency,
            b.params.serial_consistency,
            conditional,
        ),
    })
}

/// The first read of the cluster view, asked by a connection once it is authenticated and its
/// client sends requests, not only by the first request routing would send: until a view is
/// read a cluster of one node is not known as such, and every EXECUTE and BATCH has its body
/// read for routing (those of statements prepared elsewhere would never ask for the view).
/// Returns whether the connection is done with it: it asked, or no view is needed (routing is
/// off, or a view was read); it asks once, and a failed read is retried by later connections
/// and routed requests, after the refresh's pause.
pub(super) async fn first_view(conn: &Conn) -> bool {
    if !conn.cluster.needs_view() {
        return true;
    }
    if !conn.ready.load(std::sync::atomic::Ordering::Acquire) {
        return false;
    }
    let version = conn.lock().handshake.version;
    let (Some(home), Some(version)) = (conn.home, version) else {
        return true;
    };
    if conn.cluster.begin_refresh(home, Instant::now()) {
        refresh(conn, version).await;
    }
    true
}

/// Sends the reads of a cluster-view refresh on the home connection.
async fn refresh(conn: &Conn, version: ProtocolVersion) {
    for (part, text) in READS {
        let Some(frame) = schema_agreement::query_frame(version, text) else {
            continue;
        };
        let pending = Pending::ClusterRead(part);
        let sent = conn.send(frame, pending, None, Group::Other, Id::Take);
        if sent.await.is_err() {
            return;
        }
    }
}

/// Opens the connection to the replica `addr` in the background.
fn open(conn: &Arc<Conn>, addr: std::net::SocketAddr) {
    let conn = conn.clone();
    let task = async move {
        let handshake = conn.lock().handshake.clone();
        if !handshake.complete {
            conn.links.failed(addr, Instant::now());
            return;
        }
        let tls = conn.upstream_tls.as_ref();
        let opened = replica::open(addr, &handshake, tls, conn.settings.max_frame).await;
        drop(handshake);
        match opened {
            Ok(o) => {
                debug!(replica = %addr, "replica connection open");
                let link = o.link.clone();
                let reader = tokio::spawn(read(conn.clone(), o).in_current_span());
                if spend_use_warning(&link, conn.wire()).await {
                    conn.links.opened(link, reader);
                } else {
                    reader.abort();
                    link.close();
                    conn.links.failed(addr, Instant::now());
                }
            }
            Err(e) => {
                info!(replica = %addr, error = %e, "replica connection not opened; its requests go home");
                conn.links.failed(addr, Instant::now());
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
async fn spend_use_warning(link: &Link, wire: Wire) -> bool {
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
    let Some(id) = answer.as_ref().and_then(|a| wire.prepared_id(a)) else {
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
    let encoded =
        autoprep_protocol::message::execute::encode_execute(version, &id, &[], &params, &mut body);
    if encoded.is_err() {
        return false;
    }
    let execute = Envelope::request_frame(version, Opcode::EXECUTE, &body);
    ok(&link.request(execute).await)
}

/// Prepares `entry` on the replica of `link` (on v4 after setting its keyspace on that
/// connection, never beside it); the node then holds the id.
async fn prepare_on(conn: &Conn, link: Arc<Link>, entry: Arc<PreparedEntry>) {
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
            let same = conn
                .wire()
                .prepared_id(&answer)
                .is_some_and(|id| id == entry.id);
            if same {
                conn.cluster.learn(link.addr, &entry.id);
            } else {
                debug!(replica = %link.addr, "a replica's PREPARED answer differs; not routed there");
            }
        }
    }
    link.done_preparing(&entry.id);
}

/// Reads a replica connection's answers and gives each to the client under its own stream
/// id; an UNPREPARED answer sends the client's request home instead. When the connection
/// ends, requests still in flight on it may have run: those that may repeat (idempotent by
/// their form, or conditional and otherwise so: see
/// [`autoprep_protocol::cql::idempotent::may_repeat`]) go home (a driver would send them to
/// its next host, and the client has only autoprep); the client gets an Overloaded error for
/// each of the others (drivers retry what the application marked idempotent, as after a
/// coordinator's failure).
async fn read(conn: Arc<Conn>, o: replica::Opened) {
    let replica::Opened {
        link,
        mut socket,
        mut frames,
        writer: _writer,
    } = o;
    'conn: loop {
        loop {
            let env = match frames.decode() {
                Ok(Some(env)) => env,
                Ok(None) => break,
                Err(_) => break 'conn,
            };
            if env.header().stream.0 < 0 {
                continue;
            }
            let answered = match link.answered(env.header().stream.0) {
                Some(Routed::Own(tx)) => {
                    let _ = tx.send(env);
                    Ok(())
                }
                Some(Routed::Client(r)) => replica_answer(env, r, &link, &conn).await,
                None => Ok(()),
            };
            if answered.is_err() {
                break 'conn;
            }
        }
        conn.client.flush();
        match frames.read_from(&mut socket).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    conn.links.failed(link.addr, Instant::now());
    for r in link.take_in_flight() {
        let Routed::Client(r) = r else { continue };
        if r.repeatable {
            Metrics::inc(&conn.metrics.replica_in_flight_resent);
            // Running it twice leaves what running it once leaves (a conditional write never
            // applies twice): it goes home, as a driver sends it to its next host.
            let (stream, original) = (r.stream, r.original);
            let _ = super::send::materialize(&conn, stream, r.literals, original, Id::Take).await;
            conn.upstream.flush();
        } else {
            Metrics::inc(&conn.metrics.replica_in_flight_overloaded);
            let answer = ended_in_flight(link.version, r.stream, "the replica", Some(link.addr));
            let _ = conn.answer(answer).await;
        }
    }
    conn.client.flush();
    info!(replica = %link.addr, "replica connection ended; its requests go home");
}

/// The answer on a replica connection to a client's request: given to the client under its
/// own stream id, or, UNPREPARED, the request goes home as the client sent it.
async fn replica_answer(
    env: Envelope,
    a: RoutedRequest,
    link: &Link,
    conn: &Conn,
) -> Result<(), super::end::End> {
    if conn.wire().unprepared_id(&env).is_some() {
        conn.cluster.forget(link.addr, &a.id);
        let (stream, original, literals) = (a.stream, a.original, a.literals);
        unprepared(conn);
        send_original(conn, stream, None, original, literals, Id::Take).await?;
        conn.upstream.flush();
        return Ok(());
    }
    if conn.tracing.enabled() {
        // The request's span, if sampled (answered by the replica).
        let facts = (conn.any_noted())
            .then(|| conn.lock().traces.take_routed(a.stream))
            .flatten();
        let answered = crate::otel::Answer::envelope(&env, || conn.wire().compression);
        let now = crate::stamp::Stamp::now();
        (conn.tracing).answered(facts, &a.tag, now, answered, Some(link.addr));
    }
    conn.metrics.responded(a.tag);
    let mut env = match a.hash {
        Some(hash) if link.version >= ProtocolVersion::V5 => {
            (conn.rewriter).without_metadata_change(env, conn.node, hash, &a.id)
        }
        _ => env,
    };
    env.set_stream(StreamId(a.stream));
    conn.answer(env.into_frame()).await
}
