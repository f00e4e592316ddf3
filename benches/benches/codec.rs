//! Codec hot paths: what the proxy does per frame.
//!
//! - a v4 QUERY (a ~150-byte INSERT with consistency ONE and no values): envelope decode,
//!   `QueryView::parse`, `encode_query` into a reused buffer; and the pass-through path
//!   (decode + `set_stream`), and for a read of 64 of them, envelope by envelope or as one
//!   run (`EnvelopeDecoder::take_run`);
//! - the 100-row RESULT captured from Cassandra (`v4_result_rows_hundred.bin`): envelope decode,
//!   `ResultView::parse`, every row and cell walked, the envelope re-encoded; and pass-through;
//! - v5: `FramedDecoder` over a segment carrying that result, and `SegmentEncoder` framing it,
//!   uncompressed and LZ4.
//!
//! Run: `cargo bench -p autoprep-benches --bench codec`. Each bench measures for 3 s.

use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Flags, Header, Opcode, ProtocolVersion, StreamId,
    DEFAULT_MAX_BODY_LEN,
};
use autoprep_protocol::message::query::{encode_query, QueryParams, QueryView};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::ResponseBody;
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder, SegmentEncoder};
use bytes::BytesMut;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

/// The 100-row result of `SELECT id, v FROM autoprep_golden.hundred`, as Cassandra 5.0.6 sent it.
const HUNDRED_ROWS: &[u8] =
    include_bytes!("../../crates/protocol/tests/golden/v4_result_rows_hundred.bin");

const INSERT: &str = "INSERT INTO shop.orders (order_id, customer, total, placed_at) \
                      VALUES (123456, 'alice@example.com', 19.99, '2026-01-02 03:04:05')";

/// A v4 QUERY envelope: the INSERT above at consistency ONE, no values.
fn query_frame() -> Vec<u8> {
    let params = QueryParams {
        consistency: 0x0001,
        ..Default::default()
    };
    let mut body = Vec::new();
    encode_query(ProtocolVersion::V4, INSERT.as_bytes(), &params, &mut body).unwrap();
    let header = Header {
        version: ProtocolVersion::V4,
        direction: Direction::Request,
        flags: Flags(0),
        stream: StreamId(1),
        opcode: Opcode::QUERY,
        length: 0,
    };
    Envelope::new(header, &body).as_bytes().to_vec()
}

/// The 100-row result as a v5 envelope (the Rows message is the same on v4 and v5).
fn hundred_rows_v5() -> Vec<u8> {
    let mut v5 = HUNDRED_ROWS.to_vec();
    v5[0] = 0x85;
    v5
}

fn framed(envelope: &[u8], lz4: bool) -> Vec<u8> {
    let mut out = BytesMut::new();
    let mut enc = SegmentEncoder::new(lz4);
    enc.push(envelope, &mut out);
    enc.finish(&mut out);
    out.to_vec()
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

fn query(c: &mut Criterion) {
    let frame = query_frame();
    let requests = EnvelopeDecoder::new(Direction::Request, DEFAULT_MAX_BODY_LEN);
    let mut g = c.benchmark_group(format!("query_v4_{}B", frame.len()));
    g.throughput(Throughput::Bytes(frame.len() as u64));

    let mut buf = BytesMut::with_capacity(4096);
    let mut out = Vec::with_capacity(256);
    g.bench_function("decode_parse_encode", |b| {
        b.iter(|| {
            buf.extend_from_slice(black_box(&frame));
            let env = requests.decode(&mut buf).unwrap().unwrap();
            let v = env.header().version;
            let q = QueryView::parse(env.body(), v).unwrap();
            out.clear();
            encode_query(v, q.query, &q.params, &mut out).unwrap();
            black_box(&out);
        })
    });

    g.bench_function("passthrough_decode_set_stream", |b| {
        b.iter(|| {
            buf.extend_from_slice(black_box(&frame));
            let mut env = requests.decode(&mut buf).unwrap().unwrap();
            env.set_stream(StreamId(77));
            black_box(env.as_bytes());
        })
    });
    g.finish();

    // A read bringing 64 such requests, passed through with new stream ids: one envelope at a
    // time (split off, restreamed, joined to what goes out) or as one run.
    let batch: Vec<u8> = frame
        .iter()
        .copied()
        .cycle()
        .take(frame.len() * 64)
        .collect();
    let mut g = c.benchmark_group(format!("query_v4_{}B_x64", frame.len()));
    g.throughput(Throughput::Bytes(batch.len() as u64));
    g.bench_function("passthrough_each", |b| {
        b.iter(|| {
            buf.extend_from_slice(black_box(&batch));
            let mut outgoing = BytesMut::new();
            let mut id = 0;
            while let Some(mut env) = requests.decode(&mut buf).unwrap() {
                env.set_stream(StreamId(id));
                id += 1;
                outgoing.unsplit(env.into_frame());
            }
            black_box(&outgoing);
        })
    });
    g.bench_function("passthrough_run", |b| {
        b.iter(|| {
            buf.extend_from_slice(black_box(&batch));
            let mut id = 0;
            let run = requests.take_run(&mut buf, |_| {
                id += 1;
                Some(StreamId(id))
            });
            black_box(&run);
        })
    });
    g.finish();
}

/// Walks every row and cell, returning the number of cell bytes (so nothing is optimised out).
fn walk_rows(body: &[u8], header: &Header) -> usize {
    let message = ResponseBody::parse(header, body).unwrap().message;
    let ResultView::Rows(rows) = ResultView::parse(message, header.version).unwrap() else {
        panic!("not Rows");
    };
    let mut n = 0;
    for row in rows.rows() {
        for cell in row.unwrap() {
            n += cell.map_or(0, <[u8]>::len);
        }
    }
    n
}

fn result_rows(c: &mut Criterion) {
    let responses = EnvelopeDecoder::new(Direction::Response, DEFAULT_MAX_BODY_LEN);
    let mut g = c.benchmark_group("result_rows_100_v4");
    g.throughput(Throughput::Bytes(HUNDRED_ROWS.len() as u64));

    let mut buf = BytesMut::with_capacity(8192);
    g.bench_function("decode_parse_walk_reencode", |b| {
        b.iter(|| {
            buf.extend_from_slice(black_box(HUNDRED_ROWS));
            let env = responses.decode(&mut buf).unwrap().unwrap();
            let cells = walk_rows(env.body(), env.header());
            let again = Envelope::new(*env.header(), env.body());
            black_box((cells, again.as_bytes()));
        })
    });

    g.bench_function("passthrough_decode_set_stream", |b| {
        b.iter(|| {
            buf.extend_from_slice(black_box(HUNDRED_ROWS));
            let mut env = responses.decode(&mut buf).unwrap().unwrap();
            env.set_stream(StreamId(77));
            black_box(env.as_bytes());
        })
    });
    g.finish();
}

fn v5_segments(c: &mut Criterion) {
    let envelope = hundred_rows_v5();
    let mut g = c.benchmark_group("v5_rows_100");
    g.throughput(Throughput::Bytes(envelope.len() as u64));

    for lz4 in [false, true] {
        let kind = if lz4 { "lz4" } else { "plain" };
        let wire = framed(&envelope, lz4);
        let mut decoder = FramedDecoder::new(
            SegmentDecoder::new(lz4),
            EnvelopeDecoder::new(Direction::Response, DEFAULT_MAX_BODY_LEN),
        );
        let mut buf = BytesMut::with_capacity(8192);
        g.bench_function(format!("framed_decode_{kind}"), |b| {
            b.iter(|| {
                buf.extend_from_slice(black_box(&wire));
                let env = decoder.decode(&mut buf).unwrap().unwrap();
                black_box(env.as_bytes());
            })
        });

        let mut encoder = SegmentEncoder::new(lz4);
        let mut out = BytesMut::with_capacity(8192);
        g.bench_function(format!("segment_encode_{kind}"), |b| {
            b.iter(|| {
                out.clear();
                encoder.push(black_box(&envelope), &mut out);
                encoder.finish(&mut out);
                black_box(&out);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = query, result_rows, v5_segments
}
criterion_main!(benches);
