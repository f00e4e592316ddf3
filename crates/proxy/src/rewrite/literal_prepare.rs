//! The other legacy pattern: statements *prepared* with their literals inline.
//!
//! gocql prepares every SELECT, INSERT, UPDATE, DELETE and BATCH it is given, and many
//! applications call `prepare()` on each statement they format: every distinct statement then
//! costs the server a parse and a prepared-cache entry, and is executed once. Here such a
//! PREPARE is answered from the statement's shape (prepared once per node, as for QUERY):
//!
//! - the answer is the one the server would give for the literal text: its id derived as
//!   Cassandra derives it (`QueryProcessor.computeId`: MD5 of the text, preceded by the
//!   keyspace unless every table is qualified), bind metadata for the client's own markers
//!   only, and the shape's result metadata and v5 result metadata id;
//! - an EXECUTE of that id (alone or in a BATCH) becomes an EXECUTE of the shape, with the
//!   literals (encoded once, at PREPARE, by the QUERY path's encoder and rules) merged in order
//!   with the client's values;
//! - the statements live in a bounded, process-wide map keyed by that id. An EXECUTE of an id
//!   the map no longer holds goes to the server unchanged, which never saw the id and answers
//!   UNPREPARED with it, exactly as after an eviction: the driver prepares it again.
//!
//! Anything uncertain passes through as today: a literal the encoder cannot convert exactly
//! (the server then answers the PREPARE itself, with its own error if it has one), named
//! markers, tracing or a custom payload, ScyllaDB, a shape not prepared yet.

pub use super::literal_statements::{LiteralStatements, Statement};
use super::{ConnKeyspace, Decision, PrepareRequest, Rewriter};
use autoprep_cache::{Lookup, PreparedEntry, ShapeHash, ShapeKey};
use autoprep_protocol::cql::normalize::{fingerprint, normalize, Normalized, Slot};
use autoprep_protocol::cql::source_table::statement_tables;
use autoprep_protocol::envelope::{Flags, Header, Opcode, ProtocolVersion};
use autoprep_protocol::message::execute::ExecuteView;
use autoprep_protocol::message::prepare::PrepareView;
use autoprep_protocol::message::query::{QueryParams, Values};
use autoprep_protocol::message::result::{write_prepared, ColumnSpec, ResultView};
use autoprep_protocol::message::RequestBody;
use autoprep_protocol::types::encode_literal;
use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use std::time::Instant;

/// The start of Cassandra's warning about `USE` with prepared statements
/// (`ClientState.warnAboutUseWithPreparedStatements`, 5.0).
pub const USE_WARNING_PREFIX: &str = "`USE <keyspace>` with prepared statements";

/// A client's PREPARE waiting for the proxy's PREPARE of its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPrepare {
    /// The client's stream id.
    pub stream: i16,
    pub header: Header,
    /// The uncompressed body, to decide again.
    pub body: Bytes,
    /// The envelope as the client sent it, to send on when it is not answered here.
    pub original: Bytes,
}

/// What to do with a client's PREPARE.
#[derive(Debug)]
pub enum PrepareDecision {
    /// Answer the client with this RESULT message (kind onward) and, when set, Cassandra's
    /// warning about `USE` with prepared statements.
    Answer {
        message: Vec<u8>,
        warning: Option<String>,
    },
    /// Prepare the shape first (instead of the client's PREPARE), then decide again.
    PrepareShape(PrepareRequest),
    /// Forward the PREPARE unchanged, for this reason.
    Pass(&'static str),
}

/// What [`decide_prepare`] needs to know of the client connection.
#[derive(Debug, Clone, Copy)]
pub struct Conn<'a> {
    /// The cache's node id of the connection's upstream node.
    pub node: u32,
    pub keyspace: ConnKeyspace<'a>,
    /// The client has not been given Cassandra's once-per-connection warning about `USE`
    /// with prepared statements yet.
    pub use_warning_due: bool,
    /// The shape may be prepared now if it is not (false on the second decision, after the
    /// shape's own PREPARE was answered: the PREPARE then goes through).
    pub may_prepare: bool,
}

/// Decides the fate of a client's PREPARE (`body`: its uncompressed body).
pub fn decide_prepare(
    rw: &Rewriter,
    header: &Header,
    body: &[u8],
    conn: Conn<'_>,
    now: Instant,
) -> PrepareDecision {
    use PrepareDecision::Pass;
    let p = match literal_text(rw, header, body, conn) {
        Ok(p) => p,
        Err(reason) => return Pass(reason),
    };
    let (shape, keyspace) = (&p.shape, p.keyspace);
    let hash = shape.hash(keyspace);
    let stats = rw.shapes.get_or_add(hash, keyspace, &shape.text);
    let pass = |reason: &'static str| {
        stats.literal_prepare(Err(reason));
        Pass(reason)
    };
    let key = ShapeKey {
        node: conn.node,
        hash,
        keyspace,
        text: &shape.text,
    };
    let entry = match rw.cache.lookup(&key, now) {
        Lookup::Ready(e) => e,
        Lookup::PrepareNow if conn.may_prepare => {
            return PrepareDecision::PrepareShape(PrepareRequest::of(shape, hash, keyspace))
        }
        Lookup::PrepareNow => {
            rw.cache.abandoned(conn.node, hash);
            return pass("not prepared yet");
        }
        Lookup::Wait => return pass("not prepared yet"),
        Lookup::Negative(reason) => return pass(reason),
    };
    if entry.bind_types.len() != shape.slots.len() {
        return pass("bind variable count differs");
    }
    let Ok(ResultView::Prepared(answer)) =
        ResultView::parse(&entry.prepared_message, header.version)
    else {
        return pass("no prepared answer");
    };
    let all: Vec<ColumnSpec<'_>> = answer.bind.columns.iter().collect();
    if all.len() != shape.slots.len() {
        return pass("bind variable count differs");
    }
    let bound = match bind_literals(rw, shape, &entry, &all) {
        Ok(b) => b,
        Err(reason) => return pass(reason),
    };
    let Ok(client_values) = u16::try_from(bound.client_specs.len()) else {
        return pass("too many values");
    };
    let pk = partition_key_indexes(&all, &entry.pk_indexes, &bound.client_specs);
    let mut message = Vec::with_capacity(entry.prepared_message.len());
    let written = write_prepared(
        &mut message,
        header.version,
        &p.id,
        answer.result_metadata_id,
        &bound.client_specs,
        pk.as_deref(),
        answer.result_raw,
    );
    if written.is_err() {
        return pass("value too large");
    }
    // Cassandra warns once per connection (per PREPARE when the v5 PREPARE names its keyspace:
    // the server clones the connection's state for it) when it prepares an unqualified
    // statement it had not cached; a statement the proxy answered before counts as cached.
    let warn =
        !p.qualified && (p.names_keyspace || conn.use_warning_due) && !rw.literals.contains(&p.id);
    let warning = warn.then(|| use_warning(keyspace.unwrap_or_default(), &p.id));
    let statement = Statement {
        hash,
        entry: entry.clone(),
        slots: bound.slots.into(),
        values: bound.values.into(),
        client_values,
        shape: stats.clone(),
        text: p.text.into(),
        keyspace: keyspace.map(Into::into),
        qualified: p.qualified,
    };
    if !rw.literals.insert(p.id, statement) {
        return pass("map too small");
    }
    stats.literal_prepare(Ok(()));
    PrepareDecision::Answer { message, warning }
}

/// A client's PREPARE of a statement with literals inline that the proxy may answer from its
/// shape: what [`literal_text`] read of it.
struct LiteralText<'a> {
    shape: autoprep_protocol::cql::normalize::Shape<'a>,
    text: &'a str,
    /// The keyspace the server resolves unqualified tables in: the PREPARE's own (v5), else
    /// the connection's.
    keyspace: Option<&'a str>,
    /// The v5 PREPARE names its keyspace.
    names_keyspace: bool,
    /// Every table is named with its keyspace.
    qualified: bool,
    /// The id the server would give the statement.
    id: [u8; 16],
}

/// Reads a client's PREPARE: its text's shape and where it runs, or why the PREPARE goes to
/// the server as it is.
fn literal_text<'a>(
    rw: &Rewriter,
    header: &Header,
    body: &'a [u8],
    conn: Conn<'a>,
) -> Result<LiteralText<'a>, &'static str> {
    if header.flags.has(Flags::TRACING) {
        // The trace of a PREPARE is the server's to write.
        return Err("tracing");
    }
    let req = RequestBody::parse(header, body).map_err(|_| "malformed prepare")?;
    if req.custom_payload.is_some() {
        return Err("custom payload");
    }
    let prepare =
        PrepareView::parse(req.message, header.version).map_err(|_| "malformed prepare")?;
    let text = std::str::from_utf8(prepare.query).map_err(|_| "not utf-8")?;
    let shape = match normalize(prepare.query) {
        Ok(Normalized::Shape(s)) => s,
        Ok(Normalized::NotCandidate(nc)) => return Err(nc.reason()),
        Err(_) => return Err("lex error"),
    };
    if shape.literal_count() == 0 {
        return Err(NO_LITERAL);
    }
    if shape
        .slots
        .iter()
        .any(|s| matches!(s, Slot::ClientNamed { .. }))
    {
        return Err("named markers");
    }
    if prepare.keyspace.is_none() && !conn.keyspace.settled {
        return Err("use in flight");
    }
    if rw.is_excluded(&shape.text) {
        return Err("excluded");
    }
    if rw.flavors.is_scylla(conn.node) {
        // ScyllaDB derives its ids and answers its own way: not established here.
        return Err("scylla");
    }
    let keyspace = prepare.keyspace.or(conn.keyspace.name);
    let tables = statement_tables(&shape.text).ok_or("tables unknown")?;
    let qualified = !tables.is_empty() && tables.iter().all(|t| t.keyspace.is_some());
    if !qualified && keyspace.is_none() {
        return Err("no keyspace");
    }
    let id = fingerprint(if qualified { None } else { keyspace }, text);
    Ok(LiteralText {
        shape,
        text,
        keyspace,
        names_keyspace: prepare.keyspace.is_some(),
        qualified,
        id,
    })
}

/// A shape's literals encoded once with the prepared statement's types, and the client's own
/// markers: their places among the shape's bind variables, and their specs.
struct Bound<'s> {
    values: Vec<u8>,
    slots: Vec<Option<(u32, u32)>>,
    client_specs: Vec<ColumnSpec<'s>>,
}

/// Encodes `shape`'s literals with `entry`'s bind types (`all`: its bind variables' specs).
fn bind_literals<'s>(
    rw: &Rewriter,
    shape: &autoprep_protocol::cql::normalize::Shape<'_>,
    entry: &PreparedEntry,
    all: &[ColumnSpec<'s>],
) -> Result<Bound<'s>, &'static str> {
    let mut b = Bound {
        values: Vec::new(),
        slots: Vec::with_capacity(shape.slots.len()),
        client_specs: Vec::new(),
    };
    for ((slot, ty), spec) in shape.slots.iter().zip(&entry.bind_types).zip(all) {
        match slot {
            Slot::Literal(lit) => {
                let start = b.values.len() as u32;
                encode_literal(lit, ty, &rw.encode, &mut b.values).map_err(|e| e.label())?;
                b.slots.push(Some((start, b.values.len() as u32)));
            }
            Slot::ClientMarker { .. } => {
                b.slots.push(None);
                b.client_specs.push(*spec);
            }
            Slot::ClientNamed { .. } => return Err("named markers"),
        }
    }
    Ok(b)
}

/// Cassandra's warning about `USE` with prepared statements, as it words it for statement `id`
/// prepared in `keyspace`.
fn use_warning(keyspace: &str, id: &[u8]) -> String {
    let ks = keyspace;
    format!(
        "{USE_WARNING_PREFIX} is considered to be an anti-pattern due to ambiguity in non-qualified table names. \
         Please consider removing instances of `Session#setKeyspace(<keyspace>)`, `Session#execute(\"USE <keyspace>\")` and `cluster.newSession(<keyspace>)` from your code, and \
         always use fully qualified table names (e.g. <keyspace>.<table>). \
         Keyspace used: {ks}, statement keyspace: {ks}, statement id: {}",
        crate::shapes::hex(id)
    )
}

/// The reason a PREPARE without literals passes (the ordinary prepared pattern: not counted).
pub const NO_LITERAL: &str = "no literals";

/// The partition-key indexes the server reports for the literal text: for each partition-key
/// column, the last of the client's markers that targets it
/// (`VariableSpecifications.getPartitionKeyBindVariableIndexes`), or `None` when one has no
/// marker of the client's. The shape's own indexes (`shape_pk`, into `all`) name the
/// partition-key columns in order; a marker targets a column when its spec is that column's
/// (same keyspace, table and name: the specs of other markers, such as `in(k)` or
/// `partition key token`, have other names).
fn partition_key_indexes(
    all: &[ColumnSpec<'_>],
    shape_pk: &[u16],
    client: &[ColumnSpec<'_>],
) -> Option<Vec<u16>> {
    if shape_pk.is_empty() {
        return None;
    }
    shape_pk
        .iter()
        .map(|&i| {
            let column = all.get(usize::from(i))?;
            let same = |c: &ColumnSpec<'_>| {
                c.name == column.name && c.keyspace == column.keyspace && c.table == column.table
            };
            client
                .iter()
                .rposition(same)
                .and_then(|p| u16::try_from(p).ok())
        })
        .collect()
}

/// The shape's entry on `node` for a statement of the map, when the cache still has one whose
/// bind types are those the literals were encoded for.
fn resolve(rw: &Rewriter, node: u32, s: &Statement) -> Result<Arc<PreparedEntry>, &'static str> {
    let entry = rw
        .cache
        .ready(node, s.hash)
        .ok_or("shape not prepared on the node")?;
    let same = Arc::ptr_eq(&entry, &s.entry)
        || (entry.fingerprint == s.entry.fingerprint && entry.bind_types == s.entry.bind_types);
    if same {
        Ok(entry)
    } else {
        Err("shape changed")
    }
}

/// The EXECUTE of the shape standing for a client's EXECUTE (`body`: uncompressed) of a
/// statement it prepared with literals inline; `None` when the id is not one the proxy gave
/// out (the EXECUTE is the client's own business). A `PassThrough` decision sends the
/// client's EXECUTE as it is: the server, which never saw the id, answers UNPREPARED, and the
/// driver prepares it again.
pub fn decide_execute(
    rw: &Rewriter,
    node: u32,
    header: &Header,
    body: &[u8],
    scratch: &mut Vec<u8>,
) -> Option<Executed> {
    let req = RequestBody::parse(header, body).ok()?;
    let exec = ExecuteView::parse(req.message, header.version).ok()?;
    let statement = rw.literals.get(exec.id)?;
    let decision = (|| {
        let entry = resolve(rw, node, &statement)?;
        scratch.clear();
        let count = statement.bind(exec.params.values, scratch)?;
        let params = QueryParams {
            values: Some(Values {
                count,
                named: false,
                raw: scratch,
            }),
            ..exec.params
        };
        super::execute_decision(
            rw,
            header,
            req.custom_payload,
            (statement.hash, &entry),
            exec.result_metadata_id,
            &params,
        )
    })();
    let decision = match decision {
        Ok(d) => {
            statement.shape.literal_executed();
            d
        }
        Err(reason) => Decision::pass(reason),
    };
    Some(Executed {
        decision,
        statement,
    })
}

/// What became of a client's EXECUTE of a statement it prepared with literals inline.
#[derive(Debug)]
pub struct Executed {
    /// The EXECUTE of the shape, or why it goes as it was (after the server learns the id).
    pub decision: Decision,
    pub statement: Arc<Statement>,
}

/// The statements of the map an EXECUTE or a BATCH (`body`: uncompressed) references.
pub fn statements_in(rw: &Rewriter, header: &Header, body: &[u8]) -> Vec<Arc<Statement>> {
    use autoprep_protocol::message::batch::{BatchQuery, BatchView};
    let mut out: Vec<Arc<Statement>> = Vec::new();
    if !rw.literals.holds_any() {
        return out;
    }
    let Ok(req) = RequestBody::parse(header, body) else {
        return out;
    };
    let mut add = |id: &[u8]| {
        if let Some(s) = rw.literals.get(id) {
            if !out.iter().any(|o| Arc::ptr_eq(o, &s)) {
                out.push(s);
            }
        }
    };
    if header.opcode == Opcode::EXECUTE {
        if let Ok(e) = ExecuteView::parse(req.message, header.version) {
            add(e.id);
        }
    } else if header.opcode == Opcode::BATCH {
        if let Ok(b) = BatchView::parse(req.message, header.version) {
            for child in b.children().map_while(Result::ok) {
                if let BatchQuery::Prepared(id) = child.query {
                    add(id);
                }
            }
        }
    }
    out
}

/// For a BATCH child that references the id `id`: when it is a statement of the map, the
/// shape's id, with the values appended to `out` (literals and the child's `values`) and
/// their count; `None` when the id is not the proxy's.
pub fn batch_child(
    rw: &Rewriter,
    node: u32,
    id: &[u8],
    values: Values<'_>,
    out: &mut Vec<u8>,
) -> Option<Result<(ShapeHash, Bytes, u16), &'static str>> {
    let statement = rw.literals.get(id)?;
    Some((|| {
        let entry = resolve(rw, node, &statement)?;
        let n = statement.bind(Some(values), out)?;
        statement.shape.literal_executed();
        Ok((statement.hash, entry.id.clone(), n))
    })())
}

/// The RESULT envelope answering a client's PREPARE on stream `stream`, with `warning` in
/// the body's warnings when set. Uncompressed: in v3/v4 compression is per envelope.
pub fn answer_frame(
    version: ProtocolVersion,
    stream: i16,
    message: &[u8],
    warning: Option<&str>,
) -> BytesMut {
    use autoprep_protocol::envelope::{Direction, Envelope, StreamId};
    let mut body = Vec::with_capacity(message.len() + warning.map_or(0, |w| w.len() + 4));
    let mut flags = 0;
    if let Some(w) = warning {
        flags |= Flags::WARNING;
        body.extend_from_slice(&1u16.to_be_bytes());
        let _ = autoprep_protocol::primitives::write_string(&mut body, w);
    }
    body.extend_from_slice(message);
    let header = Header {
        version,
        direction: Direction::Response,
        flags: Flags(flags),
        stream: StreamId(stream),
        opcode: Opcode::RESULT,
        length: 0,
    };
    Envelope::new(header, &body).into_frame()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(table: &'a str, name: &'a str) -> ColumnSpec<'a> {
        ColumnSpec {
            keyspace: "ks",
            table,
            name,
            type_raw: &[0, 9],
        }
    }

    #[test]
    fn partition_key_indexes_follow_the_clients_markers() {
        // Shape: INSERT INTO t (a, b, v) VALUES (?, ?, ?), key (a, b); shape pk = [0, 1].
        let all = [spec("t", "a"), spec("t", "b"), spec("t", "v")];
        // Literal text (1, ?, ?): the client's markers are b and v: a has none.
        assert_eq!(
            partition_key_indexes(&all, &[0, 1], &[all[1], all[2]]),
            None
        );
        // (?, ?, 3): both key columns are the client's.
        assert_eq!(
            partition_key_indexes(&all, &[0, 1], &[all[0], all[1]]),
            Some(vec![0, 1])
        );
        // k IN (?, 1, ?): the last of the client's markers on k.
        let all = [spec("t", "k"), spec("t", "k"), spec("t", "k")];
        assert_eq!(
            partition_key_indexes(&all, &[2], &[all[0], all[2]]),
            Some(vec![1])
        );
        // `in(k)` is not the column.
        let all = [spec("t", "in(k)")];
        assert_eq!(partition_key_indexes(&all, &[], &all), None);
    }

    /// A prepared entry of no statement in particular.
    fn entry() -> Arc<PreparedEntry> {
        Arc::new(PreparedEntry {
            text: String::new(),
            conditional: false,
            repeatable: false,
            fingerprint: [0; 16],
            keyspace: None,
            id: Bytes::from_static(&[1; 16]),
            result_metadata_id: None,
            bind_types: Vec::new(),
            pk_indexes: Vec::new(),
            result_metadata: Bytes::new(),
            tables: Vec::new(),
            prepared_message: Bytes::new(),
        })
    }

    #[test]
    fn the_map_stays_within_its_bytes() {
        let entry = entry();
        let shapes = crate::shapes::Shapes::new(4);
        let statement = || Statement {
            hash: ShapeHash(1),
            entry: entry.clone(),
            slots: vec![Some((0, 8))].into(),
            values: vec![0; 8].into(),
            client_values: 0,
            shape: shapes.get_or_add(ShapeHash(1), None, "SELECT * FROM t WHERE k = ?"),
            text: "SELECT * FROM t WHERE k = 1".into(),
            keyspace: Some("ks".into()),
            qualified: false,
        };
        let one = statement().weight();
        let map = LiteralStatements::new(one * 3);
        for i in 0..5u8 {
            assert!(map.insert([i; 16], statement()));
        }
        let s = map.stats();
        assert_eq!((s.entries, s.evicted), (3, 2));
        assert!(s.bytes <= one * 3);
        assert!(
            map.get(&[0; 16]).is_none(),
            "the least recently used went first"
        );
        assert!(map.get(&[4; 16]).is_some());
        assert!(!LiteralStatements::new(one - 1).insert([9; 16], statement()));
    }

    #[test]
    fn bind_merges_literals_and_the_clients_values() {
        let entry = entry();
        let shapes = crate::shapes::Shapes::new(4);
        let s = Statement {
            hash: ShapeHash(1),
            entry,
            slots: vec![Some((0, 5)), None, Some((5, 9))].into(),
            values: vec![0, 0, 0, 1, 7, 0xff, 0xff, 0xff, 0xff].into(),
            client_values: 1,
            shape: shapes.get_or_add(ShapeHash(1), None, "x"),
            text: "x".into(),
            keyspace: None,
            qualified: true,
        };
        let client = [0, 0, 0, 2, 8, 9];
        let mut out = Vec::new();
        let n = s
            .bind(
                Some(Values {
                    count: 1,
                    named: false,
                    raw: &client,
                }),
                &mut out,
            )
            .unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            out,
            [0, 0, 0, 1, 7, 0, 0, 0, 2, 8, 9, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(s.bind(None, &mut Vec::new()), Err("client value count"));
    }
}
