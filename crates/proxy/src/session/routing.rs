//! Token-aware routing of rewritten EXECUTEs (see [`crate::cluster`] and [`crate::replica`]):
//! the replica chosen for the partition, its connection (opened by replaying the client's
//! handshake), the shape prepared there, and the answers back to the client.

use super::answer::unprepared_id;
use super::conn::reserve_read_room;
use super::pending::Pending;
use super::send::{allocate, materialize, prepare_frame, send_upstream};
use super::state::Shared;

use crate::context::Context;
use crate::control::Group;
use crate::metrics::Metrics;
use crate::rewrite::literal_prepare;
use crate::rewrite::{self};
use crate::schema_agreement;
use crate::shapes::ShapeRef;
use crate::writer::Out;
use autoprep_cache::{PreparedEntry, ShapeHash};
use autoprep_protocol::compression::{plain_body, Compression};
use autoprep_protocol::cql::conditional::is_conditional;
use autoprep_protocol::envelope::Header;
use autoprep_protocol::envelope::{Envelope, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::{RequestBody, ResponseBody};
use bytes::{Bytes, BytesMut};

use crate::cluster::READS;
use crate::replica::{self, Link, LinkState, Routed};
use crate::rewrite::Route;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::AsyncReadExt;
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
        let (here, everywhere) = ctx.cluster.is_known(&view, home_addr, addr, &e.id);
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
            started: Some(crate::stamp::Stamp::of(now)),
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
    let Ok(ResultView::Prepared(p)) = ResultView::parse(rb.message, env.header().version) else {
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
        conditional: is_conditional(&text),
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
    use autoprep_protocol::message::execute::ExecuteView;
    let rb = RequestBody::parse(header, body).ok()?;
    // The id first: an EXECUTE of a statement not prepared through autoprep (common on a
    // cluster of several nodes, and before the view is read) needs no parameters read.
    let entry = ctx
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
pub(super) async fn first_view(ctx: &Context, shared: &Shared) -> bool {
    if !ctx.cluster.needs_view() {
        return true;
    }
    if !shared.ready.load(std::sync::atomic::Ordering::Acquire) {
        return false;
    }
    let version = shared.lock().handshake.version;
    let (Some(home), Some(version)) = (shared.home, version) else {
        return true;
    };
    if ctx.cluster.begin_refresh(home, Instant::now()) {
        refresh(shared, version).await;
    }
    true
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
                    // [otel hook] The request's span, if sampled (answered by the replica).
                    if ctx.tracing.enabled() {
                        let facts = shared.lock().traces.take_routed(stream);
                        let answer = crate::otel::Answer::Envelope(&env, compression);
                        let now = crate::stamp::Stamp::now();
                        ctx.tracing
                            .answered(facts, &tag, now, answer, Some(link.addr));
                    }
                    ctx.metrics.responded(tag);
                    let mut env = match hash {
                        Some(hash) if version >= ProtocolVersion::V5 => ctx
                            .rewriter
                            .without_metadata_change(env, shared.node, hash, &id),
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
