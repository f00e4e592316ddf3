//! The whole cache-hit path of the rewrite: normalize a 5-column INSERT QUERY, look the shape
//! up in the shared cache, encode the literals for the prepared types, build the EXECUTE.

use autoprep::rewrite::Decision;
use autoprep_benches::fixtures;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

fn hit_path(c: &mut Criterion) {
    let (rw, header, body) = fixtures::hit_path();
    let mut scratch = autoprep::rewrite::Scratch::default();
    let mut g = c.benchmark_group("rewrite");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("cache_hit_5_column_insert", |b| {
        b.iter(|| {
            let d = fixtures::hit(&rw, &header, &body, &mut scratch);
            assert!(matches!(d, Decision::Execute { .. }));
            d
        })
    });
    g.finish();
}

criterion_group!(benches, hit_path);
criterion_main!(benches);
