//! Lexing and normalizing QUERY texts: the per-request cost of deciding what to bind.
//!
//! Targets (issue 3): a 5-column INSERT of about 150 bytes in 300 ns or less, a 1 KB statement
//! in 2 µs or less. `normalize` allocates the shape's buffers afresh each time; `normalize_with`
//! reuses them, as the proxy's per-connection scratch does. `normalize+hash` adds the cache's
//! map key, `normalize+fingerprint` the MD5 fingerprint.

use autoprep_benches::fixtures::{statement_1k, INSERT_150};
use autoprep_protocol::cql::lexer::tokenize_into;
use autoprep_protocol::cql::normalize::{
    normalize, normalize_with, recycle_slots, Normalized, Slot,
};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SELECT_IN: &str = "SELECT sensor_id, ts, temperature FROM metrics.sensor_data \
     WHERE sensor_id IN ('s-1', 's-2', 's-3', 's-4') AND ts >= '2026-01-01' AND ts < '2026-01-02' LIMIT 100";

fn bench(c: &mut Criterion) {
    let big = statement_1k();
    let cases: [(&str, &str); 3] = [
        ("insert_150b", INSERT_150),
        ("select_in", SELECT_IN),
        ("stmt_1k", &big),
    ];
    for (name, q) in cases {
        assert!(
            matches!(normalize(q.as_bytes()), Ok(Normalized::Shape(_))),
            "{name}"
        );
    }

    let mut g = c.benchmark_group("lex");
    for (name, q) in cases {
        g.throughput(Throughput::Bytes(q.len() as u64));
        // As `normalize` lexes: UTF-8 check, then tokens into a reused vector.
        let mut toks = Vec::with_capacity(512);
        g.bench_function(format!("{name}/{}B", q.len()), |b| {
            b.iter(|| {
                toks.clear();
                let src = std::str::from_utf8(black_box(q.as_bytes())).ok()?;
                tokenize_into(src, &mut toks).ok()
            })
        });
    }
    g.finish();

    each(c, "normalize", &cases, |q| {
        normalize(black_box(q.as_bytes())).ok()
    });

    let mut g = c.benchmark_group("normalize_with");
    for (name, q) in cases {
        g.throughput(Throughput::Bytes(q.len() as u64));
        let mut text = String::new();
        let mut slots: Vec<Slot<'static>> = Vec::new();
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{name}/{}B", q.len())),
            q,
            |b, q| {
                b.iter(|| {
                    let buffers = (std::mem::take(&mut text), std::mem::take(&mut slots));
                    if let Ok(Normalized::Shape(s)) =
                        normalize_with(black_box(q.as_bytes()), buffers.0, buffers.1)
                    {
                        text = s.text;
                        slots = recycle_slots(s.slots);
                    }
                })
            },
        );
    }
    g.finish();

    each(c, "normalize+hash", &cases, |q| {
        match normalize(black_box(q.as_bytes())) {
            Ok(Normalized::Shape(s)) => Some(s.hash(Some("metrics"))),
            _ => None,
        }
    });
    each(c, "normalize+fingerprint", &cases, |q| {
        match normalize(black_box(q.as_bytes())) {
            Ok(Normalized::Shape(s)) => Some(s.fingerprint(Some("metrics"))),
            _ => None,
        }
    });
}

/// One benchmark group running `f` on every case.
fn each<'a, R>(
    c: &mut Criterion,
    group: &str,
    cases: &[(&str, &'a str)],
    f: impl Fn(&'a str) -> R,
) {
    let mut g = c.benchmark_group(group);
    for &(name, q) in cases {
        g.throughput(Throughput::Bytes(q.len() as u64));
        g.bench_function(
            BenchmarkId::from_parameter(format!("{name}/{}B", q.len())),
            |b| b.iter(|| f(q)),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
