//! The rewrite: a client's QUERY with literals becomes an EXECUTE of its shape, and a client's
//! PREPARE of a statement with literals inline is answered from its shape (a PREPARED built
//! by the proxy), whose EXECUTEs then become EXECUTEs of the shape; a BATCH of such
//! statements (text children, and the id the PREPARE was answered with) becomes a BATCH of
//! prepared children.
//!
//! The fuzzer gives the statement text, the types the server reported for the shape's
//! markers, the shape's partition-key indexes and result columns, the client's values, the
//! protocol version and the connection's keyspace. The shape is put in a fresh cache as if the
//! server had prepared it, then the QUERY and the PREPARE (and the EXECUTE of the id answered)
//! are decided. Input: the statement, a NUL byte, then the fuzzer's choices. Checked:
//! - nothing panics;
//! - an EXECUTE built from a QUERY or from a client EXECUTE is a well-formed envelope for the
//!   shape's id with one value per marker: each literal a valid value of its marker's type
//!   (`autoprep_fuzz::value`), each client value byte for byte the client's;
//! - a BATCH built is one of prepared children, each with the shape's id and values as above;
//! - a PREPARED answer parses, has the fingerprint id, one bind column per client marker (with
//!   the shape's specs), and the shape's result metadata; its envelope decodes.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use autoprep::config::Config;
use autoprep::rewrite::batch::decide_batch;
use autoprep::rewrite::literal_prepare::{
    answer_frame, decide_execute, decide_prepare, Conn, PrepareDecision,
};
use autoprep::rewrite::{decide, ConnKeyspace, Decision, Rewriter, Scratch, NODE};
use autoprep_cache::PreparedEntry;
use autoprep_fuzz::types::{arbitrary_type, write_option};
use autoprep_fuzz::value;
use autoprep_fuzz::wire::{self, Column, Layout};
use autoprep_protocol::cql::normalize::{normalize, Normalized, Shape, Slot};
use autoprep_protocol::cql::source_table::statement_tables;
use autoprep_protocol::envelope::{Direction, Header, Opcode, ProtocolVersion, HEADER_LEN};
use autoprep_protocol::message::batch::{
    encode_batch, BatchChild, BatchParams, BatchQuery, BatchView,
};
use autoprep_protocol::message::execute::{encode_execute, ExecuteView};
use autoprep_protocol::message::prepare::encode_prepare;
use autoprep_protocol::message::query::{encode_query, QueryParams, QueryRequest, Values};
use autoprep_protocol::message::result::{write_prepared, ColumnSpec, ResultView};
use autoprep_protocol::message::{RequestBody, ResponseBody};
use autoprep_protocol::primitives::Value;
use autoprep_protocol::types::ColumnType;
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug)]
struct Ty(ColumnType);

impl<'a> Arbitrary<'a> for Ty {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        arbitrary_type(u, 2).map(Ty)
    }
}

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    version: u8,
    /// 0: none, 1: `ks`, 2: `Ks` (quoted in the text), 3: `other`.
    keyspace: u8,
    /// The v5 PREPARE names a keyspace of its own.
    prepare_keyspace: bool,
    scylla: bool,
    use_warning_due: bool,
    /// Bits of the request envelope's flags (tracing, custom payload).
    flags: u8,
    consistency: u16,
    serial: Option<u16>,
    page_size: Option<i32>,
    /// The types of the shape's markers, cycled.
    types: Vec<Ty>,
    /// Which of four column names each marker's spec has (markers may share a column).
    names: Vec<u8>,
    pk: Vec<u8>,
    result_columns: Vec<Ty>,
    result_metadata_id: &'a [u8],
    values: Vec<Option<&'a [u8]>>,
}

const KEYSPACES: [Option<&str>; 4] = [None, Some("ks"), Some("Ks"), Some("other")];

fuzz_target!(|data: &[u8]| {
    // The statement first, so that seeds and the CQL dictionary apply to it as text.
    let (text, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(rest)) else {
        return;
    };
    let input = &input;
    let version = wire::version(input.version);
    let keyspace = KEYSPACES[usize::from(input.keyspace % 4)];
    let cfg = Config::for_upstream("127.0.0.1:9042");
    let cluster = Arc::new(autoprep::cluster::ClusterView::new(false, None));
    let rw = Rewriter::new(&cfg, 1, Arc::default(), cluster).expect("a rewriter");
    rw.cache.set_admission_threshold(1);
    if input.scylla {
        rw.flavors.learn(NODE, true);
    }

    let Ok(Normalized::Shape(shape)) = normalize(text.as_bytes()) else {
        // Not a shape: both decisions pass it through.
        query(&rw, input, text, version, keyspace, None);
        prepare(&rw, input, text, version, keyspace, None);
        return;
    };
    let types: Vec<ColumnType> = (0..shape.slots.len())
        .map(|i| match input.types.get(i % input.types.len().max(1)) {
            Some(t) => t.0.clone(),
            None => ColumnType::Int,
        })
        .collect();
    let table = statement_tables(&shape.text)
        .and_then(|t| t.first().map(|t| t.table.to_string()))
        .unwrap_or_else(|| "t".into());
    let names: Vec<String> = (0..shape.slots.len())
        .map(|i| format!("c{}", input.names.get(i).map_or(i as u8, |n| n % 4)))
        .collect();
    let mut options = Vec::new();
    for t in &types {
        let mut o = Vec::new();
        write_option(t, &mut o);
        options.push(o);
    }
    let binds: Vec<ColumnSpec<'_>> = names
        .iter()
        .zip(&options)
        .map(|(name, o)| ColumnSpec {
            keyspace: "ks",
            table: &table,
            name,
            type_raw: o,
        })
        .collect();
    let pk: Vec<u16> = input
        .pk
        .iter()
        .map(|&i| u16::from(i) % (shape.slots.len().max(1) as u16 + 1))
        .collect();
    let result: Vec<Column> = input
        .result_columns
        .iter()
        .enumerate()
        .map(|(i, t)| Column {
            keyspace: "ks".into(),
            table: table.clone(),
            name: format!("r{i}"),
            ty: t.0.clone(),
        })
        .collect();
    let mut result_raw = Vec::new();
    wire::rows_metadata(&Layout::default(), &result, &mut result_raw);
    let rmid = (version >= ProtocolVersion::V5).then_some(input.result_metadata_id);
    let mut prepared_message = Vec::new();
    if write_prepared(
        &mut prepared_message,
        version,
        &[7; 16],
        rmid,
        &binds,
        Some(&pk),
        &result_raw,
    )
    .is_err()
    {
        return;
    }
    let entry = PreparedEntry {
        text: shape.text.clone(),
        conditional: false,
        repeatable: false,
        fingerprint: shape.fingerprint(keyspace),
        keyspace: keyspace.map(str::to_owned),
        id: Bytes::from_static(&[7; 16]),
        result_metadata_id: rmid.map(Bytes::copy_from_slice),
        bind_types: types.clone(),
        pk_indexes: pk.clone(),
        result_metadata: Bytes::copy_from_slice(&result_raw[8..]),
        tables: vec![("ks".into(), table.clone())],
        prepared_message: prepared_message.into(),
    };
    rw.cache.prepared(NODE, shape.hash(keyspace), entry.clone());
    let shaped = Shaped {
        shape: &shape,
        types: &types,
        entry: &entry,
        binds: &binds,
        result_raw: &result_raw,
    };
    query(&rw, input, text, version, keyspace, Some(&shaped));
    let answered = prepare(&rw, input, text, version, keyspace, Some(&shaped));
    batch(
        &rw,
        input,
        text,
        version,
        keyspace,
        &shaped,
        answered.as_deref(),
    );
});

/// What the shape was prepared as.
struct Shaped<'s> {
    shape: &'s Shape<'s>,
    types: &'s [ColumnType],
    entry: &'s PreparedEntry,
    binds: &'s [ColumnSpec<'s>],
    result_raw: &'s [u8],
}

/// The client's values as a `Values` (count and raw bytes).
fn client_values(values: &[Option<&[u8]>]) -> (u16, Vec<u8>) {
    let n = values.len().min(64);
    let mut raw = Vec::new();
    for v in &values[..n] {
        wire::bytes(*v, &mut raw);
    }
    (n as u16, raw)
}

fn params<'a>(
    input: &Input<'_>,
    count: u16,
    raw: &'a [u8],
    keyspace: Option<&'a str>,
) -> QueryParams<'a> {
    QueryParams {
        consistency: input.consistency,
        values: Some(Values {
            count,
            named: false,
            raw,
        }),
        page_size: input.page_size,
        serial_consistency: input.serial,
        keyspace,
        ..Default::default()
    }
}

fn query(
    rw: &Rewriter,
    input: &Input<'_>,
    text: &str,
    version: ProtocolVersion,
    keyspace: Option<&str>,
    shaped: Option<&Shaped<'_>>,
) {
    let (count, raw) = client_values(&input.values);
    let mut body = Vec::new();
    let p = params(input, count, &raw, None);
    if encode_query(version, text.as_bytes(), &p, &mut body).is_err() {
        return;
    }
    // Tracing (0x02) only: a custom payload would have to be in the body.
    let header = wire::request_header(version, input.flags & 0x02, Opcode::QUERY, body.len());
    let request = QueryRequest::parse(&header, &body).expect("a QUERY encoded parses");
    let conn = ConnKeyspace {
        name: keyspace,
        settled: true,
    };
    let mut scratch = Scratch::default();
    let d = decide(
        rw,
        NODE,
        &header,
        &request,
        conn,
        Instant::now(),
        &mut scratch,
        &mut None,
    );
    if let (Decision::Execute { frame, .. }, Some(s)) = (d, shaped) {
        executed(&frame, version, s, &input.values[..usize::from(count)]);
    }
}

/// `frame` is the EXECUTE of the shape with a value per marker.
fn executed(frame: &[u8], version: ProtocolVersion, s: &Shaped<'_>, client: &[Option<&[u8]>]) {
    let header = parse_header(frame, Direction::Request);
    assert_eq!(header.opcode, Opcode::EXECUTE);
    assert_eq!(header.version, version);
    let body =
        RequestBody::parse(&header, &frame[HEADER_LEN..]).expect("the EXECUTE's body parses");
    let exec = ExecuteView::parse(body.message, version).expect("the EXECUTE parses");
    assert_eq!(exec.id, &s.entry.id[..]);
    let values = exec.params.values.expect("the EXECUTE carries values");
    values_of_shape(values, s, client);
}

/// The header of a whole envelope `frame` the proxy built.
fn parse_header(frame: &[u8], direction: Direction) -> Header {
    let h = Header::parse(
        frame[..HEADER_LEN].try_into().expect("a header"),
        direction,
        usize::MAX >> 1,
    )
    .expect("the header of an envelope built parses");
    assert_eq!(h.length, frame.len() - HEADER_LEN);
    h
}

/// `values` are one per marker of the shape: each literal a valid value of its marker's type,
/// each client value byte for byte the client's.
fn values_of_shape(values: Values<'_>, s: &Shaped<'_>, client: &[Option<&[u8]>]) {
    assert_eq!(usize::from(values.count), s.shape.slots.len());
    let mut client = client.iter();
    for ((slot, ty), v) in s.shape.slots.iter().zip(s.types).zip(values.iter()) {
        let (_, v) = v.expect("a value of the EXECUTE");
        match slot {
            Slot::Literal(_) => {
                if let Value::Bytes(b) = v {
                    if let Err(why) = value::check(ty, b) {
                        panic!("a literal bound as {ty:?} is not one: {why}: {b:02x?}");
                    }
                }
            }
            _ => {
                let want = client.next().expect("a client value for each marker");
                let got = match v {
                    Value::Bytes(b) => Some(b),
                    _ => None,
                };
                assert_eq!(got, *want, "the client's value as sent");
            }
        }
    }
}

/// Decides the client's PREPARE of `text`; returns the id answered, if it was.
fn prepare(
    rw: &Rewriter,
    input: &Input<'_>,
    text: &str,
    version: ProtocolVersion,
    keyspace: Option<&str>,
    shaped: Option<&Shaped<'_>>,
) -> Option<Vec<u8>> {
    let own = (input.prepare_keyspace && version >= ProtocolVersion::V5).then_some("ks");
    let mut body = Vec::new();
    if encode_prepare(version, text.as_bytes(), own, &mut body).is_err() {
        return None;
    }
    let header = wire::request_header(version, input.flags & 0x02, Opcode::PREPARE, body.len());
    let conn = Conn {
        node: NODE,
        keyspace: ConnKeyspace {
            name: keyspace,
            settled: true,
        },
        use_warning_due: input.use_warning_due,
        may_prepare: false,
    };
    let PrepareDecision::Answer { message, warning } =
        decide_prepare(rw, &header, &body, conn, Instant::now())
    else {
        return None;
    };
    let s = shaped.expect("only a shape is answered");
    let Ok(ResultView::Prepared(p)) = ResultView::parse(&message, version) else {
        panic!("the PREPARED answer does not parse: {message:02x?}");
    };
    let clients: Vec<ColumnSpec<'_>> = s
        .shape
        .slots
        .iter()
        .zip(s.binds)
        .filter(|(slot, _)| !matches!(slot, Slot::Literal(_)))
        .map(|(_, b)| *b)
        .collect();
    let answered: Vec<ColumnSpec<'_>> = p.bind.columns.iter().collect();
    assert_eq!(answered, clients, "bind columns: the client's markers'");
    assert_eq!(p.result_raw, s.result_raw, "the shape's result metadata");
    for i in p.bind.pk_indexes() {
        assert!(
            usize::from(i) < answered.len(),
            "partition key index {i} of {}",
            answered.len()
        );
    }
    let frame = answer_frame(version, 9, &message, warning.as_deref());
    let h = parse_header(&frame, Direction::Response);
    let rb = ResponseBody::parse(&h, &frame[HEADER_LEN..]).expect("the answer's body parses");
    assert_eq!(rb.message, &message[..]);
    assert_eq!(rb.warnings.is_some(), warning.is_some());

    // The client executes the id it was given.
    let (count, raw) = client_values(&input.values);
    let mut body = Vec::new();
    let ps = params(input, count, &raw, None);
    let rmid = p.result_metadata_id.unwrap_or_default();
    if encode_execute(version, p.id, rmid, &ps, &mut body).is_err() {
        return Some(p.id.to_vec());
    }
    let header = wire::request_header(version, input.flags & 0x02, Opcode::EXECUTE, body.len());
    let mut scratch = Vec::new();
    let executed_id = decide_execute(rw, NODE, &header, &body, &mut scratch)
        .expect("the id answered is the proxy's");
    if let Decision::Execute { frame, .. } = executed_id.decision {
        executed(&frame, version, s, &input.values[..usize::from(count)]);
    }
    Some(p.id.to_vec())
}

/// A BATCH of the statement as text, the id its PREPARE was answered with (if it was), and
/// the text again.
fn batch(
    rw: &Rewriter,
    input: &Input<'_>,
    text: &str,
    version: ProtocolVersion,
    keyspace: Option<&str>,
    s: &Shaped<'_>,
    answered: Option<&[u8]>,
) {
    let (count, raw) = client_values(&input.values);
    let values = Values {
        count,
        named: false,
        raw: &raw,
    };
    let mut children = vec![BatchChild {
        query: BatchQuery::Text(text.as_bytes()),
        values,
    }];
    if let Some(id) = answered {
        children.push(BatchChild {
            query: BatchQuery::Prepared(id),
            values,
        });
    }
    children.push(children[0]);
    let params = BatchParams {
        consistency: input.consistency,
        serial_consistency: input.serial,
        ..Default::default()
    };
    let mut body = Vec::new();
    if encode_batch(version, input.flags % 3, &children, &params, &mut body).is_err() {
        return;
    }
    let header = wire::request_header(version, input.flags & 0x02, Opcode::BATCH, body.len());
    let conn = ConnKeyspace {
        name: keyspace,
        settled: true,
    };
    let mut scratch = Vec::new();
    let now = Instant::now();
    let Decision::Execute { frame, .. } =
        decide_batch(rw, NODE, &header, &body, conn, now, &mut scratch)
    else {
        return;
    };
    let h = parse_header(&frame, Direction::Request);
    assert_eq!(h.opcode, Opcode::BATCH);
    let rb = RequestBody::parse(&h, &frame[HEADER_LEN..]).expect("the BATCH's body parses");
    let b = BatchView::parse(rb.message, version).expect("the BATCH parses");
    assert_eq!(usize::from(b.count), children.len());
    let client = &input.values[..usize::from(count)];
    for child in b.children() {
        let child = child.expect("a child of the BATCH built");
        assert_eq!(child.query, BatchQuery::Prepared(&s.entry.id[..]));
        values_of_shape(child.values, s, client);
    }
}
