//! Lexing and normalizing QUERY texts: the per-request cost of deciding what to bind.
//!
//! Targets (issue 3): a 5-column INSERT of about 150 bytes in 300 ns or less, a 1 KB statement
//! in 2 µs or less. `normalize+fingerprint` adds the cache key.

use autoprep_protocol::cql::lexer::tokenize_into;
use autoprep_protocol::cql::normalize::{normalize, Normalized};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const INSERT_150: &str =
    "INSERT INTO metrics.sensor_data (sensor_id, ts, temperature, humidity, status) \
     VALUES ('sensor-0017', '2026-01-02 03:04:05+0000', 21.5, 48, 'ok')";

const SELECT_IN: &str = "SELECT sensor_id, ts, temperature FROM metrics.sensor_data \
     WHERE sensor_id IN ('s-1', 's-2', 's-3', 's-4') AND ts >= '2026-01-01' AND ts < '2026-01-02' LIMIT 100";

fn statement_1k() -> String {
    // A wide INSERT with mixed literal kinds and a collection, about 1 KB.
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

    let mut g = c.benchmark_group("normalize");
    for (name, q) in cases {
        g.throughput(Throughput::Bytes(q.len() as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{name}/{}B", q.len())),
            q,
            |b, q| b.iter(|| normalize(black_box(q.as_bytes()))),
        );
    }
    g.finish();

    let mut g = c.benchmark_group("normalize+fingerprint");
    for (name, q) in cases {
        g.throughput(Throughput::Bytes(q.len() as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{name}/{}B", q.len())),
            q,
            |b, q| {
                b.iter(|| match normalize(black_box(q.as_bytes())) {
                    Ok(Normalized::Shape(s)) => Some(s.fingerprint(Some("metrics"))),
                    _ => None,
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
