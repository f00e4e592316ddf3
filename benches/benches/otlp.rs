//! The trace exporter's encoding of a batch of 512 sampled spans (a rewritten SELECT's, with
//! a client's parent, routed to a replica) into one OTLP request: what each span costs the
//! exporter's thread besides the transport (issue 29's 1 % budget).

use autoprep::control::Group;
use autoprep::otel::otlp::Encoder;
use autoprep::otel::{Facts, SampledBy, SpanRecord};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

fn batch(c: &mut Criterion) {
    let shapes = autoprep::shapes::Shapes::new(4);
    let shape = shapes.enter(
        autoprep_cache::ShapeHash(1),
        Some("shop"),
        "SELECT id, total FROM shop.orders WHERE id = ?",
    );
    let record = SpanRecord {
        trace_id: [7; 16],
        span_id: [9; 8],
        start: autoprep::stamp::Stamp::now(),
        end: autoprep::stamp::Stamp::now(),
        facts: Facts {
            opcode: 0x07,
            parent: autoprep::trace_context::TraceParent::parse(
                b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
            consistency: Some(0x0006),
            page_size: Some(5000),
            keyspace: Some("shop".into()),
            rewrite: Some("rewritten"),
            routing: Some("replica"),
            ..Facts::default()
        },
        shape: Some(shape),
        group: Group::Rewritten,
        error: None,
        server: Some("10.0.0.7:9042".parse().unwrap()),
        sampled_by: SampledBy::Head,
    };
    let batch = vec![record; 512];
    let mut encoder = Encoder::new(&autoprep::otel::export::resource());
    let mut g = c.benchmark_group("otlp");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.throughput(Throughput::Elements(batch.len() as u64));
    g.bench_function("encode_512_spans", |b| b.iter(|| encoder.request(&batch)));
    g.finish();
}

criterion_group!(benches, batch);
criterion_main!(benches);
