//! Inputs shared by the criterion benches and the instruction-count example, so that both
//! measure exactly the same work.

use autoprep::cluster::ClusterView;
use autoprep::config::Config;
use autoprep::rewrite::{decide, ConnKeyspace, Decision, Rewriter, Scratch, NODE};
use autoprep_cache::PreparedEntry;
use autoprep_protocol::cql::normalize::{normalize, Normalized};
use autoprep_protocol::envelope::{Direction, Flags, Header, Opcode, ProtocolVersion, StreamId};
use autoprep_protocol::message::query::{encode_query, QueryParams, QueryRequest};
use autoprep_protocol::types::ColumnType;
use bytes::Bytes;
use std::time::Instant;

/// A 5-column time-series INSERT of about 150 bytes (the normalize budget's statement).
pub const INSERT_150: &str =
    "INSERT INTO metrics.sensor_data (sensor_id, ts, temperature, humidity, status) \
     VALUES ('sensor-0017', '2026-01-02 03:04:05+0000', 21.5, 48, 'ok')";

/// The 5-column INSERT (text, timestamp, double, int, uuid) of the cache-hit budget.
pub const HIT_INSERT: &str = "INSERT INTO metrics.ts (sensor, at, value, status, id) VALUES ('s-17', '2026-01-02 03:04:05+0000', 21.5, 3, 5b6962dd-3f90-4c93-8f61-eabfa4a803e2)";

/// A wide INSERT with mixed literal kinds and a collection, about 1 KB.
pub fn statement_1k() -> String {
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

/// The rewrite's parts, with a cache that already holds [`HIT_INSERT`]'s shape, and the QUERY
/// header and body a client would send for it: the input of the whole cache-hit path (no TLS,
/// topology or contact points needed).
pub fn hit_path() -> (Rewriter, Header, Vec<u8>) {
    let cfg = Config::for_upstream("127.0.0.1:9042");
    let cluster = std::sync::Arc::new(ClusterView::new(false, None));
    let rw = Rewriter::new(&cfg, 1, Default::default(), cluster).expect("rewriter");
    let Ok(Normalized::Shape(shape)) = normalize(HIT_INSERT.as_bytes()) else {
        panic!("not a shape")
    };
    rw.cache.prepared(
        NODE,
        shape.hash(None),
        PreparedEntry {
            text: shape.text.clone(),
            conditional: false,
            repeatable: false,
            fingerprint: shape.fingerprint(None),
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
            tables: Vec::new(),
            prepared_message: bytes::Bytes::new(),
        },
    );
    let mut body = Vec::new();
    let params = QueryParams {
        consistency: 1,
        ..Default::default()
    };
    encode_query(
        ProtocolVersion::V4,
        HIT_INSERT.as_bytes(),
        &params,
        &mut body,
    )
    .expect("encode query");
    let header = Header {
        version: ProtocolVersion::V4,
        direction: Direction::Request,
        flags: Flags(0),
        stream: StreamId(1),
        opcode: Opcode::QUERY,
        length: body.len(),
    };
    (rw, header, body)
}

/// One pass of the cache-hit path as the proxy runs it for a QUERY: parse the body, then decide
/// (normalize, look up, encode, build the EXECUTE).
pub fn hit(rw: &Rewriter, header: &Header, body: &[u8], scratch: &mut Scratch) -> Decision {
    let Ok(request) = QueryRequest::parse(header, body) else {
        return Decision::pass("malformed query");
    };
    decide(
        rw,
        NODE,
        header,
        &request,
        ConnKeyspace {
            name: None,
            settled: true,
        },
        Instant::now(),
        scratch,
        &mut None,
    )
}
