//! The whole cache-hit path of the rewrite: normalize a 5-column INSERT QUERY, look the shape
//! up in the shared cache, encode the literals for the prepared types, build the EXECUTE.

use autoprep::config::Config;
use autoprep::context::Context;
use autoprep::rewrite::{decide, Decision, NODE};
use autoprep_cache::PreparedEntry;
use autoprep_protocol::cql::normalize::{normalize, Normalized};
use autoprep_protocol::envelope::{Direction, Flags, Header, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::query::{encode_query, QueryParams};
use autoprep_protocol::types::ColumnType;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::{Duration, Instant};

const INSERT: &str = "INSERT INTO metrics.ts (sensor, at, value, status, id) VALUES ('s-17', '2026-01-02 03:04:05+0000', 21.5, 3, 5b6962dd-3f90-4c93-8f61-eabfa4a803e2)";

fn hit_path(c: &mut Criterion) {
    let ctx = Context::new(Config::for_upstream("127.0.0.1:9042")).unwrap();
    let Ok(Normalized::Shape(shape)) = normalize(INSERT.as_bytes()) else {
        panic!("not a shape")
    };
    let fp = shape.fingerprint(None);
    ctx.cache.prepared(
        NODE,
        fp,
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
        INSERT.as_bytes(),
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
    let mut g = c.benchmark_group("rewrite");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("cache_hit_5_column_insert", |b| {
        b.iter(|| {
            let d = decide(
                &ctx,
                &header,
                &body,
                None,
                Instant::now(),
                &mut scratch,
                &mut None,
            );
            assert!(matches!(d, Decision::Execute { .. }));
            d
        })
    });
    g.finish();
}

criterion_group!(benches, hit_path);
criterion_main!(benches);
