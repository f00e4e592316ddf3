//! Deterministic cost of the rewrite hot path, for valgrind: `icount CASE N` runs one case N
//! times. Run it twice (N and 2N) under `valgrind --tool=callgrind` (instructions) or
//! `--tool=dhat` (allocations) and divide the difference by N: start-up cost cancels out.
//! `scripts/icount.sh` does exactly that for every case.
//!
//! Cases: `normalize_150b`, `normalize_1k`, `encode_row`, `hit_path` (the same inputs as the
//! criterion benches `normalize`, `encode` and `rewrite`).

use autoprep::rewrite::{decide, Decision};
use autoprep_benches::fixtures::{self, statement_1k, INSERT_150};
use autoprep_protocol::cql::normalize::{normalize, Normalized};
use autoprep_protocol::cql::Literal;
use autoprep_protocol::types::{encode_literal, ColumnType, EncodeOptions};
use bytes::BytesMut;
use std::hint::black_box;
use std::time::Instant;

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
    let (ctx, header, body) = fixtures::hit_path();
    let mut scratch = Vec::with_capacity(1024);
    for _ in 0..n {
        let d = decide(
            &ctx,
            autoprep::rewrite::NODE,
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
