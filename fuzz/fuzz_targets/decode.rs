//! Feeds arbitrary bytes to every decoder of autoprep-protocol: envelopes in both directions,
//! v5 segments (plain and LZ4) with reassembly, v4 decompression, and each message view for
//! v3, v4 and v5, walking every row, column, type and value to the end.
//!
//! A run of envelopes taken at once (`EnvelopeDecoder::take_run`) must be what decoding them
//! one by one gives.
//!
//! Nothing may panic, hang or allocate without bound. Beyond that, decoded envelopes must
//! rebuild to their bytes and requests re-encoded from their views must parse back to the
//! same encoding (an encoder may normalise flags, so the check is encode(parse(encode(x)))
//! == encode(x), not byte equality with the input).
#![no_main]

use autoprep_protocol::compression::{decompress, Compression};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::message::batch::{encode_batch, BatchChild, BatchView};
use autoprep_protocol::message::error::ErrorView;
use autoprep_protocol::message::event::EventView;
use autoprep_protocol::message::execute::{encode_execute, ExecuteView};
use autoprep_protocol::message::prepare::{encode_prepare, PrepareView};
use autoprep_protocol::message::query::{encode_query, QueryParams, QueryView};
use autoprep_protocol::message::result::{ColumnSpecs, ResultView, RowsMetadata};
use autoprep_protocol::message::startup::StartupView;
use autoprep_protocol::message::supported::for_each_option;
use autoprep_protocol::message::{RequestBody, ResponseBody};
use autoprep_protocol::primitives::StringList;
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

/// Small limits keep each run fast; the checks against them are what is being exercised.
const MAX_BODY: usize = 1 << 20;

const VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V3,
    ProtocolVersion::V4,
    ProtocolVersion::V5,
];

fuzz_target!(|data: &[u8]| {
    for dir in [Direction::Request, Direction::Response] {
        envelopes(data, dir);
        for lz4 in [false, true] {
            segments(data, dir, lz4);
        }
    }
    for alg in [Compression::Lz4, Compression::Snappy] {
        if let Ok(plain) = decompress(alg, data, MAX_BODY) {
            all_views(&plain);
        }
    }
    all_views(data);
});

/// Splits envelopes off `data` and parses each body as its header says.
fn envelopes(data: &[u8], dir: Direction) {
    let decoder = EnvelopeDecoder::new(dir, MAX_BODY);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(env)) = decoder.decode(&mut buf) {
        envelope(&env);
    }
    runs(data, &decoder);
}

/// A run taken off `data` (every envelope whose opcode is even, restreamed) is what decoding
/// envelope by envelope gives, up to the first one refused.
fn runs(data: &[u8], decoder: &EnvelopeDecoder) {
    let accept = |h: &Header| (h.opcode.0 % 2 == 0).then(|| StreamId(h.stream.0 ^ 1));
    let mut buf = BytesMut::from(data);
    let run = decoder.take_run(&mut buf, accept).unwrap_or_default();
    let mut each = BytesMut::from(data);
    let mut expected = Vec::new();
    while expected.len() < run.len() {
        let mut env = decoder
            .decode(&mut each)
            .expect("an envelope of a run decodes")
            .expect("an envelope of a run is whole");
        let stream = accept(env.header()).expect("an envelope of a run was accepted");
        env.set_stream(stream);
        expected.extend_from_slice(env.as_bytes());
    }
    assert_eq!(&run[..], &expected[..], "a run is its envelopes restreamed");
    assert_eq!(&buf[..], &each[..], "a run leaves the rest");
}

/// Reads segments off `data`, reassembling envelopes, and parses each one.
fn segments(data: &[u8], dir: Direction, lz4: bool) {
    let mut d = FramedDecoder::new(
        SegmentDecoder::new(lz4),
        EnvelopeDecoder::new(dir, MAX_BODY),
    );
    let mut buf = BytesMut::from(data);
    while let Ok(Some(env)) = d.decode(&mut buf) {
        envelope(&env);
    }
}

fn envelope(env: &Envelope) {
    let h = *env.header();
    let rebuilt = Envelope::new(h, env.body());
    assert_eq!(rebuilt.as_bytes(), env.as_bytes(), "envelope rebuild");
    let mut patched = env.clone();
    patched.set_stream(StreamId(-2));
    assert_eq!(patched.as_bytes()[4..], env.as_bytes()[4..]);
    if h.flags.has(Flags::COMPRESSION) {
        for alg in [Compression::Lz4, Compression::Snappy] {
            if let Ok(plain) = decompress(alg, env.body(), MAX_BODY) {
                message(&h, &plain);
            }
        }
    } else {
        message(&h, env.body());
    }
}

/// Parses a body the way the proxy would: prefix first, then the view for the opcode.
fn message(h: &Header, body: &[u8]) {
    let v = h.version;
    match h.direction {
        Direction::Request => {
            let Ok(rb) = RequestBody::parse(h, body) else {
                return;
            };
            let m = rb.message;
            match h.opcode {
                Opcode::QUERY => query(m, v),
                Opcode::PREPARE => prepare(m, v),
                Opcode::EXECUTE => execute(m, v),
                Opcode::BATCH => batch(m, v),
                Opcode::STARTUP => {
                    if let Ok(s) = StartupView::parse(m) {
                        let _ = s.compression();
                    }
                }
                Opcode::REGISTER => string_list(m),
                _ => {}
            }
        }
        Direction::Response => {
            let Ok(rb) = ResponseBody::parse(h, body) else {
                return;
            };
            if let Some(w) = rb.warnings {
                for s in w {
                    if s.is_err() {
                        break;
                    }
                }
            }
            let m = rb.message;
            match h.opcode {
                Opcode::RESULT => result(m, v),
                Opcode::ERROR => error(m, v),
                Opcode::EVENT => event(m),
                Opcode::SUPPORTED => supported(m),
                _ => {}
            }
        }
    }
}

/// Every view on the raw bytes, for every version and every body prefix.
fn all_views(data: &[u8]) {
    for v in VERSIONS {
        query(data, v);
        prepare(data, v);
        execute(data, v);
        batch(data, v);
        result(data, v);
        error(data, v);
        let mut b = data;
        if let Ok(m) = RowsMetadata::read(&mut b) {
            rows_metadata(&m);
        }
    }
    event(data);
    supported(data);
    string_list(data);
    if let Ok(s) = StartupView::parse(data) {
        let _ = s.compression();
    }
    let flags = data.first().copied().unwrap_or(0);
    for direction in [Direction::Request, Direction::Response] {
        let h = Header {
            version: ProtocolVersion::V4,
            direction,
            flags: Flags(flags),
            stream: StreamId(0),
            opcode: Opcode(data.get(1).copied().unwrap_or(0)),
            length: data.len().saturating_sub(2),
        };
        message(&h, data.get(2..).unwrap_or_default());
    }
}

fn query(m: &[u8], v: ProtocolVersion) {
    let Ok(q) = QueryView::parse(m, v) else {
        return;
    };
    params(&q.params);
    let mut once = Vec::new();
    encode_query(v, q.query, &q.params, &mut once).expect("re-encode a parsed QUERY");
    let back = QueryView::parse(&once, v).expect("parse a re-encoded QUERY");
    let mut twice = Vec::new();
    encode_query(v, back.query, &back.params, &mut twice).unwrap();
    assert_eq!(once, twice, "QUERY encoding is stable");
}

fn params(p: &QueryParams<'_>) {
    if let Some(values) = p.values {
        for item in values.iter() {
            if item.is_err() {
                break;
            }
        }
    }
}

fn prepare(m: &[u8], v: ProtocolVersion) {
    let Ok(p) = PrepareView::parse(m, v) else {
        return;
    };
    let mut once = Vec::new();
    encode_prepare(v, p.query, p.keyspace, &mut once).expect("re-encode a parsed PREPARE");
    let back = PrepareView::parse(&once, v).expect("parse a re-encoded PREPARE");
    assert_eq!(back.query, p.query);
    // Only v5 carries a keyspace.
    assert_eq!(
        back.keyspace,
        p.keyspace.filter(|_| v >= ProtocolVersion::V5)
    );
}

fn execute(m: &[u8], v: ProtocolVersion) {
    let Ok(e) = ExecuteView::parse(m, v) else {
        return;
    };
    params(&e.params);
    let rmid = e.result_metadata_id.unwrap_or_default();
    let mut once = Vec::new();
    encode_execute(v, e.id, rmid, &e.params, &mut once).expect("re-encode a parsed EXECUTE");
    let back = ExecuteView::parse(&once, v).expect("parse a re-encoded EXECUTE");
    assert_eq!(
        (back.id, back.result_metadata_id),
        (e.id, e.result_metadata_id)
    );
    let mut twice = Vec::new();
    let rmid = back.result_metadata_id.unwrap_or_default();
    encode_execute(v, back.id, rmid, &back.params, &mut twice).unwrap();
    assert_eq!(once, twice, "EXECUTE encoding is stable");
}

fn batch(m: &[u8], v: ProtocolVersion) {
    let Ok(b) = BatchView::parse(m, v) else {
        return;
    };
    let mut children: Vec<BatchChild<'_>> = Vec::new();
    for c in b.children() {
        match c {
            Ok(c) => {
                for item in c.values.iter() {
                    if item.is_err() {
                        break;
                    }
                }
                children.push(c);
            }
            // Parsing walked every child already, so iterating them again cannot fail.
            Err(e) => panic!("child of a parsed BATCH: {e}"),
        }
    }
    let mut once = Vec::new();
    encode_batch(v, b.batch_type, &children, &b.params, &mut once)
        .expect("re-encode a parsed BATCH");
    let back = BatchView::parse(&once, v).expect("parse a re-encoded BATCH");
    assert_eq!(back.count, b.count);
    let again: Vec<_> = back.children().map(|c| c.unwrap()).collect();
    assert_eq!(again, children);
}

fn result(m: &[u8], v: ProtocolVersion) {
    let Ok(r) = ResultView::parse(m, v) else {
        return;
    };
    let _ = r.kind();
    match r {
        ResultView::Rows(rows) => {
            rows_metadata(&rows.metadata);
            // The row count was checked against the body, so walking every row is bounded
            // by the input; rows() ends at its first error.
            let mut seen = 0usize;
            let mut failed = false;
            for row in rows.rows() {
                assert!(!failed, "a row after an error");
                seen += 1;
                match row {
                    Ok(cells) => {
                        assert_eq!(cells.len(), rows.metadata.column_count as usize);
                        for c in cells {
                            let _ = c.map(<[u8]>::len);
                        }
                    }
                    Err(_) => failed = true,
                }
            }
            assert!(failed || seen == rows.row_count as usize);
        }
        ResultView::Prepared(p) => {
            let _ = p.id;
            let _ = p.result_metadata_id;
            let _ = p.bind.pk_indexes().count();
            column_specs(&p.bind.columns);
            rows_metadata(&p.result);
        }
        ResultView::SchemaChange(c) => {
            if let Some(args) = c.arguments {
                string_list_items(args);
            }
        }
        ResultView::Void | ResultView::SetKeyspace(_) => {}
    }
}

fn rows_metadata(m: &RowsMetadata<'_>) {
    if let Some(specs) = m.columns {
        column_specs(&specs);
    }
}

fn column_specs(specs: &ColumnSpecs<'_>) {
    let mut n = 0;
    for spec in specs.iter() {
        let _ = spec.column_type();
        n += 1;
    }
    // The specs were validated when the view was built: all of them iterate.
    assert_eq!(n, specs.len());
}

fn error(m: &[u8], v: ProtocolVersion) {
    if let Ok(e) = ErrorView::parse(m, v) {
        if let autoprep_protocol::message::error::ErrorDetail::FunctionFailure {
            arg_types, ..
        } = e.detail
        {
            string_list_items(arg_types);
        }
    }
}

fn event(m: &[u8]) {
    if let Ok(EventView::SchemaChange(c)) = EventView::parse(m) {
        if let Some(args) = c.arguments {
            string_list_items(args);
        }
    }
}

fn supported(m: &[u8]) {
    let _ = for_each_option(m, |_, list| {
        let _ = list.next();
    });
}

fn string_list(m: &[u8]) {
    let mut b = m;
    if let Ok(list) = StringList::read(&mut b) {
        string_list_items(list);
    }
}

fn string_list_items(list: StringList<'_>) {
    for item in list {
        // The list was validated when read: every item is a string.
        item.expect("item of a read string list");
    }
}
