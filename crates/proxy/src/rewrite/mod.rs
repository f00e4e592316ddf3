//! The auto-prepare rewrite of one QUERY: normalize its text, look the shape up in the shared
//! cache, and either build the EXECUTE that replaces it or say why it goes through unchanged.
//!
//! The EXECUTE carries every parameter of the QUERY (consistency, page size, paging state,
//! serial consistency, default timestamp, now_in_seconds, the tracing flag and the custom
//! payload) with the literals encoded as the server would have converted them, merged in order
//! with the values the client bound to its own markers. It never sets skip_metadata: the client
//! sent a QUERY and expects metadata.

use crate::cluster::ClusterView;
use crate::config::Config;
use crate::flavor::{Flavors, SCYLLA_ADMISSION};
use crate::metrics::Metrics;
use crate::saving::Switchback;
use crate::shapes::ShapeRef;
use crate::shapes::Shapes;
use autoprep_cache::{CacheConfig, PreparedCache};
use autoprep_cache::{Lookup, PreparedEntry, ShapeHash, ShapeKey};
use autoprep_protocol::cql::normalize::{
    normalize_with, recycle_slots, Normalized, NotCandidate, Shape, Slot,
};
use autoprep_protocol::envelope::{
    Direction, Flags, Header, Opcode, ProtocolVersion, StreamId, HEADER_LEN,
};
use autoprep_protocol::message::query::{QueryParams, QueryRequest, QueryView, Values};
use autoprep_protocol::message::RequestBody;
use autoprep_protocol::primitives::{write_short_bytes, write_value};
use autoprep_protocol::types::encode::scylla as scylla_literals;
use autoprep_protocol::types::encode::EncodeOptions;
use autoprep_protocol::types::{encode_literal, ColumnType};
use bytes::{BufMut, Bytes, BytesMut};
use literal_statements::LiteralStatements;
use std::sync::Arc;
use std::time::Instant;

mod answer;
pub mod batch;
pub mod literal_prepare;
mod literal_statements;

/// What the rewrite works with, shared by every session (in the `Context`): the shape cache,
/// the literal encoder's options, what each node is, the per-shape statistics, the control
/// comparison's period, the statements clients prepared with literals inline and the
/// `exclude` list; with the metrics and the cluster view it reports to and asks.
#[derive(Debug)]
pub struct Rewriter {
    pub cache: PreparedCache,
    pub encode: EncodeOptions,
    /// Which server each contact point is (ScyllaDB or Cassandra), learned from SUPPORTED.
    pub flavors: Flavors,
    /// Statistics of the most executed statement shapes (`/shapes`).
    pub shapes: Shapes,
    /// The switchback windows: whether a ready shape's QUERY goes as it came now, and the
    /// counts the estimate of server CPU saved divides by (see [`crate::saving`]).
    pub switchback: Arc<Switchback>,
    /// The statements clients prepared with literals inline (`--prepare-literals`).
    pub literals: LiteralStatements,
    pub metrics: Arc<Metrics>,
    /// The cluster as routing sees it: whether a rewritten request is worth routing.
    pub cluster: Arc<ClusterView>,
    /// `exclude`, swapped whole on SIGHUP (see [`crate::reload`]).
    exclude: arc_swap::ArcSwap<Vec<String>>,
}

impl Rewriter {
    /// The rewrite's parts for `cfg`, toward `nodes` contact points.
    pub fn new(
        cfg: &Config,
        nodes: usize,
        metrics: Arc<Metrics>,
        cluster: Arc<ClusterView>,
    ) -> anyhow::Result<Rewriter> {
        let server_time_zone = match &cfg.server_time_zone {
            Some(z) => Some(z.parse().map_err(|_| {
                anyhow::anyhow!(
                    "--server-time-zone: expected Z, UTC or an offset like +02:00, got {z:?}"
                )
            })?),
            None => None,
        };
        Ok(Rewriter {
            cache: PreparedCache::new(CacheConfig {
                max_entries: cfg.cache_entries,
                max_bytes: cfg.cache_bytes,
                admission_threshold: cfg.admission_threshold,
                ..CacheConfig::default()
            }),
            encode: EncodeOptions { server_time_zone },
            flavors: Flavors::new(nodes),
            shapes: Shapes::default(),
            switchback: Arc::new(Switchback::new(
                cfg.control_fraction(),
                cfg.control_window_ms,
                cfg.server_metrics_url.as_deref(),
            )?),
            literals: LiteralStatements::new(cfg.literal_statements_bytes),
            metrics,
            cluster,
            exclude: arc_swap::ArcSwap::from_pointee(cfg.exclude.clone()),
        })
    }

    /// Whether a statement of normalized text `shape` is never rewritten (`exclude`).
    pub fn is_excluded(&self, shape: &str) -> bool {
        let patterns = self.exclude.load();
        patterns.iter().any(|e| shape.contains(e.as_str()))
    }

    /// Puts a new `exclude` list in force (SIGHUP).
    pub fn set_exclude(&self, patterns: Vec<String>) {
        self.exclude.store(Arc::new(patterns));
    }
}

/// The cache's node id of the first (or only) `--upstream` contact point; a session's node is
/// the index of the contact point its upstream connection went to.
pub const NODE: u32 = 0;

/// The connection's keyspace as a statement would run under it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnKeyspace<'a> {
    /// The keyspace of the last `USE` answered.
    pub name: Option<&'a str>,
    /// False while a `USE` is in flight: the keyspace the server will run the statement in
    /// is not known, so nothing is rewritten or prepared.
    pub settled: bool,
}

/// A PREPARE the session should send in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareRequest {
    /// The shape's key in the cache.
    pub hash: ShapeHash,
    /// MD5 of keyspace and text, stored with the prepared entry.
    pub fingerprint: [u8; 16],
    pub text: String,
    /// The keyspace the statement runs in (the cache entry's identity; the v5 PREPARE names
    /// it).
    pub keyspace: Option<String>,
}

impl PrepareRequest {
    /// The PREPARE of `shape` (its cache key `hash`) running in `keyspace`.
    pub fn of(shape: &Shape<'_>, hash: ShapeHash, keyspace: Option<&str>) -> PrepareRequest {
        PrepareRequest {
            hash,
            fingerprint: shape.fingerprint(keyspace),
            text: shape.text.clone(),
            keyspace: keyspace.map(str::to_owned),
        }
    }
}

/// The prepared statements a rewritten request uses, to forget on UNPREPARED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Used {
    /// A QUERY became one EXECUTE (no allocation on the hot path).
    One { hash: ShapeHash, id: Bytes },
    /// A BATCH became a batch of prepared children.
    Many(Vec<(ShapeHash, Bytes)>),
}

impl Used {
    /// The shapes whose prepared id is `id`.
    pub fn with_id<'s>(&'s self, id: &'s [u8]) -> impl Iterator<Item = ShapeHash> + 's {
        let all: &[(ShapeHash, Bytes)] = match self {
            Used::One { .. } => &[],
            Used::Many(v) => v,
        };
        let one = match self {
            Used::One { hash, id: i } if i.as_ref() == id => Some(*hash),
            _ => None,
        };
        one.into_iter().chain(
            all.iter()
                .filter(move |(_, i)| i.as_ref() == id)
                .map(|(f, _)| *f),
        )
    }
}

/// What to do with one QUERY or BATCH.
#[derive(Debug)]
pub enum Decision {
    /// Send this envelope (its stream id still to be set) instead of the client's; `route`,
    /// when routing is on and the statement has a partition key, says where its partition is.
    Execute {
        frame: BytesMut,
        used: Used,
        route: Option<Route>,
    },
    /// Forward the request unchanged, counting `reason`; `prepare` asks for background
    /// PREPAREs; `use_keyspace` marks a `USE` whose result the session tracks.
    PassThrough {
        reason: &'static str,
        prepare: Vec<PrepareRequest>,
        use_keyspace: bool,
    },
}

/// What routing a rewritten EXECUTE needs (see [`crate::cluster`]).
#[derive(Debug)]
pub struct Route {
    /// The token of the partition the bound values name.
    pub token: autoprep_routing::Token,
    /// The prepared shape (its keyspace, text and id, to prepare it on a replica).
    pub entry: Arc<PreparedEntry>,
    /// A batch's other statements: the replica must hold them too.
    pub others: Vec<Arc<PreparedEntry>>,
    /// Only a replica in the datacenter of the client connection's node may coordinate it
    /// (see [`local_only`]).
    pub local_only: bool,
}

impl Route {
    /// Every statement of the request may repeat (see
    /// [`autoprep_protocol::cql::idempotent::may_repeat`]): sent again when the node it was in
    /// flight on failed (a batch of such statements may too; a counter batch's statements
    /// may not).
    pub fn repeatable(&self) -> bool {
        self.entry.repeatable && self.others.iter().all(|e| e.repeatable)
    }
}

/// Whether only a replica in the datacenter of the client connection's node may coordinate a
/// request: its consistency is a `LOCAL_*` one, or its statement is `conditional` and its
/// serial consistency is `LOCAL_SERIAL`. The server uses the serial consistency for nothing
/// else (conditional statements' Paxos rounds, and reads at a serial consistency, which the
/// consistency itself says), while drivers send one with every request (the `scylla` crate
/// sends `LOCAL_SERIAL` by default): counted for every statement, it would keep most requests
/// of a two-datacenter cluster from their replicas.
pub fn local_only(consistency: u16, serial: Option<u16>, conditional: bool) -> bool {
    is_local_consistency(consistency) || (conditional && serial.is_some_and(is_local_consistency))
}

/// `LOCAL_QUORUM`, `LOCAL_SERIAL` and `LOCAL_ONE` (native protocol spec, section 3).
pub fn is_local_consistency(c: u16) -> bool {
    matches!(c, 0x0006 | 0x0009 | 0x000A)
}

/// The token of the partition named by the encoded values `values` (`[bytes]` each, in bind
/// order) at the partition-key indexes `pk_indexes`; `None` when there is no partition key or
/// a component is null or unset.
pub fn partition_token(pk_indexes: &[u16], values: &[u8]) -> Option<autoprep_routing::Token> {
    let token =
        |components: &[Option<&[u8]>]| autoprep_routing::partition_token(components).ok().flatten();
    match pk_indexes {
        [] => None,
        // The common single-column key: no allocation on the request path.
        [i] => token(&[nth_value(values, *i)?]),
        _ => {
            let components = pk_indexes
                .iter()
                .map(|&i| nth_value(values, i))
                .collect::<Option<Vec<_>>>()?;
            token(&components)
        }
    }
}

/// The `i`th of the encoded values `values` (`Some(None)`: null or unset), `None` when there
/// are fewer or they are malformed.
fn nth_value(values: &[u8], i: u16) -> Option<Option<&[u8]>> {
    let mut rest = values;
    for n in 0..=i {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let cell = match usize::try_from(i32::from_be_bytes(*len)) {
            Ok(len) => {
                rest = tail.get(len..)?;
                Some(&tail[..len])
            }
            Err(_) => {
                rest = tail;
                None
            }
        };
        if n == i {
            return Some(cell);
        }
    }
    None
}

impl Decision {
    /// Counts what became of a QUERY of a tracked shape (in its `/shapes` statistics).
    pub fn record(&self, shape: Option<&crate::shapes::ShapeStats>) {
        match (shape, self) {
            (Some(s), Decision::Execute { .. }) => s.rewritten(),
            (Some(s), Decision::PassThrough { reason, .. }) => s.passed_through(reason),
            (None, _) => {}
        }
    }

    /// Forward unchanged for `reason`.
    pub fn pass(reason: &'static str) -> Decision {
        Decision::PassThrough {
            reason,
            prepare: Vec::new(),
            use_keyspace: false,
        }
    }
}

fn pass(reason: &'static str) -> Decision {
    Decision::pass(reason)
}

/// A request frame under construction: header space, then the custom payload if any.
fn start_frame(custom_payload: Option<&[u8]>, capacity: usize) -> BytesMut {
    let mut frame = BytesMut::with_capacity(HEADER_LEN + capacity);
    frame.put_bytes(0, HEADER_LEN);
    if let Some(cp) = custom_payload {
        frame.put_slice(cp);
    }
    frame
}

/// Writes the header of a finished request frame built from the client's `header`. The frame
/// goes uncompressed: the compression flag is per envelope in v3/v4.
fn finish_frame(mut frame: BytesMut, header: &Header, opcode: Opcode) -> BytesMut {
    let h = Header {
        version: header.version,
        direction: Direction::Request,
        flags: Flags(header.flags.0 & !Flags::COMPRESSION),
        stream: StreamId(0),
        opcode,
        length: frame.len() - HEADER_LEN,
    };
    h.write(&mut &mut frame[..HEADER_LEN]);
    frame
}

/// Appends the values of one statement to `out`: literals encoded for the server-reported
/// types, the client's own values copied in order. Against ScyllaDB (`scylla`) only literals
/// established to convert there as on Cassandra are bound (see [`crate::flavor`]). On error
/// `out` may hold a partial write.
fn bind_values(
    rw: &Rewriter,
    scylla: bool,
    slots: &[Slot<'_>],
    types: &[ColumnType],
    client: Option<Values<'_>>,
    out: &mut Vec<u8>,
) -> Result<(), &'static str> {
    let mut client_values = client.map(|v| v.iter());
    for (slot, ty) in slots.iter().zip(types) {
        match slot {
            Slot::Literal(lit) => {
                if scylla {
                    scylla_literals::established(lit, ty)?;
                }
                encode_literal(lit, ty, &rw.encode, out).map_err(|e| e.label())?
            }
            Slot::ClientMarker { .. } => {
                let Some(Ok((_, v))) = client_values.as_mut().and_then(Iterator::next) else {
                    return Err("client value count");
                };
                write_value(out, v).map_err(|_| "value too large")?;
            }
            Slot::ClientNamed { .. } => return Err("named values"),
        }
    }
    Ok(())
}

/// [`lookup`] of `shape` (under `hash`, running in `keyspace`) on `node`, with whether the
/// node is ScyllaDB.
pub(super) fn lookup_shape(
    rw: &Rewriter,
    node: u32,
    shape: &Shape<'_>,
    hash: ShapeHash,
    keyspace: Option<&str>,
    now: Instant,
) -> (Lookup, bool) {
    let key = ShapeKey {
        node,
        hash,
        keyspace,
        text: &shape.text,
    };
    let scylla = rw.flavors.is_scylla(node);
    (lookup(rw, &key, scylla, now), scylla)
}

/// Looks a shape up in the cache. Against ScyllaDB (see [`crate::flavor`]) a shape is admitted
/// at its third sighting at the earliest, and prepared only while the node holds fewer shapes
/// than its budget; one over budget goes through as written for the cache's negative time.
fn lookup(rw: &Rewriter, key: &ShapeKey<'_>, scylla: bool, now: Instant) -> Lookup {
    if !scylla {
        return rw.cache.lookup(key, now);
    }
    match rw.cache.lookup_admitting(key, now, SCYLLA_ADMISSION) {
        Lookup::PrepareNow
            if rw.cache.entries_on(key.node) >= rw.flavors.scylla_budget(key.node, now) =>
        {
            rw.cache
                .failed(key.node, key.hash, "scylla cache budget", now);
            Lookup::Negative("scylla cache budget")
        }
        other => other,
    }
}

/// A v5 keyspace field other than the connection's keyspace: the EXECUTE would run a statement
/// prepared for another keyspace than the connection's, for which Cassandra warns the client
/// once per connection ("`USE <keyspace>` with prepared statements is considered to be an
/// anti-pattern", `ExecuteMessage.execute`), a warning the QUERY never gets. Such a request
/// goes through as written.
fn keyspace_field_fits(field: Option<&str>, conn: Option<&str>) -> Result<(), &'static str> {
    match field {
        Some(k) if Some(k) != conn => Err("keyspace field differs"),
        _ => Ok(()),
    }
}

/// Why a shape cannot use its client's values as they are, if it cannot.
fn client_values_fit(shape: &Shape<'_>, values: Option<Values<'_>>) -> Result<(), &'static str> {
    if values.is_some_and(|v| v.named)
        || shape
            .slots
            .iter()
            .any(|s| matches!(s, Slot::ClientNamed { .. }))
    {
        return Err("named values");
    }
    if shape.client_marker_count() != values.map_or(0, |v| usize::from(v.count)) {
        // The server will answer this with its own error; let it.
        return Err("client value count");
    }
    Ok(())
}

/// Buffers a connection reuses from one request to the next, so that the cache-hit path
/// allocates nothing but the frame it sends.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Encoded bound values.
    pub values: Vec<u8>,
    /// The canonical text of the last shape.
    text: String,
    /// The slots of the last shape, emptied.
    slots: Vec<Slot<'static>>,
}

/// Decides the fate of the QUERY `request` (parsed from its decompressed body), on a
/// connection to the upstream node `node` (its index in the contact points, the cache's node
/// id). `scratch` holds buffers the caller reuses between calls. When the text normalized to a
/// shape, `shape_stats` receives the shape's statistics (its execution counted), for the caller
/// to record the outcome and latency on.
#[allow(clippy::too_many_arguments)]
pub fn decide(
    rw: &Rewriter,
    node: u32,
    header: &Header,
    request: &QueryRequest<'_>,
    conn_keyspace: ConnKeyspace<'_>,
    now: Instant,
    scratch: &mut Scratch,
    shape_stats: &mut Option<ShapeRef>,
) -> Decision {
    let QueryRequest { body: req, query } = request;
    // Empty buffers of earlier shapes (a vector of `'static` slots is one of shorter-lived
    // slots as well).
    let text = std::mem::take(&mut scratch.text);
    let slots = std::mem::take(&mut scratch.slots);
    let shape = match normalize_with(query.query, text, slots) {
        Ok(Normalized::Shape(s)) => s,
        Ok(Normalized::NotCandidate(NotCandidate::Use { .. })) => {
            return Decision::PassThrough {
                reason: "use",
                prepare: Vec::new(),
                use_keyspace: true,
            }
        }
        Ok(Normalized::NotCandidate(nc)) => return pass(nc.reason()),
        Err(_) => return pass("lex error"),
    };
    if !conn_keyspace.settled {
        scratch.text = shape.text;
        scratch.slots = recycle_slots(shape.slots);
        return pass("use in flight");
    }
    let decision = decide_shape(
        rw,
        node,
        header,
        req,
        query,
        &shape,
        conn_keyspace.name,
        now,
        &mut scratch.values,
        shape_stats,
    );
    scratch.text = shape.text;
    scratch.slots = recycle_slots(shape.slots);
    decision
}

/// [`decide`] for a QUERY that normalized to `shape`.
#[allow(clippy::too_many_arguments)]
fn decide_shape(
    rw: &Rewriter,
    node: u32,
    header: &Header,
    req: &RequestBody<'_>,
    query: &QueryView<'_>,
    shape: &Shape<'_>,
    conn_keyspace: Option<&str>,
    now: Instant,
    scratch: &mut Vec<u8>,
    shape_stats: &mut Option<ShapeRef>,
) -> Decision {
    let params = query.params;
    if let Err(reason) = client_values_fit(shape, params.values) {
        return pass(reason);
    }
    if rw.is_excluded(&shape.text) {
        return pass("excluded");
    }
    if let Err(reason) = keyspace_field_fits(params.keyspace, conn_keyspace) {
        return pass(reason);
    }
    let keyspace = params.keyspace.or(conn_keyspace);
    let hash = shape.hash(keyspace);
    *shape_stats = Some(rw.shapes.enter(hash, keyspace, &shape.text));
    let (found, scylla) = lookup_shape(rw, node, shape, hash, keyspace, now);
    let entry = match found {
        Lookup::Ready(e) => e,
        Lookup::PrepareNow => {
            return Decision::PassThrough {
                reason: "preparing",
                prepare: vec![PrepareRequest::of(shape, hash, keyspace)],
                use_keyspace: false,
            }
        }
        Lookup::Wait => return pass("not prepared yet"),
        Lookup::Negative(reason) => return pass(reason),
    };
    if entry.bind_types.len() != shape.slots.len() {
        rw.cache
            .failed(node, hash, "bind variable count differs", now);
        return pass("bind variable count differs");
    }
    if rw.switchback.control_now() {
        // The client's own QUERY, in a control window (see `saving`).
        rw.switchback.count_control();
        return pass(crate::control::REASON);
    }

    scratch.clear();
    let bound = bind_values(
        rw,
        scylla,
        &shape.slots,
        &entry.bind_types,
        params.values,
        scratch,
    );
    if let Err(reason) = bound {
        return pass(reason);
    }
    let Ok(count) = u16::try_from(shape.slots.len()) else {
        return pass("too many values");
    };
    let exec_params = QueryParams {
        values: Some(Values {
            count,
            named: false,
            raw: scratch,
        }),
        // The keyspace is part of the prepared statement; EXECUTE has no use for it.
        keyspace: None,
        flags: 0,
        ..params
    };
    let decision = execute_decision(
        rw,
        header,
        req.custom_payload,
        (hash, &entry),
        entry.result_metadata_id.as_deref(),
        &exec_params,
    )
    .unwrap_or_else(pass);
    if matches!(decision, Decision::Execute { .. }) {
        rw.switchback.count_rewritten();
    }
    decision
}

/// The EXECUTE of the prepared shape `entry` (under `hash`) with `params`, its values already
/// bound, carrying the request's custom payload and, on v5, `result_metadata_id`; with where
/// routing would send it. `Err` when a field is too long for the protocol.
pub(crate) fn execute_decision(
    rw: &Rewriter,
    header: &Header,
    custom_payload: Option<&[u8]>,
    (hash, entry): (ShapeHash, &Arc<PreparedEntry>),
    result_metadata_id: Option<&[u8]>,
    params: &QueryParams<'_>,
) -> Result<Decision, &'static str> {
    let version = header.version;
    let values = params.values.map_or(&[][..], |v| v.raw);
    let mut frame = start_frame(custom_payload, 64 + values.len());
    let built = write_short_bytes(&mut frame, &entry.id).is_ok()
        && (version < ProtocolVersion::V5
            || write_short_bytes(&mut frame, result_metadata_id.unwrap_or(&[])).is_ok())
        && params.write(version, &mut frame).is_ok();
    if !built {
        return Err("value too large");
    }
    let route = if rw.cluster.may_route() {
        partition_token(&entry.pk_indexes, values).map(|token| Route {
            token,
            entry: entry.clone(),
            others: Vec::new(),
            local_only: local_only(
                params.consistency,
                params.serial_consistency,
                entry.conditional,
            ),
        })
    } else {
        None
    };
    Ok(Decision::Execute {
        frame: finish_frame(frame, header, Opcode::EXECUTE),
        used: Used::One {
            hash,
            id: entry.id.clone(),
        },
        route,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoprep_protocol::cql::normalize::normalize;

    fn values(cells: &[Option<&[u8]>]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in cells {
            match c {
                Some(b) => {
                    out.extend((b.len() as i32).to_be_bytes());
                    out.extend(*b);
                }
                None => out.extend((-1i32).to_be_bytes()),
            }
        }
        out
    }

    #[test]
    fn the_serial_consistency_restricts_only_a_conditional_statement() {
        const ONE: u16 = 0x0001;
        const LOCAL_QUORUM: u16 = 0x0006;
        const SERIAL: u16 = 0x0008;
        const LOCAL_SERIAL: u16 = 0x0009;
        // The scylla crate's default: LOCAL_SERIAL with every request.
        assert!(!local_only(ONE, Some(LOCAL_SERIAL), false));
        assert!(local_only(ONE, Some(LOCAL_SERIAL), true));
        assert!(!local_only(ONE, Some(SERIAL), true));
        assert!(!local_only(ONE, None, true));
        assert!(local_only(LOCAL_QUORUM, None, false));
        // A read at LOCAL_SERIAL: its consistency says so.
        assert!(local_only(LOCAL_SERIAL, None, false));
    }

    #[test]
    fn partition_tokens_come_from_the_key_values() {
        let v = values(&[Some(b"v"), Some(&[0, 0, 0, 7]), None, Some(b"x")]);
        let single = autoprep_routing::partition_token(&[Some(&[0, 0, 0, 7][..])]).unwrap();
        assert_eq!(partition_token(&[1], &v), single);
        let composite =
            autoprep_routing::partition_token(&[Some(&b"x"[..]), Some(&[0, 0, 0, 7][..])]).unwrap();
        assert_eq!(partition_token(&[3, 1], &v), composite);
        assert_eq!(partition_token(&[2], &v), None, "a null key component");
        assert_eq!(partition_token(&[4], &v), None, "fewer values");
        assert_eq!(partition_token(&[], &v), None);
    }
    use autoprep_cache::PreparedEntry;

    /// A rewriter toward one node, with the defaults.
    fn test_rewriter() -> Rewriter {
        let cfg = Config::for_upstream("127.0.0.1:9042");
        let cluster = Arc::new(ClusterView::new(false, None));
        Rewriter::new(&cfg, 1, Arc::default(), cluster).unwrap()
    }
    use autoprep_protocol::envelope::{Direction, Flags};
    use autoprep_protocol::message::query::encode_query;

    /// A context whose cache holds `text`'s shape (keyspace `ks`) with `types`, and the
    /// decision for a QUERY of `text`.
    fn decide_with(rw: &Rewriter, text: &str, types: Vec<ColumnType>) -> Decision {
        let Ok(Normalized::Shape(shape)) = normalize(text.as_bytes()) else {
            panic!("not a shape: {text}")
        };
        let ks = Some("ks");
        rw.cache.prepared(
            NODE,
            shape.hash(ks),
            PreparedEntry {
                text: shape.text.clone(),
                conditional: false,
                repeatable: false,
                fingerprint: shape.fingerprint(ks),
                keyspace: ks.map(str::to_owned),
                id: Bytes::from_static(&[7; 16]),
                result_metadata_id: None,
                bind_types: types,
                pk_indexes: vec![0],
                result_metadata: Bytes::new(),
                tables: vec![("ks".into(), "t".into())],
                prepared_message: bytes::Bytes::new(),
            },
        );
        let conn = ConnKeyspace {
            name: ks,
            settled: true,
        };
        decide_query(rw, text, conn)
    }

    /// The decision for a QUERY of `text` on a connection in `conn`.
    fn decide_query(rw: &Rewriter, text: &str, conn: ConnKeyspace<'_>) -> Decision {
        let mut body = Vec::new();
        let params = QueryParams {
            consistency: 1,
            ..Default::default()
        };
        encode_query(ProtocolVersion::V4, text.as_bytes(), &params, &mut body).unwrap();
        let header = Header {
            version: ProtocolVersion::V4,
            direction: Direction::Request,
            flags: Flags(0),
            stream: StreamId(1),
            opcode: Opcode::QUERY,
            length: body.len(),
        };
        let request = QueryRequest::parse(&header, &body).unwrap();
        let mut scratch = Scratch::default();
        let now = Instant::now();
        decide(
            rw,
            NODE,
            &header,
            &request,
            conn,
            now,
            &mut scratch,
            &mut None,
        )
    }

    fn reason(d: &Decision) -> Option<&'static str> {
        match d {
            Decision::PassThrough { reason, .. } => Some(reason),
            Decision::Execute { .. } => None,
        }
    }

    #[test]
    fn against_scylla_only_established_literals_are_bound() {
        let rw = test_rewriter();
        let blob = "INSERT INTO t (k, b) VALUES (1, 0x00ff)";
        let types = || vec![ColumnType::Int, ColumnType::Blob];
        // Cassandra (or not known yet): bound.
        assert_eq!(reason(&decide_with(&rw, blob, types())), None);
        rw.flavors.learn(NODE, true);
        assert_eq!(
            reason(&decide_with(&rw, blob, types())),
            Some("scylla: blob literal")
        );
        let ts = "INSERT INTO t (k, at) VALUES (1, '2024-01-02 03:04:05.1234+0000')";
        let types = || vec![ColumnType::Int, ColumnType::Timestamp];
        assert_eq!(
            reason(&decide_with(&rw, ts, types())),
            Some("scylla: timestamp form")
        );
        let ts = "INSERT INTO t (k, at) VALUES (1, '2024-01-02 03:04:05.123+0000')";
        assert_eq!(reason(&decide_with(&rw, ts, types())), None);
    }

    #[test]
    fn nothing_is_rewritten_while_a_use_is_in_flight() {
        let rw = test_rewriter();
        let text = "SELECT * FROM t WHERE k = 1";
        assert_eq!(reason(&decide_with(&rw, text, vec![ColumnType::Int])), None);
        let unsettled = ConnKeyspace {
            name: Some("ks"),
            settled: false,
        };
        let d = decide_query(&rw, text, unsettled);
        assert_eq!(reason(&d), Some("use in flight"));
    }

    #[test]
    fn outcome_of_a_decision() {
        let shapes = crate::shapes::Shapes::new(2);
        let s = shapes.enter(
            autoprep_cache::ShapeHash(1),
            None,
            "SELECT * FROM t WHERE k = ?",
        );
        let pass = Decision::pass("excluded");
        pass.record(Some(&s));
        pass.record(None);
        let exec = Decision::Execute {
            frame: bytes::BytesMut::new(),
            used: Used::One {
                hash: autoprep_cache::ShapeHash(1),
                id: bytes::Bytes::new(),
            },
            route: None,
        };
        exec.record(Some(&s));
        let snap = s.snapshot();
        assert_eq!(
            (snap.rewritten, snap.passthrough.get("excluded")),
            (1, Some(&1))
        );
    }
}
