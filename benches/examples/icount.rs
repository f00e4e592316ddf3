//! Deterministic cost of the rewrite hot path, for valgrind: `icount CASE N` runs one case N
//! times. Run it twice (N and 2N) under `valgrind --tool=callgrind` (instructions) or
//! `--tool=dhat` (allocations) and divide the difference by N: start-up cost cancels out.
//! `scripts/icount.sh` does exactly that for every case.
//!
//! Cases: `normalize_150b`, `normalize_1k`, `encode_row`, `hit_path` (the same inputs as the
//! criterion benches `normalize`, `encode` and `rewrite`), `normalize_150b_reused` and
//! `normalize_1k_reused` (into the buffers of the previous shape, as the proxy does), and
//! `lex_150b` (tokens only).

use autoprep::rewrite::Decision;
use autoprep_benches::fixtures::{self, statement_1k, INSERT_150};
use autoprep_protocol::cql::normalize::{
    normalize, normalize_with, recycle_slots, Normalized, Slot,
};
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

/// As the proxy normalizes: into the buffers of the previous shape.
fn run_normalize_reused(q: &str, n: usize) {
    let mut text = String::new();
    let mut slots: Vec<Slot<'static>> = Vec::new();
    for _ in 0..n {
        let r = normalize_with(black_box(q.as_bytes()), text, slots);
        let Ok(Normalized::Shape(s)) = r else {
            panic!("not a shape")
        };
        black_box(&s);
        text = s.text;
        slots = recycle_slots(s.slots);
    }
}

fn run_lex(q: &str, n: usize) {
    let mut toks = Vec::with_capacity(512);
    for _ in 0..n {
        toks.clear();
        autoprep_protocol::cql::lexer::tokenize_into(black_box(q), &mut toks).unwrap();
        black_box(toks.len());
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
    let (rw, header, body) = fixtures::hit_path();
    let mut scratch = autoprep::rewrite::Scratch::default();
    for _ in 0..n {
        let d = fixtures::hit(&rw, &header, black_box(&body), &mut scratch);
        assert!(matches!(d, Decision::Execute { .. }));
        black_box(d);
    }
}

/// `icount time CASE...`: wall-clock nanoseconds per operation (minimum, 10th percentile and
/// median of 300 samples), a quick check on a shared machine where the minimum is the least
/// disturbed figure; criterion remains the reference.
fn time(case: &str) {
    let per = 2000;
    let mut samples: Vec<f64> = (0..300)
        .map(|_| {
            let t = Instant::now();
            run(case, per);
            t.elapsed().as_nanos() as f64 / per as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    println!(
        "{case}: min {:.0} ns, p10 {:.0} ns, median {:.0} ns",
        samples[0], samples[30], samples[150]
    );
}

fn run(case: &str, n: usize) {
    match case {
        "normalize_150b" => run_normalize(INSERT_150, n),
        "normalize_1k" => run_normalize(&statement_1k(), n),
        "normalize_150b_reused" => run_normalize_reused(INSERT_150, n),
        "normalize_1k_reused" => run_normalize_reused(&statement_1k(), n),
        "encode_row" => run_encode(n),
        "hit_path" => run_hit_path(n),
        "lex_150b" => run_lex(INSERT_150, n),
        _ => panic!("unknown case {case}"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    if case == "time" {
        for c in args {
            time(&c);
        }
        return;
    }
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    match case.as_str() {
        "normalize_150b"
        | "normalize_1k"
        | "normalize_150b_reused"
        | "normalize_1k_reused"
        | "lex_150b"
        | "encode_row"
        | "hit_path" => run(&case, n),
        _ => {
            eprintln!(
                "usage: icount normalize_150b|normalize_1k|normalize_150b_reused|normalize_1k_reused|\
                 encode_row|hit_path|lex_150b [N]\n       \
                 icount time CASE..."
            );
            std::process::exit(2);
        }
    }
}
