//! Deterministic cost of the rewrite hot path, for valgrind: `icount CASE N` runs one case N
//! times. Run it twice (N and 2N) under `valgrind --tool=callgrind` (instructions) or
//! `--tool=dhat` (allocations) and divide the difference by N: start-up cost cancels out.
//! `scripts/icount.sh` does exactly that for every case.
//!
//! Cases: `normalize_150b`, `normalize_1k`, `encode_row`, `hit_path` (the same inputs as the
//! criterion benches `normalize`, `encode` and `rewrite`).

use autoprep::config::Config;
use autoprep::context::Context;
use autoprep::rewrite::{decide, Decision, NODE};
use autoprep_cache::PreparedEntry;
use autoprep_protocol::cql::normalize::{normalize, Normalized};
use autoprep_protocol::cql::Literal;
use autoprep_protocol::envelope::{Direction, Flags, Header, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::query::{encode_query, QueryParams};
use autoprep_protocol::types::{encode_literal, ColumnType, EncodeOptions};
use bytes::{Bytes, BytesMut};
use std::hint::black_box;
use std::time::Instant;

const INSERT_150: &str =
    "INSERT INTO metrics.sensor_data (sensor_id, ts, temperature, humidity, status) \
     VALUES ('sensor-0017', '2026-01-02 03:04:05+0000', 21.5, 48, 'ok')";

const HIT_INSERT: &str = "INSERT INTO metrics.ts (sensor, at, value, status, id) VALUES ('s-17', '2026-01-02 03:04:05+0000', 21.5, 3, 5b6962dd-3f90-4c93-8f61-eabfa4a803e2)";

fn statement_1k() -> String {
    let mut cols = Vec::new();
    let mut vals = Vec::new();
    for i in 0..34 {
        cols.push(format!("col_{i:02}"));
        vals.push(match i % 6 {
            0 => format!("'value number {i} with some text'"),
            1 => format!("{}", 1_000_000 + i * 7919),
            2 => format!("{}.{}e-3", i, i * 13),
            3 => "550e8400-e29b-41d4-a716-446655440000".to_owned(),
            4 => format!("[{i}, {}, {}]", i + 1, i + 2),
            _ => "true".to_owned(),
        });
    }
    format!(
        "INSERT INTO ks.wide_table (id, {}) VALUES ('row-000001', {}) USING TTL 86400",
        cols.join(", "),
        vals.join(", ")
    )
}

fn run_normalize(q: &str, n: usize) {
    for _ in 0..n {
        let r = normalize(black_box(q.as_bytes()));
        assert!(matches!(r, Ok(Normalized::Shape(_))));
        black_box(r).ok();
    }
}

fn run_encode(n: usize) {
    let lits = [
        Literal::String("sensor-0017".into()),
        Literal::String("2026-01-02 03:04:05.678+0000".into()),
        Literal::Float("21.5"),
        Literal::Integer("42"),
        Literal::Uuid("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
    ];
    let types = [
        ColumnType::Varchar,
        ColumnType::Timestamp,
        ColumnType::Double,
        ColumnType::Int,
        ColumnType::Uuid,
    ];
    let opts = EncodeOptions::default();
    let mut out = BytesMut::with_capacity(256);
    for _ in 0..n {
        out.clear();
        for (l, t) in lits.iter().zip(&types) {
            encode_literal(black_box(l), t, &opts, &mut out).unwrap();
        }
        black_box(out.len());
    }
}

fn run_hit_path(n: usize) {
    let ctx = Context::new(Config::for_upstream("127.0.0.1:9042")).unwrap();
    let Ok(Normalized::Shape(shape)) = normalize(HIT_INSERT.as_bytes()) else {
        panic!("not a shape")
    };
    ctx.cache.prepared(
        NODE,
        shape.fingerprint(None),
        PreparedEntry {
            text: shape.text.clone(),
            keyspace: None,
            id: Bytes::from_static(&[7; 16]),
            result_metadata_id: None,
            bind_types: vec![
                ColumnType::Varchar,
                ColumnType::Timestamp,
                ColumnType::Double,
                ColumnType::Int,
                ColumnType::Uuid,
            ],
            pk_indexes: vec![0],
            result_metadata: Bytes::new(),
        },
    );
    let mut body = Vec::new();
    encode_query(
        ProtocolVersion::V4,
        HIT_INSERT.as_bytes(),
        &QueryParams {
            consistency: 1,
            ..Default::default()
        },
        &mut body,
    )
    .unwrap();
    let header = Header {
        version: ProtocolVersion::V4,
        direction: Direction::Request,
        flags: Flags(0),
        stream: StreamId(1),
        opcode: Opcode::QUERY,
        length: body.len(),
    };
    let mut scratch = Vec::with_capacity(1024);
    for _ in 0..n {
        let d = decide(
            &ctx,
            &header,
            black_box(&body),
            None,
            Instant::now(),
            &mut scratch,
            &mut None,
        );
        assert!(matches!(d, Decision::Execute { .. }));
        black_box(d);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    match case.as_str() {
        "normalize_150b" => run_normalize(INSERT_150, n),
        "normalize_1k" => run_normalize(&statement_1k(), n),
        "encode_row" => run_encode(n),
        "hit_path" => run_hit_path(n),
        _ => {
            eprintln!("usage: icount normalize_150b|normalize_1k|encode_row|hit_path [N]");
            std::process::exit(2);
        }
    }
}
