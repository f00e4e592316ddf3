//! Literal encoding cost: one time-series row (text, timestamp, double, int, uuid), the values an
//! auto-prepared `INSERT` binds. Target: 200 ns for the whole row.

use autoprep_protocol::cql::Literal;
use autoprep_protocol::types::{encode_literal, ColumnType, EncodeOptions};
use bytes::BytesMut;
use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn row() -> (Vec<Literal<'static>>, Vec<ColumnType>) {
    (
        vec![
            Literal::String("sensor-0017".into()),
            Literal::String("2026-01-02 03:04:05.678+0000".into()),
            Literal::Float("21.5"),
            Literal::Integer("42"),
            Literal::Uuid("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
        ],
        vec![
            ColumnType::Varchar,
            ColumnType::Timestamp,
            ColumnType::Double,
            ColumnType::Int,
            ColumnType::Uuid,
        ],
    )
}

fn bench(c: &mut Criterion) {
    let (lits, types) = row();
    let opts = EncodeOptions::default();
    let mut out = BytesMut::with_capacity(256);
    c.bench_function("encode_time_series_row_5_values", |b| {
        b.iter(|| {
            out.clear();
            for (l, t) in lits.iter().zip(&types) {
                encode_literal(black_box(l), t, &opts, &mut out).unwrap();
            }
            black_box(out.len())
        })
    });
    let mut group = c.benchmark_group("encode_one");
    for (l, t) in lits.iter().zip(&types) {
        group.bench_function(t.cql_name(), |b| {
            b.iter(|| {
                out.clear();
                encode_literal(black_box(l), t, &opts, &mut out).unwrap();
                black_box(out.len())
            })
        });
    }
    group.finish();
    let list: Literal<'static> = Literal::List(
        ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
            .into_iter()
            .map(Literal::Integer)
            .collect(),
    );
    let list_ty = ColumnType::List(Box::new(ColumnType::Int));
    c.bench_function("encode_in_list_10_ints", |b| {
        b.iter(|| {
            out.clear();
            encode_literal(black_box(&list), &list_ty, &opts, &mut out).unwrap();
            black_box(out.len())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
