//! Golden vectors: bytes captured from a real Apache Cassandra 5.0.6 by
//! `tests/golden/capture.py`, one file per envelope (or v5 segment) in `tests/golden/`.
//!
//! For every capture the tests decode the bytes with this crate (envelopes, v4 compression,
//! v5 segments with reassembly), parse the body with the view for its opcode, assert the facts
//! the README states (row counts, column names and types, error codes, ids, paging state), and
//! encode it back: envelopes must rebuild byte for byte, requests re-encoded from their views
//! must give the captured bodies, and v5 segments re-framed by `SegmentEncoder` must match the
//! server's where its segmentation is the same.
//!
//! `every_capture_is_referenced` lists the folder and fails for a file whose name does not
//! appear in this source, so a new capture cannot go untested.

use autoprep_protocol::compression::{compress, decompress, Compression};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, EnvelopeError, Flags, Header, Opcode, ProtocolVersion,
    StreamId, DEFAULT_MAX_BODY_LEN, HEADER_LEN,
};
use autoprep_protocol::message::batch::{encode_batch, BatchChild, BatchQuery, BatchView};
use autoprep_protocol::message::error::{code, ErrorDetail, ErrorView};
use autoprep_protocol::message::event::EventView;
use autoprep_protocol::message::execute::{encode_execute, ExecuteView};
use autoprep_protocol::message::prepare::{encode_prepare, PrepareView};
use autoprep_protocol::message::query::{encode_query, flags as qflags, QueryView};
use autoprep_protocol::message::result::{metadata_flags, PreparedView, ResultView, RowsView};
use autoprep_protocol::message::startup::StartupView;
use autoprep_protocol::message::supported::for_each_option;
use autoprep_protocol::message::{RequestBody, ResponseBody};
use autoprep_protocol::primitives::{write_string_map, StringList, Value};
use autoprep_protocol::segment::{
    crc24, crc32, FramedDecoder, Segment, SegmentDecoder, SegmentEncoder, SegmentError, MAX_PAYLOAD,
};
use autoprep_protocol::types::ColumnType;
use bytes::BytesMut;
use std::collections::BTreeMap;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
const KS: &str = "autoprep_golden";
const ONE: u16 = 0x0001;
const V4: ProtocolVersion = ProtocolVersion::V4;
const V5: ProtocolVersion = ProtocolVersion::V5;
const REQ: Direction = Direction::Request;
const RESP: Direction = Direction::Response;

// ---------------------------------------------------------------------------------------------
// Reading and decoding captures

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The v4 compression negotiated on the connection a file was captured on (its name prefix).
fn compression_of(name: &str) -> Option<Compression> {
    if name.starts_with("v4lz4_") {
        Some(Compression::Lz4)
    } else if name.starts_with("v4snappy_") {
        Some(Compression::Snappy)
    } else {
        None
    }
}

/// One decoded envelope and its body, decompressed when the header says so.
struct Decoded {
    name: String,
    env: Envelope,
    body: Vec<u8>,
}

impl Decoded {
    fn header(&self) -> &Header {
        self.env.header()
    }

    fn version(&self) -> ProtocolVersion {
        self.header().version
    }

    /// Checks the header fields the README lists for the file.
    fn expect(&self, version: ProtocolVersion, flags: u8, stream: i16, opcode: Opcode) {
        let h = self.header();
        let n = &self.name;
        assert_eq!(h.version, version, "{n}: version");
        assert_eq!(h.flags, Flags(flags), "{n}: flags");
        assert_eq!(h.stream, StreamId(stream), "{n}: stream");
        assert_eq!(h.opcode, opcode, "{n}: opcode {}", h.opcode.name());
    }

    /// The request message, after checking that no custom payload precedes it.
    fn request(&self) -> &[u8] {
        assert_eq!(self.header().direction, REQ, "{}", self.name);
        let rb = RequestBody::parse(self.header(), &self.body).unwrap();
        assert!(rb.custom_payload.is_none(), "{}: custom payload", self.name);
        rb.message
    }

    /// The response body with its flag-driven prefix split off.
    fn response(&self) -> ResponseBody<'_> {
        assert_eq!(self.header().direction, RESP, "{}", self.name);
        ResponseBody::parse(self.header(), &self.body).unwrap()
    }

    /// The response message of a response without tracing, warnings or custom payload.
    fn plain_response(&self) -> &[u8] {
        let rb = self.response();
        assert!(rb.tracing_id.is_none() && rb.warnings.is_none() && rb.custom_payload.is_none());
        rb.message
    }
}

/// Asserts that an envelope rebuilt from its parsed header and body is the captured bytes.
fn assert_rebuilds(name: &str, env: &Envelope, raw: &[u8]) {
    assert_eq!(env.as_bytes(), raw, "{name}: decoded envelope bytes");
    let rebuilt = Envelope::new(*env.header(), env.body());
    assert_eq!(rebuilt.as_bytes(), raw, "{name}: Envelope::new re-encoding");
    assert_eq!(rebuilt.header(), env.header(), "{name}: rebuilt header");
    let mut h = Vec::new();
    env.header().write(&mut h);
    assert_eq!(h, raw[..HEADER_LEN], "{name}: Header::write");
}

/// Decompresses a flagged body, and checks that the crate's own compressor round-trips it.
fn unpack(name: &str, env: &Envelope) -> Vec<u8> {
    if !env.header().flags.has(Flags::COMPRESSION) {
        return env.body().to_vec();
    }
    let alg = compression_of(name).unwrap_or_else(|| panic!("{name}: compressed, but no codec"));
    let plain = decompress(alg, env.body(), DEFAULT_MAX_BODY_LEN).unwrap();
    // The peer's compressor (Java LZ4 / Snappy on the server, the C LZ4 library and cramjam in
    // the capture script) need not produce our bytes; what must hold is that ours round-trip.
    let mut again = Vec::new();
    compress(alg, &plain, &mut again);
    assert_eq!(
        decompress(alg, &again, DEFAULT_MAX_BODY_LEN).unwrap(),
        plain
    );
    plain
}

/// Decodes a file holding exactly one unframed envelope.
fn envelope(name: &str, dir: Direction) -> Decoded {
    let raw = read(name);
    let mut buf = BytesMut::from(&raw[..]);
    let decoder = EnvelopeDecoder::new(dir, DEFAULT_MAX_BODY_LEN);
    // Fed byte by byte, the decoder waits until the last byte, then splits the envelope off.
    let mut partial = BytesMut::new();
    for &b in &raw[..raw.len() - 1] {
        partial.extend_from_slice(&[b]);
        assert!(decoder.decode(&mut partial).unwrap().is_none(), "{name}");
    }
    let env = decoder.decode(&mut buf).unwrap().expect("whole envelope");
    assert!(buf.is_empty(), "{name}: trailing bytes");
    assert_eq!(
        env.header().length,
        raw.len() - HEADER_LEN,
        "{name}: length"
    );
    assert_rebuilds(name, &env, &raw);
    let body = unpack(name, &env);
    Decoded {
        name: name.to_owned(),
        env,
        body,
    }
}

/// Decodes one segment file on its own.
fn segment(name: &str, lz4: bool) -> Segment {
    let raw = read(name);
    let mut buf = BytesMut::from(&raw[..]);
    let seg = SegmentDecoder::new(lz4)
        .decode(&mut buf)
        .unwrap()
        .expect("whole segment");
    assert!(buf.is_empty(), "{name}: trailing bytes");
    seg
}

/// The compressed and uncompressed lengths and the self-contained bit of an LZ4 segment header.
fn lz4_header(raw: &[u8]) -> (usize, usize, bool) {
    let field = raw[..5]
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    (
        (field & 0x1FFFF) as usize,
        ((field >> 17) & 0x1FFFF) as usize,
        field & (1 << 34) != 0,
    )
}

/// Decodes the envelopes carried by segment files, fed one file at a time as a peer would
/// deliver them; an envelope spanning several files comes out after its last one.
fn framed(names: &[&str], lz4: bool, dir: Direction) -> Vec<Decoded> {
    let mut d = FramedDecoder::new(
        SegmentDecoder::new(lz4),
        EnvelopeDecoder::new(dir, DEFAULT_MAX_BODY_LEN),
    );
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        buf.extend_from_slice(&read(name));
        let before = out.len();
        while let Some(env) = d.decode(&mut buf).unwrap() {
            let body = env.body().to_vec();
            // A reassembled envelope rebuilds from its header and body as well.
            assert_eq!(
                Envelope::new(*env.header(), &body).as_bytes(),
                env.as_bytes()
            );
            out.push(Decoded {
                name: (*name).to_owned(),
                env,
                body,
            });
        }
        assert!(buf.is_empty(), "{name}: undecoded bytes");
        if i + 1 < names.len() {
            assert_eq!(
                out.len(),
                before,
                "{name}: envelope before its last segment"
            );
        }
    }
    out
}

/// Decodes a file holding one self-contained segment with one envelope, and re-frames it.
///
/// Uncompressed segments must re-frame byte for byte. LZ4 segments the peer stored uncompressed
/// (uncompressed length 0) must too: no compressor is involved. For LZ4 segments the peer did
/// compress, our LZ4 (lz4_flex) may legitimately choose other matches than Java's or the C
/// library's, so there the decompressed payloads must be equal instead.
fn single_segment(name: &str, lz4: bool, dir: Direction) -> Decoded {
    let raw = read(name);
    let seg = segment(name, lz4);
    assert!(seg.self_contained, "{name}: self-contained");
    let mut envs = framed(&[name], lz4, dir);
    assert_eq!(envs.len(), 1, "{name}: one envelope");
    let d = envs.pop().unwrap();
    assert_eq!(
        d.env.as_bytes(),
        &seg.payload[..],
        "{name}: payload is the envelope"
    );

    let mut out = BytesMut::new();
    let mut enc = SegmentEncoder::new(lz4);
    enc.push(d.env.as_bytes(), &mut out);
    enc.finish(&mut out);
    let stored = lz4 && lz4_header(&raw).1 == 0;
    if !lz4 || stored {
        assert_eq!(&out[..], &raw[..], "{name}: re-framed segment");
    } else {
        let ours = SegmentDecoder::new(true)
            .decode(&mut out.clone())
            .unwrap()
            .unwrap();
        assert!(ours.self_contained);
        assert_eq!(ours.payload, seg.payload, "{name}: re-framed LZ4 payload");
        assert_eq!(
            lz4_header(&out).1,
            seg.payload.len(),
            "{name}: ours compressed too"
        );
    }
    d
}

// ---------------------------------------------------------------------------------------------
// Message helpers: parse with the view, re-encode with the crate's encoder, compare

fn query(d: &Decoded) -> QueryView<'_> {
    assert_eq!(d.header().opcode, Opcode::QUERY, "{}", d.name);
    let msg = d.request();
    let q = QueryView::parse(msg, d.version()).unwrap();
    let mut out = Vec::new();
    encode_query(d.version(), q.query, &q.params, &mut out).unwrap();
    assert_eq!(out, msg, "{}: QUERY re-encoding", d.name);
    q
}

fn prepare(d: &Decoded) -> PrepareView<'_> {
    assert_eq!(d.header().opcode, Opcode::PREPARE, "{}", d.name);
    let msg = d.request();
    let p = PrepareView::parse(msg, d.version()).unwrap();
    let mut out = Vec::new();
    encode_prepare(d.version(), p.query, p.keyspace, &mut out).unwrap();
    assert_eq!(out, msg, "{}: PREPARE re-encoding", d.name);
    p
}

fn execute(d: &Decoded) -> ExecuteView<'_> {
    assert_eq!(d.header().opcode, Opcode::EXECUTE, "{}", d.name);
    let msg = d.request();
    let e = ExecuteView::parse(msg, d.version()).unwrap();
    let mut out = Vec::new();
    let rmid = e.result_metadata_id.unwrap_or_default();
    encode_execute(d.version(), e.id, rmid, &e.params, &mut out).unwrap();
    assert_eq!(out, msg, "{}: EXECUTE re-encoding", d.name);
    e
}

fn batch(d: &Decoded) -> (BatchView<'_>, Vec<BatchChild<'_>>) {
    assert_eq!(d.header().opcode, Opcode::BATCH, "{}", d.name);
    let msg = d.request();
    let b = BatchView::parse(msg, d.version()).unwrap();
    let children: Vec<_> = b.children().map(Result::unwrap).collect();
    assert_eq!(children.len(), usize::from(b.count));
    let mut out = Vec::new();
    encode_batch(d.version(), b.batch_type, &children, &b.params, &mut out).unwrap();
    assert_eq!(out, msg, "{}: BATCH re-encoding", d.name);
    (b, children)
}

fn startup(d: &Decoded) -> StartupView<'_> {
    assert_eq!(d.header().opcode, Opcode::STARTUP, "{}", d.name);
    let msg = d.request();
    let s = StartupView::parse(msg).unwrap();
    // The capture script sends CQL_VERSION, then COMPRESSION when it asks for one.
    let mut entries = vec![("CQL_VERSION", s.cql_version.unwrap())];
    if let Some(c) = s.compression_name {
        entries.push(("COMPRESSION", c));
    }
    let mut out = Vec::new();
    write_string_map(&mut out, &entries).unwrap();
    assert_eq!(out, msg, "{}: STARTUP re-encoding", d.name);
    s
}

fn result(d: &Decoded) -> ResultView<'_> {
    assert_eq!(d.header().opcode, Opcode::RESULT, "{}", d.name);
    ResultView::parse(d.response().message, d.version()).unwrap()
}

fn rows(d: &Decoded) -> RowsView<'_> {
    match result(d) {
        ResultView::Rows(r) => r,
        other => panic!("{}: expected Rows, got kind {}", d.name, other.kind()),
    }
}

fn prepared(d: &Decoded) -> PreparedView<'_> {
    match result(d) {
        ResultView::Prepared(p) => p,
        other => panic!("{}: expected Prepared, got kind {}", d.name, other.kind()),
    }
}

fn error(d: &Decoded) -> ErrorView<'_> {
    assert_eq!(d.header().opcode, Opcode::ERROR, "{}", d.name);
    ErrorView::parse(d.plain_response(), d.version()).unwrap()
}

/// The (keyspace, table, name, type) of every column, each type decoded.
fn columns(r: &RowsView<'_>) -> Vec<(String, String, String, ColumnType)> {
    let specs = r.metadata.columns.expect("metadata");
    assert_eq!(specs.len(), r.metadata.column_count as usize);
    let cols: Vec<_> = specs
        .iter()
        .map(|s| {
            let t = s.column_type().unwrap();
            // Skipping a type covers exactly the bytes reading it covers.
            let mut skipped = s.type_raw;
            ColumnType::skip(&mut skipped).unwrap();
            assert!(skipped.is_empty());
            (
                s.keyspace.to_owned(),
                s.table.to_owned(),
                s.name.to_owned(),
                t,
            )
        })
        .collect();
    assert_eq!(cols.len(), specs.len());
    cols
}

fn names(cols: &[(String, String, String, ColumnType)]) -> Vec<&str> {
    cols.iter().map(|c| c.2.as_str()).collect()
}

/// Every row with every cell, checking that the cells account for every byte of the rows.
fn cells<'a>(r: &RowsView<'a>) -> Vec<Vec<Option<&'a [u8]>>> {
    let all: Vec<_> = r.rows().map(Result::unwrap).collect();
    assert_eq!(all.len(), r.row_count as usize);
    let used: usize = all
        .iter()
        .flatten()
        .map(|c| 4 + c.map_or(0, <[u8]>::len))
        .sum();
    assert_eq!(used, r.rows_raw.len(), "rows end where the body ends");
    for row in &all {
        assert_eq!(row.len(), r.metadata.column_count as usize);
    }
    all
}

fn int(cell: Option<&[u8]>) -> i32 {
    i32::from_be_bytes(cell.unwrap().try_into().unwrap())
}

fn long(cell: Option<&[u8]>) -> i64 {
    i64::from_be_bytes(cell.unwrap().try_into().unwrap())
}

fn text(cell: Option<&[u8]>) -> &str {
    std::str::from_utf8(cell.unwrap()).unwrap()
}

fn double(cell: Option<&[u8]>) -> f64 {
    f64::from_be_bytes(cell.unwrap().try_into().unwrap())
}

fn float(cell: Option<&[u8]>) -> f32 {
    f32::from_be_bytes(cell.unwrap().try_into().unwrap())
}

/// The values of a request as `Option<&[u8]>` (None for null), refusing names and unset.
fn positional<'a>(values: &autoprep_protocol::message::query::Values<'a>) -> Vec<&'a [u8]> {
    assert!(!values.named);
    values
        .iter()
        .map(|v| match v.unwrap() {
            (None, Value::Bytes(b)) => b,
            other => panic!("unexpected value {other:?}"),
        })
        .collect()
}

/// A SUPPORTED body as a map.
fn supported(body: &[u8]) -> BTreeMap<String, Vec<String>> {
    let mut m = BTreeMap::new();
    for_each_option(body, |k, list| {
        let v: Vec<String> = list.by_ref().map(|s| s.unwrap().to_owned()).collect();
        m.insert(k.to_owned(), v);
    })
    .unwrap();
    m
}

fn hex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

/// `(h + h)[..100]` for a 64-character hex h: the shape of the `big` table's text.
fn is_big_text(v: &str) -> bool {
    v.len() == 100 && v[64..] == v[..36] && v.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A type that the codec reports either as its Java class (today) or as the typed form the
/// encoder work will map that class to; both are correct readings of the wire.
fn custom_or(t: &ColumnType, class_part: &str, typed: &ColumnType) -> bool {
    match t {
        ColumnType::Custom(class) => class.contains(class_part),
        other => other == typed,
    }
}

// ---------------------------------------------------------------------------------------------
// Coverage

/// Every capture in the folder must be named in this file, so each one is under some test.
#[test]
fn every_capture_is_referenced() {
    let source = include_str!("golden.rs");
    let mut count = 0;
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(DIR).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !name.ends_with(".bin") {
            continue;
        }
        count += 1;
        if !source.contains(&format!("\"{name}\"")) {
            missing.push(name);
        }
    }
    missing.sort();
    assert!(missing.is_empty(), "captures without a test: {missing:?}");
    assert_eq!(count, 127, "captures in {DIR}");
}

// ---------------------------------------------------------------------------------------------
// Handshakes: OPTIONS / SUPPORTED / STARTUP / READY / REGISTER

#[test]
fn options_and_supported() {
    for (req, resp, v) in [
        ("v4_options_request.bin", "v4_supported.bin", V4),
        ("v5_options_request.bin", "v5_supported.bin", V5),
    ] {
        let o = envelope(req, REQ);
        o.expect(v, 0, 1, Opcode::OPTIONS);
        assert!(o.body.is_empty());
        let s = envelope(resp, RESP);
        s.expect(v, 0, 1, Opcode::SUPPORTED);
        assert_eq!(s.header().length, 102);
        let opts = supported(s.plain_response());
        assert_eq!(
            opts["PROTOCOL_VERSIONS"],
            ["3/v3", "4/v4", "5/v5", "6/v6-beta"]
        );
        assert_eq!(opts["COMPRESSION"], ["snappy", "lz4"]);
        assert_eq!(opts["CQL_VERSION"], ["3.4.7"]);
        assert_eq!(opts.len(), 3);
    }
    // The v4 and v5 answers differ only in the version byte.
    assert_eq!(read("v4_supported.bin")[1..], read("v5_supported.bin")[1..]);
}

#[test]
fn startup_and_ready() {
    let cases = [
        ("v4_startup_request.bin", "v4_ready.bin", V4, 2, None, 0, 0),
        (
            "v4lz4_startup_request.bin",
            "v4lz4_ready.bin",
            V4,
            1,
            Some("lz4"),
            1,
            5,
        ),
        (
            "v4snappy_startup_request.bin",
            "v4snappy_ready.bin",
            V4,
            1,
            Some("snappy"),
            1,
            1,
        ),
        ("v5_startup_request.bin", "v5_ready.bin", V5, 2, None, 0, 0),
        (
            "v5lz4_startup_request.bin",
            "v5lz4_ready.bin",
            V5,
            1,
            Some("lz4"),
            0,
            0,
        ),
    ];
    for (req, resp, v, stream, comp, ready_flags, ready_len) in cases {
        let s = envelope(req, REQ);
        // STARTUP is never compressed.
        s.expect(v, 0, stream, Opcode::STARTUP);
        let view = startup(&s);
        assert_eq!(view.cql_version, Some("3.0.0"));
        assert_eq!(view.compression_name, comp);
        assert_eq!(
            view.compression(),
            comp.and_then(Compression::from_startup_name)
        );
        let r = envelope(resp, RESP);
        r.expect(v, ready_flags, stream, Opcode::READY);
        assert_eq!(r.header().length, ready_len);
        // A compressed READY (v4 only) still holds an empty body once decompressed.
        assert!(r.body.is_empty(), "{resp}");
    }
    // The server's READY bodies under compression, as the README lists them.
    assert_eq!(read("v4lz4_ready.bin")[HEADER_LEN..], [0, 0, 0, 0, 0]);
    assert_eq!(read("v4snappy_ready.bin")[HEADER_LEN..], [0]);
}

#[test]
fn register_and_event() {
    let r = envelope("v4_register_schema_change_request.bin", REQ);
    r.expect(V4, 0, 2, Opcode::REGISTER);
    let mut msg = r.request();
    let events: Vec<_> = StringList::read(&mut msg)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(events, ["SCHEMA_CHANGE"]);
    assert!(msg.is_empty());

    let ready = envelope("v4_ready_register.bin", RESP);
    ready.expect(V4, 0, 2, Opcode::READY);
    assert!(ready.body.is_empty());

    let e = envelope("v4_event_schema_change.bin", RESP);
    e.expect(V4, 0, -1, Opcode::EVENT);
    assert_eq!(e.header().stream, StreamId::EVENT);
    match EventView::parse(e.plain_response()).unwrap() {
        EventView::SchemaChange(c) => {
            assert_eq!(
                (c.change, c.target, c.keyspace, c.name),
                ("CREATED", "TABLE", KS, Some("event_probe"))
            );
            assert!(c.arguments.is_none());
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// v4 QUERY and its results

#[test]
fn query_insert_all_types() {
    let q = envelope("v4_query_insert_request.bin", REQ);
    q.expect(V4, 0, 3, Opcode::QUERY);
    let v = query(&q);
    let text = std::str::from_utf8(v.query).unwrap();
    assert!(text.starts_with(&format!("INSERT INTO {KS}.all_types (id, c_ascii,")));
    assert!(text.contains("'h\u{e9}llo w\u{f6}rld \u{2713}'"));
    assert_eq!(v.params.consistency, ONE);
    assert_eq!(v.params.flags, 0);
    assert!(v.params.values.is_none() && v.params.page_size.is_none());

    let r = envelope("v4_result_void_insert.bin", RESP);
    r.expect(V4, 0, 3, Opcode::RESULT);
    assert!(matches!(result(&r), ResultView::Void));
    assert_eq!(r.header().length, 4);
}

/// The `system.local` SELECT, asserted on the v4 file and on both v5 files.
fn assert_system_local_rows(d: &Decoded) {
    let r = rows(d);
    assert_eq!(r.metadata.flags, metadata_flags::GLOBAL_TABLES_SPEC);
    assert_eq!(r.metadata.paging_state, None);
    let specs = r.metadata.columns.unwrap();
    assert_eq!(specs.global_table(), Some(("system", "local")));
    let cols = columns(&r);
    assert_eq!(
        names(&cols),
        [
            "key",
            "cluster_name",
            "release_version",
            "cql_version",
            "native_protocol_version",
            "partitioner"
        ]
    );
    assert!(cols
        .iter()
        .all(|c| c.0 == "system" && c.1 == "local" && c.3 == ColumnType::Varchar));
    let all = cells(&r);
    assert_eq!(all.len(), 1);
    let row = &all[0];
    assert_eq!(text(row[0]), "local");
    assert_eq!(text(row[2]), "5.0.6");
    assert_eq!(text(row[3]), "3.4.7");
    assert_eq!(text(row[4]), "5");
    assert_eq!(text(row[5]), "org.apache.cassandra.dht.Murmur3Partitioner");
}

const SYSTEM_LOCAL: &str = "SELECT key, cluster_name, release_version, cql_version, \
                            native_protocol_version, partitioner FROM system.local";

#[test]
fn query_system_local() {
    let q = envelope("v4_query_select_system_local_request.bin", REQ);
    q.expect(V4, 0, 4, Opcode::QUERY);
    assert_eq!(query(&q).query, SYSTEM_LOCAL.as_bytes());
    let r = envelope("v4_result_rows_system_local.bin", RESP);
    r.expect(V4, 0, 4, Opcode::RESULT);
    assert_eq!(r.header().length, 221);
    assert_system_local_rows(&r);
}

/// The three rows of `all_types` (full, edge values, all null), for every codec.
fn assert_all_types_rows(d: &Decoded) {
    let r = rows(d);
    assert_eq!(r.metadata.flags, metadata_flags::GLOBAL_TABLES_SPEC);
    assert_eq!(
        r.metadata.columns.unwrap().global_table(),
        Some((KS, "all_types"))
    );
    let cols = columns(&r);
    use ColumnType::*;
    let expected = [
        ("id", Int),
        ("c_ascii", Ascii),
        ("c_bigint", Bigint),
        ("c_blob", Blob),
        ("c_boolean", Boolean),
        ("c_date", Date),
        ("c_decimal", Decimal),
        ("c_double", Double),
        ("c_duration", Duration),
        ("c_float", Float),
        ("c_inet", Inet),
        ("c_int", Int),
        ("c_list", List(Box::new(Int))),
        ("c_map", Map(Box::new(Varchar), Box::new(Int))),
        ("c_set", Set(Box::new(Varchar))),
        ("c_smallint", Smallint),
        ("c_text", Varchar),
        ("c_time", Time),
        ("c_timestamp", Timestamp),
        ("c_timeuuid", Timeuuid),
        ("c_tinyint", Tinyint),
        ("c_tuple", Tuple(vec![Int, Varchar])),
        (
            "c_udt",
            Udt {
                keyspace: KS.to_owned(),
                name: "address".to_owned(),
                fields: vec![("street".to_owned(), Varchar), ("zip".to_owned(), Int)],
            },
        ),
        ("c_uuid", Uuid),
        ("c_varchar", Varchar),
        ("c_varint", Varint),
        (
            "c_vector",
            Vector {
                element: Box::new(Float),
                dimension: 3,
            },
        ),
    ];
    assert_eq!(cols.len(), 27);
    for ((_, _, name, t), (ename, et)) in cols.iter().zip(&expected) {
        assert_eq!(name, ename);
        match *ename {
            // On the wire v4 sends duration, and every version sends vectors, as custom types.
            "c_duration" => assert!(custom_or(t, "marshal.DurationType", et), "{t:?}"),
            "c_vector" => assert!(
                custom_or(
                    t,
                    "VectorType(org.apache.cassandra.db.marshal.FloatType , 3)",
                    et
                ),
                "{t:?}"
            ),
            _ => assert_eq!(t, et, "{name}"),
        }
    }

    let all = cells(&r);
    let by_id: BTreeMap<i32, &Vec<Option<&[u8]>>> = all.iter().map(|r| (int(r[0]), r)).collect();
    assert_eq!(by_id.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    let col = |name: &str| cols.iter().position(|c| c.2 == name).unwrap();

    let full = by_id[&1];
    assert_eq!(text(full[col("c_ascii")]), "ascii");
    assert_eq!(long(full[col("c_bigint")]), i64::MAX);
    assert_eq!(full[col("c_blob")], Some(&[0xca, 0xfe, 0xba, 0xbe][..]));
    assert_eq!(full[col("c_boolean")], Some(&[1][..]));
    // 2026-01-02 is day 20455; dates are days + 2^31.
    assert_eq!(
        u32::from_be_bytes(full[col("c_date")].unwrap().try_into().unwrap()),
        (1 << 31) + 20455
    );
    assert_eq!(full[col("c_decimal")], Some(&hex("0000000300bc614e")[..]));
    assert_eq!(double(full[col("c_double")]), std::f64::consts::PI);
    assert_eq!(float(full[col("c_float")]), 1.5);
    assert_eq!(full[col("c_inet")], Some(&[127, 0, 0, 1][..]));
    assert_eq!(int(full[col("c_int")]), i32::MAX);
    assert_eq!(text(full[col("c_text")]), "h\u{e9}llo w\u{f6}rld \u{2713}");
    assert_eq!(text(full[col("c_varchar")]), "varchar");
    assert_eq!(full[col("c_smallint")], Some(&[0x7f, 0xff][..]));
    assert_eq!(full[col("c_tinyint")], Some(&[0x7f][..]));
    assert_eq!(
        full[col("c_uuid")],
        Some(&hex("123e4567e89b12d3a456426614174000")[..])
    );
    assert_eq!(
        full[col("c_list")],
        Some(&hex("00000003000000040000000100000004000000020000000400000003")[..])
    );
    assert_eq!(
        full[col("c_set")],
        Some(&hex("0000000200000001610000000162")[..])
    );
    assert_eq!(
        full[col("c_udt")],
        Some(&hex("0000000931204d61696e2053740000000400003039")[..])
    );
    assert_eq!(
        full[col("c_vector")],
        Some(&hex("3f80000040200000c0400000")[..]),
        "[1.0, 2.5, -3.0] as three floats, no length prefixes"
    );

    let edge = by_id[&2];
    assert_eq!(edge[col("c_ascii")], Some(&[][..]), "empty, not null");
    assert_eq!(long(edge[col("c_bigint")]), i64::MIN);
    assert_eq!(edge[col("c_blob")], Some(&[][..]));
    assert_eq!(double(edge[col("c_double")]), f64::NEG_INFINITY);
    assert!(float(edge[col("c_float")]).is_nan());
    assert_eq!(int(edge[col("c_int")]), i32::MIN);
    assert_eq!(edge[col("c_inet")].unwrap().len(), 16, "::1 is IPv6");
    // The server stores empty collections as null.
    for c in ["c_list", "c_set", "c_map"] {
        assert_eq!(edge[col(c)], None, "{c}");
    }

    let nulls = by_id[&3];
    assert!(nulls[1..].iter().all(Option::is_none));
}

#[test]
fn query_all_types() {
    for (req, resp, stream) in [
        (
            "v4_query_select_all_types_request.bin",
            "v4_result_rows_all_types.bin",
            5,
        ),
        (
            "v4lz4_query_select_all_types_request.bin",
            "v4lz4_result_rows_all_types.bin",
            2,
        ),
        (
            "v4snappy_query_select_all_types_request.bin",
            "v4snappy_result_rows_all_types.bin",
            2,
        ),
    ] {
        let compressed = u8::from(compression_of(req).is_some());
        let q = envelope(req, REQ);
        q.expect(V4, compressed, stream, Opcode::QUERY);
        let v = query(&q);
        assert_eq!(v.query, format!("SELECT * FROM {KS}.all_types").as_bytes());
        assert_eq!((v.params.consistency, v.params.flags), (ONE, 0));
        let r = envelope(resp, RESP);
        r.expect(V4, compressed, stream, Opcode::RESULT);
        assert_all_types_rows(&r);
    }
    // Decompressed, the compressed captures are the uncompressed ones.
    let plain = envelope("v4_result_rows_all_types.bin", RESP);
    assert_eq!(plain.header().length, 1288);
    for f in [
        "v4lz4_result_rows_all_types.bin",
        "v4snappy_result_rows_all_types.bin",
    ] {
        assert_eq!(envelope(f, RESP).body, plain.body, "{f}");
    }
}

#[test]
fn query_counters() {
    let q = envelope("v4_query_select_counters_request.bin", REQ);
    q.expect(V4, 0, 6, Opcode::QUERY);
    assert_eq!(
        query(&q).query,
        format!("SELECT id, hits FROM {KS}.counters").as_bytes()
    );
    let d = envelope("v4_result_rows_counters.bin", RESP);
    d.expect(V4, 0, 6, Opcode::RESULT);
    let r = rows(&d);
    let cols = columns(&r);
    assert_eq!(names(&cols), ["id", "hits"]);
    assert_eq!(cols[1].3, ColumnType::Counter);
    let got: BTreeMap<i32, i64> = cells(&r)
        .iter()
        .map(|row| (int(row[0]), long(row[1])))
        .collect();
    assert_eq!(got, BTreeMap::from([(1, 5), (2, -3)]));
}

/// The 100 rows of `hundred`: ids 0..100 once each, `v` = `row NNN`; returns ids in order.
fn assert_hundred(d: &Decoded, count: usize) -> Vec<i32> {
    let r = rows(d);
    let cols = columns(&r);
    assert_eq!(names(&cols), ["id", "v"]);
    assert_eq!(
        (&cols[0].3, &cols[1].3),
        (&ColumnType::Int, &ColumnType::Varchar)
    );
    assert!(cols.iter().all(|c| c.0 == KS && c.1 == "hundred"));
    let all = cells(&r);
    assert_eq!(all.len(), count);
    all.iter()
        .map(|row| {
            let id = int(row[0]);
            assert_eq!(text(row[1]), format!("row {id:03}"));
            id
        })
        .collect()
}

#[test]
fn query_hundred() {
    let mut orders = Vec::new();
    for (req, resp, stream) in [
        (
            "v4_query_select_hundred_request.bin",
            "v4_result_rows_hundred.bin",
            7,
        ),
        (
            "v4lz4_query_select_hundred_request.bin",
            "v4lz4_result_rows_hundred.bin",
            3,
        ),
        (
            "v4snappy_query_select_hundred_request.bin",
            "v4snappy_result_rows_hundred.bin",
            3,
        ),
    ] {
        let compressed = u8::from(compression_of(req).is_some());
        let q = envelope(req, REQ);
        q.expect(V4, compressed, stream, Opcode::QUERY);
        let v = query(&q);
        assert_eq!(
            v.query,
            format!("SELECT id, v FROM {KS}.hundred").as_bytes()
        );
        assert!(v.params.page_size.is_none(), "no paging");
        let r = envelope(resp, RESP);
        r.expect(V4, compressed, stream, Opcode::RESULT);
        let ids = assert_hundred(&r, 100);
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        orders.push(ids);
    }
    // Same token order whatever the compression.
    assert!(orders.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(
        envelope("v4_result_rows_hundred.bin", RESP).header().length,
        1953
    );
}

#[test]
fn query_use_and_schema_change() {
    let q = envelope("v4_query_use_request.bin", REQ);
    q.expect(V4, 0, 8, Opcode::QUERY);
    assert_eq!(query(&q).query, format!("USE {KS}").as_bytes());
    let r = envelope("v4_result_set_keyspace.bin", RESP);
    r.expect(V4, 0, 8, Opcode::RESULT);
    assert!(matches!(result(&r), ResultView::SetKeyspace(KS)));

    let q = envelope("v4_query_create_table_request.bin", REQ);
    q.expect(V4, 0, 9, Opcode::QUERY);
    let create = b"CREATE TABLE created_by_capture (id int PRIMARY KEY, v text)";
    assert_eq!(query(&q).query, create);
    let r = envelope("v4_result_schema_change_created_table.bin", RESP);
    r.expect(V4, 0, 9, Opcode::RESULT);
    match result(&r) {
        ResultView::SchemaChange(c) => assert_eq!(
            (c.change, c.target, c.keyspace, c.name),
            ("CREATED", "TABLE", KS, Some("created_by_capture"))
        ),
        other => panic!("kind {}", other.kind()),
    }

    let q = envelope("v4_query_already_exists_request.bin", REQ);
    q.expect(V4, 0, 19, Opcode::QUERY);
    assert_eq!(query(&q).query, create);
    let e = envelope("v4_error_already_exists.bin", RESP);
    e.expect(V4, 0, 19, Opcode::ERROR);
    let err = error(&e);
    assert_eq!(err.code, code::ALREADY_EXISTS);
    assert_eq!(
        err.message,
        "Cannot add already existing table \"created_by_capture\" to keyspace \"autoprep_golden\""
    );
    assert!(matches!(
        err.detail,
        ErrorDetail::AlreadyExists {
            keyspace: KS,
            table: "created_by_capture"
        }
    ));
}

// ---------------------------------------------------------------------------------------------
// v4 PREPARE / EXECUTE / BATCH

const INSERT_TS: &str =
    "INSERT INTO autoprep_golden.ts (sensor, day, at, value, tags) VALUES (?, ?, ?, ?, ?)";
const SELECT_TS: &str = "SELECT sensor, day, at, value, tags FROM autoprep_golden.ts \
                         WHERE sensor = ? AND day = ? AND at >= ? LIMIT ?";
const INSERT_ID: &str = "b7400c8b981cf522f8865a158ad35238";
const SELECT_ID: &str = "0008590e530d485ea190c1e928eca919";
/// 2026-01-02 03:04:05 UTC in milliseconds.
const AT0: i64 = 1_767_323_045_000;
/// 2026-01-02 as a CQL date (days since the epoch + 2^31).
const DAY: [u8; 4] = 0x8000_4fe7u32.to_be_bytes();

fn ts_columns(cols: &[(String, String, String, ColumnType)]) -> Vec<(&str, &ColumnType)> {
    assert!(cols.iter().all(|c| c.0 == KS && c.1 == "ts"));
    cols.iter().map(|c| (c.2.as_str(), &c.3)).collect()
}

#[test]
fn prepare_insert() {
    let q = envelope("v4_prepare_insert_request.bin", REQ);
    q.expect(V4, 0, 10, Opcode::PREPARE);
    let p = prepare(&q);
    assert_eq!(p.query, INSERT_TS.as_bytes());
    assert_eq!(p.keyspace, None);

    let r = envelope("v4_result_prepared_insert.bin", RESP);
    r.expect(V4, 0, 10, Opcode::RESULT);
    let p = prepared(&r);
    assert_eq!(p.id, hex(INSERT_ID));
    assert_eq!(p.result_metadata_id, None, "v4 has no result_metadata_id");
    assert_eq!(p.bind.flags, metadata_flags::GLOBAL_TABLES_SPEC);
    assert_eq!(p.bind.columns.global_table(), Some((KS, "ts")));
    assert_eq!(p.bind.pk_indexes().collect::<Vec<_>>(), [0, 1]);
    let bind: Vec<_> = p
        .bind
        .columns
        .iter()
        .map(|s| (s.name, s.column_type().unwrap()))
        .collect();
    use ColumnType::*;
    assert_eq!(
        bind,
        [
            ("sensor", Varchar),
            ("day", Date),
            ("at", Timestamp),
            ("value", Double),
            ("tags", Set(Box::new(Varchar)))
        ]
    );
    // An INSERT has no result columns: NO_METADATA, zero columns.
    assert_eq!(p.result.flags, metadata_flags::NO_METADATA);
    assert_eq!(p.result.column_count, 0);
    assert!(p.result.columns.is_none() && p.result.paging_state.is_none());
}

#[test]
fn prepare_select() {
    let q = envelope("v4_prepare_select_request.bin", REQ);
    q.expect(V4, 0, 11, Opcode::PREPARE);
    assert_eq!(prepare(&q).query, SELECT_TS.as_bytes());

    let r = envelope("v4_result_prepared_select.bin", RESP);
    r.expect(V4, 0, 11, Opcode::RESULT);
    let p = prepared(&r);
    assert_eq!(p.id, hex(SELECT_ID));
    assert_eq!(p.bind.pk_indexes().collect::<Vec<_>>(), [0, 1]);
    let bind: Vec<_> = p
        .bind
        .columns
        .iter()
        .map(|s| (s.name, s.column_type().unwrap()))
        .collect();
    use ColumnType::*;
    // The LIMIT marker is reported as a column named "[limit]" of type int.
    assert_eq!(
        bind,
        [
            ("sensor", Varchar),
            ("day", Date),
            ("at", Timestamp),
            ("[limit]", Int)
        ]
    );
    assert_eq!(p.result.flags, metadata_flags::GLOBAL_TABLES_SPEC);
    let specs = p.result.columns.unwrap();
    assert_eq!(specs.global_table(), Some((KS, "ts")));
    let cols: Vec<_> = specs
        .iter()
        .map(|s| (s.name, s.column_type().unwrap()))
        .collect();
    assert_eq!(
        cols,
        [
            ("sensor", Varchar),
            ("day", Date),
            ("at", Timestamp),
            ("value", Double),
            ("tags", Set(Box::new(Varchar)))
        ]
    );
}

#[test]
fn execute_insert() {
    let q = envelope("v4_execute_insert_request.bin", REQ);
    q.expect(V4, 0, 12, Opcode::EXECUTE);
    let e = execute(&q);
    assert_eq!(e.id, hex(INSERT_ID));
    assert_eq!(e.result_metadata_id, None);
    assert_eq!(
        (e.params.consistency, e.params.flags),
        (ONE, qflags::VALUES)
    );
    let values = positional(&e.params.values.unwrap());
    assert_eq!(values.len(), 5);
    assert_eq!(values[0], b"s-17");
    assert_eq!(values[1], DAY);
    assert_eq!(values[2], AT0.to_be_bytes());
    assert_eq!(values[3], 21.5f64.to_be_bytes());
    assert_eq!(values[4], hex("0000000200000001610000000162"));

    let r = envelope("v4_result_void_execute_insert.bin", RESP);
    r.expect(V4, 0, 12, Opcode::RESULT);
    assert!(matches!(result(&r), ResultView::Void));
}

#[test]
fn batch_logged() {
    let q = envelope("v4_batch_logged_request.bin", REQ);
    q.expect(V4, 0, 13, Opcode::BATCH);
    let (b, children) = batch(&q);
    assert_eq!(b.batch_type, 0, "logged");
    assert_eq!(b.count, 2);
    assert_eq!((b.params.consistency, b.params.flags), (ONE, 0));
    assert!(b.params.serial_consistency.is_none() && b.params.default_timestamp.is_none());
    let BatchQuery::Text(text) = children[0].query else {
        panic!("first child is text")
    };
    assert!(text.starts_with(
        format!("INSERT INTO {KS}.ts (sensor, day, at, value) VALUES ('s-17'").as_bytes()
    ));
    assert_eq!(children[0].values.count, 0);
    assert_eq!(children[1].query, BatchQuery::Prepared(&hex(INSERT_ID)));
    let values = positional(&children[1].values);
    assert_eq!(values.len(), 5);
    assert_eq!(values[2], (AT0 + 2000).to_be_bytes());
    assert_eq!(values[3], 22.5f64.to_be_bytes());

    let r = envelope("v4_result_void_batch.bin", RESP);
    r.expect(V4, 0, 13, Opcode::RESULT);
    assert!(matches!(result(&r), ResultView::Void));
}

#[test]
fn batch_unlogged_with_warning() {
    let q = envelope("v4_batch_unlogged_warning_request.bin", REQ);
    q.expect(V4, 0, 23, Opcode::BATCH);
    let (b, children) = batch(&q);
    assert_eq!((b.batch_type, b.count), (1, 12), "unlogged, 12 children");
    for (i, c) in children.iter().enumerate() {
        let want = format!("INSERT INTO {KS}.batch_target (id, v) VALUES ({i}, 'w')");
        assert_eq!(c.query, BatchQuery::Text(want.as_bytes()));
        assert_eq!(c.values.count, 0);
    }

    let r = envelope("v4_result_void_warning.bin", RESP);
    r.expect(V4, Flags::WARNING, 23, Opcode::RESULT);
    let body = r.response();
    assert!(body.tracing_id.is_none() && body.custom_payload.is_none());
    let warnings: Vec<_> = body.warnings.unwrap().map(Result::unwrap).collect();
    assert_eq!(
        warnings,
        [
            "Unlogged batch covering 12 partitions detected against table \
          [autoprep_golden.batch_target]. You should use a logged batch for atomicity, or \
          asynchronous writes for performance."
        ]
    );
    assert!(matches!(result(&r), ResultView::Void));
}

#[test]
fn execute_select_with_and_without_metadata() {
    let with = envelope("v4_execute_select_request.bin", REQ);
    with.expect(V4, 0, 14, Opcode::EXECUTE);
    let e = execute(&with);
    assert_eq!(e.id, hex(SELECT_ID));
    assert_eq!(e.params.flags, qflags::VALUES);
    let values = positional(&e.params.values.unwrap());
    assert_eq!(values.len(), 4);
    assert_eq!(values[3], 10i32.to_be_bytes(), "LIMIT 10");

    let skip = envelope("v4_execute_select_skip_metadata_request.bin", REQ);
    skip.expect(V4, 0, 15, Opcode::EXECUTE);
    let s = execute(&skip);
    assert_eq!(s.params.flags, qflags::VALUES | qflags::SKIP_METADATA);
    assert_eq!(s.params.values, e.params.values);

    let full = envelope("v4_result_rows_execute_select.bin", RESP);
    full.expect(V4, 0, 14, Opcode::RESULT);
    let r = rows(&full);
    use ColumnType::*;
    assert_eq!(
        ts_columns(&columns(&r)),
        [
            ("sensor", &Varchar),
            ("day", &Date),
            ("at", &Timestamp),
            ("value", &Double),
            ("tags", &Set(Box::new(Varchar)))
        ]
    );
    let all = cells(&r);
    assert_eq!(all.len(), 3);
    let at: Vec<i64> = all.iter().map(|row| long(row[2])).collect();
    assert_eq!(at, [AT0, AT0 + 1000, AT0 + 2000]);
    let value: Vec<f64> = all.iter().map(|row| double(row[3])).collect();
    assert_eq!(value, [21.5, 22.0, 22.5]);
    assert!(all
        .iter()
        .all(|row| text(row[0]) == "s-17" && row[1] == Some(&DAY[..])));
    assert_eq!(all[1][4], None, "the text INSERT of the batch set no tags");
    assert_eq!(all[2][4], Some(&hex("000000010000000163")[..]));

    let bare = envelope("v4_result_rows_execute_select_no_metadata.bin", RESP);
    bare.expect(V4, 0, 15, Opcode::RESULT);
    let n = rows(&bare);
    assert_eq!(
        n.metadata.flags,
        metadata_flags::GLOBAL_TABLES_SPEC | metadata_flags::NO_METADATA
    );
    assert_eq!(n.metadata.column_count, 5);
    assert!(n.metadata.columns.is_none());
    assert_eq!(cells(&n), all);
    assert_eq!(n.rows_raw, r.rows_raw, "same rows, without the metadata");
}

#[test]
fn query_with_bound_value() {
    let q = envelope("v4_query_bind_values_request.bin", REQ);
    q.expect(V4, 0, 16, Opcode::QUERY);
    let v = query(&q);
    assert_eq!(
        v.query,
        format!("SELECT id, v FROM {KS}.hundred WHERE id = ?").as_bytes()
    );
    assert_eq!(v.params.flags, qflags::VALUES);
    assert_eq!(positional(&v.params.values.unwrap()), [42i32.to_be_bytes()]);
    let r = envelope("v4_result_rows_bind_values.bin", RESP);
    r.expect(V4, 0, 16, Opcode::RESULT);
    assert_eq!(assert_hundred(&r, 1), [42]);
}

#[test]
fn paging() {
    let cql = format!("SELECT id, v FROM {KS}.hundred");
    let q1 = envelope("v4_query_paged_page1_request.bin", REQ);
    q1.expect(V4, 0, 21, Opcode::QUERY);
    let v1 = query(&q1);
    assert_eq!(v1.query, cql.as_bytes());
    assert_eq!(v1.params.flags, qflags::PAGE_SIZE);
    assert_eq!(v1.params.page_size, Some(10));
    assert_eq!(v1.params.paging_state, None);

    let r1 = envelope("v4_result_rows_paged_page1.bin", RESP);
    r1.expect(V4, 0, 21, Opcode::RESULT);
    let p1 = rows(&r1);
    assert_eq!(
        p1.metadata.flags,
        metadata_flags::GLOBAL_TABLES_SPEC | metadata_flags::HAS_MORE_PAGES
    );
    let state1 = p1.metadata.paging_state.expect("page 1 has a paging state");
    assert_eq!(state1.len(), 12);
    let ids1 = assert_hundred(&r1, 10);

    let q2 = envelope("v4_query_paged_page2_request.bin", REQ);
    q2.expect(V4, 0, 22, Opcode::QUERY);
    let v2 = query(&q2);
    assert_eq!(v2.params.flags, qflags::PAGE_SIZE | qflags::PAGING_STATE);
    assert_eq!(v2.params.page_size, Some(10));
    assert_eq!(
        v2.params.paging_state,
        Some(state1),
        "page 2 sends page 1's state"
    );

    let r2 = envelope("v4_result_rows_paged_page2.bin", RESP);
    r2.expect(V4, 0, 22, Opcode::RESULT);
    let p2 = rows(&r2);
    let state2 = p2.metadata.paging_state.expect("page 2 has a paging state");
    assert_eq!(state2.len(), 12);
    assert_ne!(state1, state2);
    let ids2 = assert_hundred(&r2, 10);

    // The two pages are the first twenty rows of the unpaged result, in its order.
    let all = assert_hundred(&envelope("v4_result_rows_hundred.bin", RESP), 100);
    assert_eq!([ids1, ids2].concat(), all[..20]);
}

#[test]
fn tracing() {
    let q = envelope("v4_query_tracing_request.bin", REQ);
    q.expect(V4, Flags::TRACING, 24, Opcode::QUERY);
    assert_eq!(query(&q).query, b"SELECT key FROM system.local");
    let r = envelope("v4_result_rows_tracing.bin", RESP);
    r.expect(V4, Flags::TRACING, 24, Opcode::RESULT);
    let body = r.response();
    assert_eq!(
        body.tracing_id,
        Some(&hex("33343970e5e811f18dc48f509c4e2372")[..])
    );
    assert!(body.warnings.is_none());
    let rv = rows(&r);
    assert_eq!(names(&columns(&rv)), ["key"]);
    assert_eq!(cells(&rv).len(), 1);
    assert_eq!(text(cells(&rv)[0][0]), "local");
}

// ---------------------------------------------------------------------------------------------
// Errors

const SYNTAX_MESSAGE: &str = "line 1:0 no viable alternative at input 'SELEC' ([SELEC]...)";

#[test]
fn syntax_errors() {
    let cases = [
        (
            "v4_query_syntax_error_request.bin",
            "v4_error_syntax.bin",
            17,
        ),
        (
            "v4lz4_query_syntax_error_request.bin",
            "v4lz4_error_syntax.bin",
            4,
        ),
        (
            "v4snappy_query_syntax_error_request.bin",
            "v4snappy_error_syntax.bin",
            4,
        ),
    ];
    for (req, resp, stream) in cases {
        let compressed = u8::from(compression_of(req).is_some());
        let q = envelope(req, REQ);
        q.expect(V4, compressed, stream, Opcode::QUERY);
        assert_eq!(query(&q).query, b"SELEC * FROM system.local");
        let e = envelope(resp, RESP);
        // Errors are compressed too once compression is negotiated.
        e.expect(V4, compressed, stream, Opcode::ERROR);
        let err = error(&e);
        assert_eq!(err.code, code::SYNTAX_ERROR);
        assert_eq!(err.message, SYNTAX_MESSAGE);
        assert!(matches!(err.detail, ErrorDetail::None));
    }
}

#[test]
fn invalid_and_unprepared() {
    let q = envelope("v4_query_invalid_request.bin", REQ);
    q.expect(V4, 0, 18, Opcode::QUERY);
    assert_eq!(
        query(&q).query,
        format!("SELECT * FROM {KS}.no_such_table").as_bytes()
    );
    let e = envelope("v4_error_invalid.bin", RESP);
    e.expect(V4, 0, 18, Opcode::ERROR);
    let err = error(&e);
    assert_eq!(err.code, code::INVALID);
    assert_eq!(err.message, "table no_such_table does not exist");

    let x = envelope("v4_execute_unknown_id_request.bin", REQ);
    x.expect(V4, 0, 20, Opcode::EXECUTE);
    let ex = execute(&x);
    let unknown: Vec<u8> = (0xA0..0xB0).collect();
    assert_eq!(ex.id, unknown);
    assert_eq!(ex.params.values.map(|v| v.count), Some(0));

    let e = envelope("v4_error_unprepared.bin", RESP);
    e.expect(V4, 0, 20, Opcode::ERROR);
    assert_eq!(e.header().length, 261);
    let err = error(&e);
    assert_eq!(err.code, code::UNPREPARED);
    assert!(err
        .message
        .starts_with("Prepared query with ID a0a1a2a3a4a5a6a7a8a9aaabacadaeaf not found"));
    match err.detail {
        ErrorDetail::Unprepared { id } => assert_eq!(id, unknown),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// v5 framing

const PREPARED_V5_ID: &str = "341813f483f9529201f98ecaf07d954d";
const RESULT_METADATA_ID: &str = "6dbadea3ee9932a1668f57e8ee723854";

/// The v5 segment files, uncompressed or LZ4, with the stream of each exchange.
fn v5_exchanges(lz4: bool) -> [(&'static str, &'static str, i16); 4] {
    if lz4 {
        [
            (
                "v5lz4_segment_query_select_system_local_request.bin",
                "v5lz4_segment_query_select_system_local_response.bin",
                2,
            ),
            (
                "v5lz4_segment_prepare_select_request.bin",
                "v5lz4_segment_prepare_select_response.bin",
                3,
            ),
            (
                "v5lz4_segment_execute_select_request.bin",
                "v5lz4_segment_execute_select_response.bin",
                4,
            ),
            (
                "v5lz4_segment_query_syntax_error_request.bin",
                "v5lz4_segment_query_syntax_error_response.bin",
                5,
            ),
        ]
    } else {
        [
            (
                "v5_segment_query_select_system_local_request.bin",
                "v5_segment_query_select_system_local_response.bin",
                3,
            ),
            (
                "v5_segment_prepare_select_request.bin",
                "v5_segment_prepare_select_response.bin",
                4,
            ),
            (
                "v5_segment_execute_select_request.bin",
                "v5_segment_execute_select_response.bin",
                5,
            ),
            (
                "v5_segment_query_syntax_error_request.bin",
                "v5_segment_query_syntax_error_response.bin",
                6,
            ),
        ]
    }
}

#[test]
fn v5_exchanges_decode_and_reframe() {
    for lz4 in [false, true] {
        let [local, prep, exec, syntax] = v5_exchanges(lz4);

        let q = single_segment(local.0, lz4, REQ);
        q.expect(V5, 0, local.2, Opcode::QUERY);
        let v = query(&q);
        assert_eq!(v.query, SYSTEM_LOCAL.as_bytes());
        assert_eq!((v.params.consistency, v.params.flags), (ONE, 0));
        let r = single_segment(local.1, lz4, RESP);
        r.expect(V5, 0, local.2, Opcode::RESULT);
        assert_system_local_rows(&r);
        // The Rows message is the same on v4 and v5.
        let v4 = envelope("v4_result_rows_system_local.bin", RESP);
        assert_eq!(r.body, v4.body);

        let q = single_segment(prep.0, lz4, REQ);
        q.expect(V5, 0, prep.2, Opcode::PREPARE);
        let p = prepare(&q);
        assert_eq!(
            p.query,
            format!("SELECT id, v FROM {KS}.hundred WHERE id = ?").as_bytes()
        );
        assert_eq!(p.keyspace, None, "flags 0");
        let r = single_segment(prep.1, lz4, RESP);
        r.expect(V5, 0, prep.2, Opcode::RESULT);
        let pv = prepared(&r);
        assert_eq!(pv.id, hex(PREPARED_V5_ID));
        assert_eq!(pv.result_metadata_id, Some(&hex(RESULT_METADATA_ID)[..]));
        assert_eq!(pv.bind.pk_indexes().collect::<Vec<_>>(), [0]);
        let bind: Vec<_> = pv
            .bind
            .columns
            .iter()
            .map(|s| (s.name, s.column_type().unwrap()))
            .collect();
        assert_eq!(bind, [("id", ColumnType::Int)]);
        let result_cols: Vec<_> = pv.result.columns.unwrap().iter().map(|s| s.name).collect();
        assert_eq!(result_cols, ["id", "v"]);
        assert_eq!(pv.result.new_metadata_id, None);

        let q = single_segment(exec.0, lz4, REQ);
        q.expect(V5, 0, exec.2, Opcode::EXECUTE);
        let e = execute(&q);
        assert_eq!(e.id, hex(PREPARED_V5_ID));
        assert_eq!(e.result_metadata_id, Some(&hex(RESULT_METADATA_ID)[..]));
        assert_eq!(positional(&e.params.values.unwrap()), [7i32.to_be_bytes()]);
        let r = single_segment(exec.1, lz4, RESP);
        r.expect(V5, 0, exec.2, Opcode::RESULT);
        let rv = rows(&r);
        assert_eq!(rv.metadata.new_metadata_id, None, "metadata unchanged");
        assert_eq!(assert_hundred(&r, 1), [7]);

        let q = single_segment(syntax.0, lz4, REQ);
        q.expect(V5, 0, syntax.2, Opcode::QUERY);
        assert_eq!(query(&q).query, b"SELEC * FROM system.local");
        let r = single_segment(syntax.1, lz4, RESP);
        r.expect(V5, 0, syntax.2, Opcode::ERROR);
        let err = error(&r);
        assert_eq!(
            (err.code, err.message),
            (code::SYNTAX_ERROR, SYNTAX_MESSAGE)
        );
    }
}

#[test]
fn v5_lz4_segment_headers() {
    // (file, compressed length, uncompressed length) from the README; 0 = stored as is.
    let cases = [
        (
            "v5lz4_segment_query_select_system_local_response.bin",
            215,
            230,
        ),
        ("v5lz4_segment_prepare_select_response.bin", 103, 140),
        ("v5lz4_segment_execute_select_response.bin", 79, 81),
        ("v5lz4_segment_query_syntax_error_response.bin", 75, 0),
        (
            "v5lz4_segment_query_select_big_response_00.bin",
            88812,
            131060,
        ),
        (
            "v5lz4_segment_query_select_big_response_01.bin",
            63073,
            92998,
        ),
    ];
    for (name, clen, ulen) in cases {
        let raw = read(name);
        let (c, u, _) = lz4_header(&raw);
        assert_eq!((c, u), (clen, ulen), "{name}");
        assert_eq!(raw.len(), 8 + clen + 4, "{name}");
        let seg = segment(name, true);
        assert_eq!(seg.payload.len(), if ulen == 0 { clen } else { ulen });
    }
}

/// Both connections saw the same answers; only the stream ids differ.
#[test]
fn v5_lz4_and_uncompressed_carry_the_same_envelopes() {
    for ((_, plain, _), (_, lz4, stream)) in v5_exchanges(false).into_iter().zip(v5_exchanges(true))
    {
        let mut p = framed(&[plain], false, RESP).pop().unwrap();
        let l = framed(&[lz4], true, RESP).pop().unwrap();
        p.env.set_stream(StreamId(stream));
        assert_eq!(p.env.as_bytes(), l.env.as_bytes(), "{plain} / {lz4}");
    }
}

#[test]
fn v5_large_result_spans_segments() {
    for (lz4, req, parts, stream) in [
        (
            false,
            "v5_segment_query_select_big_request.bin",
            [
                "v5_segment_query_select_big_response_00.bin",
                "v5_segment_query_select_big_response_01.bin",
            ],
            7,
        ),
        (
            true,
            "v5lz4_segment_query_select_big_request.bin",
            [
                "v5lz4_segment_query_select_big_response_00.bin",
                "v5lz4_segment_query_select_big_response_01.bin",
            ],
            6,
        ),
    ] {
        let q = single_segment(req, lz4, REQ);
        q.expect(V5, 0, stream, Opcode::QUERY);
        assert_eq!(
            query(&q).query,
            format!("SELECT id, v FROM {KS}.big").as_bytes()
        );

        let segs: Vec<Segment> = parts.iter().map(|p| segment(p, lz4)).collect();
        assert!(segs.iter().all(|s| !s.self_contained));
        let mut envs = framed(&parts, lz4, RESP);
        assert_eq!(envs.len(), 1);
        let d = envs.pop().unwrap();
        d.expect(V5, 0, stream, Opcode::RESULT);
        assert_eq!(d.header().length, 224_049);
        // The envelope is exactly the concatenated payloads.
        let joined: Vec<u8> = segs
            .iter()
            .flat_map(|s| s.payload.iter().copied())
            .collect();
        assert_eq!(d.env.as_bytes(), &joined[..]);
        // The server fills the first segment to just under the maximum payload.
        assert!(segs[0].payload.len() < MAX_PAYLOAD && segs[0].payload.len() > MAX_PAYLOAD - 32);

        let r = rows(&d);
        assert_eq!(names(&columns(&r)), ["id", "v"]);
        let all = cells(&r);
        assert_eq!(all.len(), 2000);
        let mut ids: Vec<i32> = all
            .iter()
            .map(|row| {
                assert!(is_big_text(text(row[1])));
                int(row[0])
            })
            .collect();
        ids.sort();
        assert_eq!(ids, (0..2000).collect::<Vec<_>>());

        // Our encoder cuts at the maximum payload where the server cut a little earlier, so
        // the segment bytes differ; the envelope they carry must not.
        let mut out = BytesMut::new();
        let mut enc = SegmentEncoder::new(lz4);
        enc.push(d.env.as_bytes(), &mut out);
        enc.finish(&mut out);
        let mut check = out.clone();
        let ours: Vec<Segment> =
            std::iter::from_fn(|| SegmentDecoder::new(lz4).decode(&mut check).unwrap()).collect();
        assert_eq!(ours.len(), 2);
        assert!(ours.iter().all(|s| !s.self_contained));
        assert_eq!(ours[0].payload.len(), MAX_PAYLOAD);
        let mut back = FramedDecoder::new(
            SegmentDecoder::new(lz4),
            EnvelopeDecoder::new(RESP, DEFAULT_MAX_BODY_LEN),
        );
        let again = back.decode(&mut out).unwrap().unwrap();
        assert_eq!(again.as_bytes(), d.env.as_bytes());
        assert!(out.is_empty());
    }
    // Uncompressed and LZ4 carried the same rows.
    let a = framed(
        &[
            "v5_segment_query_select_big_response_00.bin",
            "v5_segment_query_select_big_response_01.bin",
        ],
        false,
        RESP,
    );
    let b = framed(
        &[
            "v5lz4_segment_query_select_big_response_00.bin",
            "v5lz4_segment_query_select_big_response_01.bin",
        ],
        true,
        RESP,
    );
    assert_eq!(a[0].body, b[0].body);
}

/// Several envelopes of one direction framed together become one self-contained segment that
/// decodes back to the same envelopes (what the proxy does with a batch of writes).
#[test]
fn v5_envelopes_share_a_segment() {
    for lz4 in [false, true] {
        let reqs: Vec<Decoded> = v5_exchanges(lz4)
            .iter()
            .map(|(req, _, _)| single_segment(req, lz4, REQ))
            .collect();
        let mut out = BytesMut::new();
        let mut enc = SegmentEncoder::new(lz4);
        for d in &reqs {
            enc.push(d.env.as_bytes(), &mut out);
        }
        enc.finish(&mut out);
        let seg = SegmentDecoder::new(lz4)
            .decode(&mut out.clone())
            .unwrap()
            .unwrap();
        assert!(seg.self_contained);
        let joined: Vec<u8> = reqs
            .iter()
            .flat_map(|d| d.env.as_bytes().to_vec())
            .collect();
        assert_eq!(&seg.payload[..], &joined[..]);
        let mut d = FramedDecoder::new(
            SegmentDecoder::new(lz4),
            EnvelopeDecoder::new(REQ, DEFAULT_MAX_BODY_LEN),
        );
        for want in &reqs {
            assert_eq!(
                d.decode(&mut out).unwrap().unwrap().as_bytes(),
                want.env.as_bytes()
            );
        }
        assert!(d.decode(&mut out).unwrap().is_none());
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input: requests the codec must refuse (or pass on, as the server sees them), and the
// server's answers to them

fn refused(name: &str) -> EnvelopeError {
    let raw = read(name);
    let mut buf = BytesMut::from(&raw[..]);
    let dir = if name.ends_with("_request.bin") {
        REQ
    } else {
        RESP
    };
    let err = EnvelopeDecoder::new(dir, DEFAULT_MAX_BODY_LEN)
        .decode(&mut buf)
        .unwrap_err();
    assert_eq!(buf.len(), raw.len(), "{name}: nothing consumed");
    err
}

#[test]
fn bad_versions_are_refused_from_the_header() {
    for (name, byte, version) in [
        ("bad_version_02_request.bin", 0x02, 2),
        ("bad_version_06_no_beta_request.bin", 0x06, 6),
        ("bad_version_06_beta_request.bin", 0x06, 6),
        ("bad_version_45_request.bin", 0x45, 69),
    ] {
        assert_eq!(
            refused(name),
            // Refused from the version byte alone, answered on stream 0 as Cassandra does.
            EnvelopeError::UnsupportedVersion {
                byte,
                version,
                stream: 0
            },
            "{name}"
        );
    }
    assert_eq!(
        refused("bad_version_84_response_bit_request.bin"),
        EnvelopeError::WrongDirection {
            byte: 0x84,
            stream: 7
        }
    );
}

#[test]
fn bad_lengths_are_refused_from_the_header() {
    for (name, length) in [
        ("bad_length_7fffffff_request.bin", 0x7fff_ffff),
        ("bad_length_7fffffff_after_startup_request.bin", 0x7fff_ffff),
        ("bad_length_negative_request.bin", -1),
    ] {
        assert_eq!(
            refused(name),
            EnvelopeError::BodyTooLong {
                length,
                max: DEFAULT_MAX_BODY_LEN,
                stream: 7,
                version: V4
            },
            "{name}"
        );
    }
    // The server never answered these.
    for name in [
        "bad_length_7fffffff_response.bin",
        "bad_length_7fffffff_after_startup_response.bin",
        "bad_length_negative_response.bin",
    ] {
        assert!(read(name).is_empty(), "{name}");
        let mut buf = BytesMut::new();
        assert!(EnvelopeDecoder::new(RESP, DEFAULT_MAX_BODY_LEN)
            .decode(&mut buf)
            .unwrap()
            .is_none());
    }
}

/// Headers the codec accepts (it passes unknown opcodes on and does not track the connection's
/// version), with the server's ERROR for each.
#[test]
fn bad_requests_the_codec_passes_on() {
    let cases = [
        (
            "bad_opcode_ff_request.bin",
            "bad_opcode_ff_response.bin",
            V4,
            Opcode(0xff),
            V5,
            0,
            code::SERVER_ERROR,
            "io.netty.handler.codec.DecoderException: java.lang.ArrayIndexOutOfBoundsException: Index -1",
        ),
        (
            "bad_opcode_ff_after_startup_request.bin",
            "bad_opcode_ff_after_startup_response.bin",
            V4,
            Opcode(0xff),
            V4,
            0,
            code::SERVER_ERROR,
            "io.netty.handler.codec.DecoderException: java.lang.ArrayIndexOutOfBoundsException",
        ),
        (
            "bad_query_before_startup_request.bin",
            "bad_query_before_startup_response.bin",
            V4,
            Opcode::QUERY,
            V4,
            0,
            code::PROTOCOL_ERROR,
            "Unexpected message QUERY, expecting STARTUP or OPTIONS",
        ),
        (
            "bad_version_05_on_v4_connection_request.bin",
            "bad_version_05_on_v4_connection_response.bin",
            V5,
            Opcode::OPTIONS,
            V4,
            7,
            code::PROTOCOL_ERROR,
            "Invalid message version. Got 5/v5 but previous messages on this connection had \
             version 4/v4",
        ),
        (
            "bad_version_45_request.bin",
            "bad_version_45_response.bin",
            V4, // unused: the request is refused, see bad_versions_are_refused_from_the_header
            Opcode::OPTIONS,
            V5,
            0,
            code::PROTOCOL_ERROR,
            "Invalid or unsupported protocol version (69); supported versions are (3/v3, 4/v4, \
             5/v5, 6/v6-beta)",
        ),
        (
            "bad_version_84_response_bit_request.bin",
            "bad_version_84_response_bit_response.bin",
            V4, // unused: refused for its direction bit
            Opcode::OPTIONS,
            V5,
            7,
            code::PROTOCOL_ERROR,
            "Wrong protocol direction (expected REQUEST, got RESPONSE) for opcode 5 (OPTIONS)",
        ),
    ];
    for (req, resp, req_version, opcode, resp_version, resp_stream, err_code, message) in cases {
        if !req.starts_with("bad_version_45") && !req.starts_with("bad_version_84") {
            let d = envelope(req, REQ);
            d.expect(req_version, 0, 7, opcode);
            if opcode == Opcode::QUERY {
                assert_eq!(query(&d).query, b"SELECT key FROM system.local");
            } else {
                assert!(d.body.is_empty());
            }
            assert_eq!(opcode.name() == "UNKNOWN", opcode == Opcode(0xff));
        }
        let e = envelope(resp, RESP);
        e.expect(resp_version, 0, resp_stream, Opcode::ERROR);
        let err = error(&e);
        assert_eq!(err.code, err_code, "{resp}");
        assert!(err.message.starts_with(message), "{resp}: {}", err.message);
    }
}

/// The server answers a version it cannot speak in a version this codec does not speak either.
#[test]
fn bad_version_answers_in_other_versions() {
    // v2: an 8-byte header (one-byte stream) that the v3+ decoder refuses.
    let raw = read("bad_version_02_response.bin");
    assert_eq!(
        refused("bad_version_02_response.bin"),
        EnvelopeError::UnsupportedVersion {
            byte: 0x82,
            version: 2,
            stream: 0
        }
    );
    assert_eq!(raw[3], Opcode::ERROR.0);
    assert_eq!(
        u32::from_be_bytes(raw[4..8].try_into().unwrap()) as usize,
        raw.len() - 8
    );
    let err = ErrorView::parse(&raw[8..], V4).unwrap();
    assert_eq!(err.code, code::PROTOCOL_ERROR);
    assert!(err
        .message
        .starts_with("Invalid or unsupported protocol version (2)"));

    // v6 beta: the normal 9-byte header with version 0x86 and the beta flag.
    let raw = read("bad_version_06_no_beta_response.bin");
    assert_eq!(
        refused("bad_version_06_no_beta_response.bin"),
        EnvelopeError::UnsupportedVersion {
            byte: 0x86,
            version: 6,
            stream: 0
        }
    );
    assert_eq!((raw[1], raw[4]), (Flags::USE_BETA, Opcode::ERROR.0));
    let err = ErrorView::parse(&raw[HEADER_LEN..], V5).unwrap();
    assert_eq!(err.code, code::PROTOCOL_ERROR);
    assert_eq!(
        err.message,
        "Beta version of the protocol used (6/v6-beta), but USE_BETA flag is unset"
    );

    let raw = read("bad_version_06_beta_response.bin");
    assert_eq!(
        refused("bad_version_06_beta_response.bin"),
        EnvelopeError::UnsupportedVersion {
            byte: 0x86,
            version: 6,
            stream: 0
        }
    );
    assert_eq!((raw[1], raw[4]), (Flags::USE_BETA, Opcode::SUPPORTED.0));
    let opts = supported(&raw[HEADER_LEN..]);
    assert_eq!(
        opts["PROTOCOL_VERSIONS"],
        ["3/v3", "4/v4", "5/v5", "6/v6-beta"]
    );
    // The same SUPPORTED body as on v4 and v5.
    assert_eq!(raw[HEADER_LEN..], read("v4_supported.bin")[HEADER_LEN..]);
}

/// The number after `label` in a server message, e.g. `Computed 12699812`.
fn number_after(message: &str, label: &str) -> i64 {
    let rest = &message[message.find(label).unwrap() + label.len()..];
    let digits: String = rest
        .chars()
        .take_while(|c| *c == '-' || c.is_ascii_digit())
        .collect();
    digits.parse().unwrap()
}

/// The code and message of the server's ERROR for a bad v5 segment, in a segment of its own.
fn v5_error(name: &str) -> (i32, String) {
    let d = single_segment(name, false, RESP);
    d.expect(V5, 0, 0, Opcode::ERROR);
    let err = error(&d);
    (err.code, err.message.to_owned())
}

#[test]
fn bad_v5_segments() {
    // A header CRC24 that does not match.
    let name = "bad_v5_segment_header_crc_request.bin";
    let mut buf = BytesMut::from(&read(name)[..]);
    let err = SegmentDecoder::new(false).decode(&mut buf).unwrap_err();
    assert_eq!(err, SegmentError::HeaderCrc);
    let (err_code, message) = v5_error("bad_v5_segment_header_crc_response.bin");
    assert_eq!(err_code, code::PROTOCOL_ERROR);
    assert!(message.contains("unrecoverable CRC mismatch detected in frame header"));
    // The server's CRC24 of the header is ours: 9 bytes of payload, self-contained.
    let raw = read(name);
    assert_eq!(raw[..3], [9, 0, 2]);
    assert_eq!(
        i64::from(crc24(9 | 1 << 17, 3)),
        number_after(&message, "Computed ")
    );
    let sent = u32::from_le_bytes([raw[3], raw[4], raw[5], 0]);
    assert_eq!(i64::from(sent), number_after(&message, "Read "));

    // A payload CRC32 that does not match.
    let name = "bad_v5_segment_payload_crc_request.bin";
    let raw = read(name);
    let mut buf = BytesMut::from(&raw[..]);
    assert_eq!(
        SegmentDecoder::new(false).decode(&mut buf).unwrap_err(),
        SegmentError::PayloadCrc
    );
    let (err_code, message) = v5_error("bad_v5_segment_payload_crc_response.bin");
    assert_eq!(err_code, code::PROTOCOL_ERROR);
    assert!(message.contains("unrecoverable CRC mismatch detected in frame body"));
    // Java prints the CRC32 as a signed int.
    let payload = &raw[6..15];
    assert_eq!(
        i64::from(crc32(payload) as i32),
        number_after(&message, "Computed ")
    );
    let sent = i32::from_le_bytes(raw[15..19].try_into().unwrap());
    assert_eq!(i64::from(sent), number_after(&message, "Read "));

    // A bare envelope where a segment was due: its first bytes read as a header with a bad CRC.
    let name = "bad_v5_unframed_after_ready_request.bin";
    let raw = read(name);
    let env = envelope(name, REQ);
    env.expect(V5, 0, 7, Opcode::OPTIONS);
    let mut buf = BytesMut::from(&raw[..]);
    assert_eq!(
        SegmentDecoder::new(false).decode(&mut buf).unwrap_err(),
        SegmentError::HeaderCrc
    );
    let (err_code, message) = v5_error("bad_v5_unframed_after_ready_response.bin");
    assert_eq!(err_code, code::PROTOCOL_ERROR);
    assert_eq!(
        i64::from(crc24(0x05, 3)),
        number_after(&message, "Computed ")
    );
    assert_eq!(
        i64::from(u32::from_le_bytes([raw[3], raw[4], raw[5], 0])),
        number_after(&message, "Read ")
    );

    // A good segment around an envelope header claiming 2 GiB: the envelope layer refuses it.
    let name = "bad_v5_envelope_length_7fffffff_request.bin";
    let seg = segment(name, false);
    assert!(seg.self_contained);
    assert_eq!(seg.payload.len(), HEADER_LEN);
    let mut buf = BytesMut::from(&read(name)[..]);
    let mut d = FramedDecoder::new(
        SegmentDecoder::new(false),
        EnvelopeDecoder::new(REQ, DEFAULT_MAX_BODY_LEN),
    );
    assert_eq!(
        d.decode(&mut buf).unwrap_err(),
        SegmentError::Envelope(EnvelopeError::BodyTooLong {
            length: 0x7fff_ffff,
            max: DEFAULT_MAX_BODY_LEN,
            stream: 7,
            version: V5
        })
    );
    let (err_code, message) = v5_error("bad_v5_envelope_length_7fffffff_response.bin");
    assert_eq!(err_code, code::SERVER_ERROR);
    assert_eq!(
        message,
        "java.lang.IllegalArgumentException: newPosition < 0: (-2147483634 < 0)"
    );
}
