//! Unit tests of the topology rewriting, on answers built as Cassandra 5.0 and ScyllaDB build
//! them (the integration tests check the real server's).

use super::*;
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::{Direction, StreamId};
use autoprep_protocol::message::result::{kind, metadata_flags};
use autoprep_protocol::primitives::write_string;
use bytes::BufMut;

const MAX: usize = 1 << 20;

fn header(version: ProtocolVersion, flags: u8, opcode: Opcode, direction: Direction) -> Header {
    Header {
        version,
        direction,
        flags: Flags(flags),
        stream: StreamId(3),
        opcode,
        length: 0,
    }
}

/// A response envelope carrying `body`, compressed with `compression` when given (v4).
fn response(
    version: ProtocolVersion,
    compression: Option<Compression>,
    prefix_flags: u8,
    opcode: Opcode,
    body: &[u8],
) -> Envelope {
    let mut flags = prefix_flags;
    let mut bytes = body.to_vec();
    if let Some(c) = compression {
        flags |= Flags::COMPRESSION;
        bytes.clear();
        compression::compress(c, body, &mut bytes);
    }
    Envelope::new(header(version, flags, opcode, Direction::Response), &bytes)
}

/// The plain body of an envelope.
/// The wire of a link that negotiated `compression`.
fn wire(compression: Option<Compression>) -> crate::wire::Wire {
    crate::wire::Wire {
        compression,
        max_frame: MAX,
    }
}

fn body_of(env: &Envelope, compression: Option<Compression>) -> Vec<u8> {
    wire(compression).body(env).unwrap().into_owned()
}

/// system.local's columns in Cassandra 5.0, in the order `SELECT *` returns them.
const LOCAL_COLUMNS: &[(&str, &[u8])] = &[
    ("key", &[0, 0x0D]),
    ("bootstrapped", &[0, 0x0D]),
    ("broadcast_address", INET),
    ("broadcast_port", INT),
    ("cluster_name", &[0, 0x0D]),
    ("cql_version", &[0, 0x0D]),
    ("data_center", &[0, 0x0D]),
    ("gossip_generation", INT),
    ("host_id", UUID),
    ("listen_address", INET),
    ("listen_port", INT),
    ("native_protocol_version", &[0, 0x0D]),
    ("partitioner", &[0, 0x0D]),
    ("rack", &[0, 0x0D]),
    ("release_version", &[0, 0x0D]),
    ("rpc_address", INET),
    ("rpc_port", INT),
    ("schema_version", UUID),
    ("tokens", SET_OF_VARCHAR),
    ("truncated_at", &[0, 0x21, 0, 0x0C, 0, 0x03]),
];

fn set_of(items: &[&str]) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_i32(items.len() as i32);
    for i in items {
        write_bytes(&mut b, Some(i.as_bytes())).unwrap();
    }
    b
}

/// The cells of node 127.0.0.2's system.local row.
fn local_row(tokens: &[&str]) -> Vec<Option<Vec<u8>>> {
    let text = |s: &str| Some(s.as_bytes().to_vec());
    let int = |v: i32| Some(v.to_be_bytes().to_vec());
    vec![
        text("local"),
        text("COMPLETED"),
        Some(vec![127, 0, 0, 2]),
        int(7000),
        text("autoprep-topology"),
        text("3.4.7"),
        text("datacenter1"),
        int(1_795_301_542),
        Some(vec![0xcb; 16]),
        Some(vec![127, 0, 0, 2]),
        int(7000),
        text("5"),
        text("org.apache.cassandra.dht.Murmur3Partitioner"),
        text("rack1"),
        text("5.0.6"),
        Some(vec![127, 0, 0, 2]),
        int(9042),
        Some(vec![0x5c; 16]),
        Some(set_of(tokens)),
        None,
    ]
}

/// A Rows message: global spec `system.<table>`, `columns` (or none with NO_METADATA), an
/// optional paging state, and `rows`.
fn rows_message(
    table: &str,
    columns: Option<&[(&str, &[u8])]>,
    count: usize,
    paging: Option<&[u8]>,
    rows: &[Vec<Option<Vec<u8>>>],
) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_i32(kind::ROWS);
    let mut flags = 0;
    if columns.is_some() {
        flags |= metadata_flags::GLOBAL_TABLES_SPEC;
    } else {
        flags |= metadata_flags::NO_METADATA;
    }
    if paging.is_some() {
        flags |= metadata_flags::HAS_MORE_PAGES;
    }
    b.put_i32(flags);
    b.put_i32(count as i32);
    if let Some(p) = paging {
        write_bytes(&mut b, Some(p)).unwrap();
    }
    if let Some(cols) = columns {
        write_string(&mut b, "system").unwrap();
        write_string(&mut b, table).unwrap();
        for (name, ty) in cols {
            write_string(&mut b, name).unwrap();
            b.put_slice(ty);
        }
    }
    b.put_i32(rows.len() as i32);
    for row in rows {
        for cell in row {
            write_bytes(&mut b, cell.as_deref()).unwrap();
        }
    }
    b
}

fn rows_of(message: &[u8]) -> (RowsMetadata<'_>, Vec<Vec<Option<Vec<u8>>>>) {
    let ResultView::Rows(r) = ResultView::parse(message, ProtocolVersion::V5).unwrap() else {
        panic!("not rows")
    };
    let rows = r
        .rows()
        .map(|row| {
            row.unwrap()
                .into_iter()
                .map(|c| c.map(<[u8]>::to_vec))
                .collect()
        })
        .collect();
    (r.metadata, rows)
}

fn topology() -> Topology {
    let t = Topology::new("10.1.2.3:9043", None).unwrap();
    t.bound("10.1.2.3:9043".parse().unwrap());
    t
}

const FLAVOURS: &[(ProtocolVersion, Option<Compression>)] = &[
    (ProtocolVersion::V4, None),
    (ProtocolVersion::V4, Some(Compression::Lz4)),
    (ProtocolVersion::V4, Some(Compression::Snappy)),
    (ProtocolVersion::V5, None),
];

#[test]
fn system_local_shows_the_advertised_node() {
    let t = topology();
    let adv = *t.advertised().unwrap();
    let tokens = ["-3074457345618258603", "3074457345618258602", "9"];
    let msg = rows_message(
        "local",
        Some(LOCAL_COLUMNS),
        LOCAL_COLUMNS.len(),
        None,
        &[local_row(&tokens)],
    );
    for &(version, compression) in FLAVOURS {
        // Tracing id and a warning in front of the message: both must survive.
        let mut body = vec![0xaa; 16];
        body.put_u16(1);
        write_string(&mut body, "a warning").unwrap();
        let prefix_len = body.len();
        body.extend_from_slice(&msg);
        let env = response(
            version,
            compression,
            Flags::TRACING | Flags::WARNING,
            Opcode::RESULT,
            &body,
        );
        let metrics = Metrics::default();
        let out = t.on_response(
            env,
            &Read::Query(SystemTable::Local),
            None,
            wire(compression),
            &metrics,
        );
        assert_eq!(out.header().flags, Flags(env_flags(compression)));
        assert_eq!(metrics.topology_rewrites.load(Ordering::Relaxed), 1);
        let plain = body_of(&out, compression);
        assert_eq!(plain[..prefix_len], body[..prefix_len]);
        let (meta_out, rows_out) = rows_of(&plain[prefix_len..]);
        let (meta_in, rows_in) = rows_of(&msg);
        assert_eq!(meta_out, meta_in, "metadata unchanged");
        assert_eq!(rows_out.len(), 1);
        let want_changed: &[(&str, Vec<u8>)] = &[
            ("broadcast_address", vec![10, 1, 2, 3]),
            ("listen_address", vec![10, 1, 2, 3]),
            ("rpc_address", vec![10, 1, 2, 3]),
            ("rpc_port", 9043i32.to_be_bytes().to_vec()),
            ("host_id", adv.host_id.to_vec()),
            ("tokens", set_of(&tokens[..1])),
        ];
        for (i, (name, _)) in LOCAL_COLUMNS.iter().enumerate() {
            match want_changed.iter().find(|(n, _)| n == name) {
                Some((_, v)) => assert_eq!(rows_out[0][i].as_ref(), Some(v), "{name}"),
                None => assert_eq!(rows_out[0][i], rows_in[0][i], "{name} unchanged"),
            }
        }
    }
}

fn env_flags(compression: Option<Compression>) -> u8 {
    Flags::TRACING | Flags::WARNING | compression.map_or(0, |_| Flags::COMPRESSION)
}

#[test]
fn system_local_with_a_column_list_and_an_ipv6_advertise_address() {
    let t = Topology::new("[::1]:9043", Some("[fd00::7]:19042")).unwrap();
    let cols: &[(&str, &[u8])] = &[("rpc_address", INET), ("data_center", &[0, 0x0D])];
    let msg = rows_message(
        "local",
        Some(cols),
        2,
        None,
        &[vec![Some(vec![127, 0, 0, 2]), Some(b"dc1".to_vec())]],
    );
    let env = response(ProtocolVersion::V4, None, 0, Opcode::RESULT, &msg);
    let out = t.on_response(
        env,
        &Read::Query(SystemTable::Local),
        None,
        wire(None),
        &Metrics::default(),
    );
    let (_, rows) = rows_of(out.body());
    let want: std::net::Ipv6Addr = "fd00::7".parse().unwrap();
    assert_eq!(
        rows,
        vec![vec![Some(want.octets().to_vec()), Some(b"dc1".to_vec())]]
    );
}

#[test]
fn answers_with_nothing_to_rewrite_are_forwarded_as_they_came() {
    let t = topology();
    let cols: &[(&str, &[u8])] = &[("cluster_name", &[0, 0x0D]), ("partitioner", &[0, 0x0D])];
    let msg = rows_message(
        "local",
        Some(cols),
        2,
        None,
        &[vec![Some(b"c".to_vec()), Some(b"p".to_vec())]],
    );
    let env = response(ProtocolVersion::V4, None, 0, Opcode::RESULT, &msg);
    let metrics = Metrics::default();
    let out = t.on_response(
        env.clone(),
        &Read::Query(SystemTable::Local),
        None,
        wire(None),
        &metrics,
    );
    assert_eq!(out.as_bytes(), env.as_bytes());
    assert_eq!(metrics.topology_rewrites.load(Ordering::Relaxed), 0);
    // An error (peers_v2 on a server without it) passes untouched.
    let mut err = Vec::new();
    err.put_i32(0x2200);
    write_string(&mut err, "unconfigured table peers_v2").unwrap();
    let env = response(ProtocolVersion::V4, None, 0, Opcode::ERROR, &err);
    let out = t.on_response(
        env.clone(),
        &Read::Query(SystemTable::PeersV2),
        None,
        wire(None),
        &metrics,
    );
    assert_eq!(out.as_bytes(), env.as_bytes());
}

#[test]
fn peers_have_no_rows_and_keep_their_metadata_and_paging_state() {
    let t = topology();
    let cols: &[(&str, &[u8])] = &[
        ("peer", INET),
        ("data_center", &[0, 0x0D]),
        ("host_id", UUID),
        ("rpc_address", INET),
        ("tokens", SET_OF_VARCHAR),
    ];
    let row = vec![
        Some(vec![127, 0, 0, 3]),
        Some(b"datacenter1".to_vec()),
        Some(vec![1; 16]),
        Some(vec![127, 0, 0, 3]),
        Some(set_of(&["42"])),
    ];
    for table in [SystemTable::Peers, SystemTable::PeersV2] {
        for &(version, compression) in FLAVOURS {
            let msg = rows_message(
                "peers",
                Some(cols),
                5,
                Some(b"page2"),
                &[row.clone(), row.clone()],
            );
            let env = response(version, compression, 0, Opcode::RESULT, &msg);
            let out = t.on_response(
                env,
                &Read::Query(table),
                None,
                wire(compression),
                &Metrics::default(),
            );
            let plain = body_of(&out, compression);
            assert_eq!(
                plain,
                rows_message("peers", Some(cols), 5, Some(b"page2"), &[])
            );
        }
    }
}

#[test]
fn prepared_topology_reads_are_recognised_when_executed() {
    let t = topology();
    assert!(!t.has_prepared());
    // The PREPARE of `SELECT rpc_address, tokens FROM system.local WHERE key = ?`.
    let q = b"SELECT rpc_address, tokens FROM system.local WHERE key = ?";
    let mut prep = Vec::new();
    write_long_string(&mut prep, q);
    let prep_header = header(ProtocolVersion::V4, 0, Opcode::PREPARE, Direction::Request);
    let read = t.classify(&prep_header, &prep, None).unwrap();
    assert_eq!(read, Read::Prepare(SystemTable::Local));
    // Its answer: id 0xabcd, one bind variable, two result columns.
    let mut ans = Vec::new();
    ans.put_i32(kind::PREPARED);
    ans.put_u16(2);
    ans.put_slice(&[0xab, 0xcd]);
    ans.put_i32(metadata_flags::GLOBAL_TABLES_SPEC);
    ans.put_i32(1);
    ans.put_i32(1);
    ans.put_u16(0);
    write_string(&mut ans, "system").unwrap();
    write_string(&mut ans, "local").unwrap();
    write_string(&mut ans, "key").unwrap();
    ans.put_u16(0x0D);
    ans.put_i32(metadata_flags::GLOBAL_TABLES_SPEC);
    ans.put_i32(2);
    write_string(&mut ans, "system").unwrap();
    write_string(&mut ans, "local").unwrap();
    write_string(&mut ans, "rpc_address").unwrap();
    ans.put_slice(INET);
    write_string(&mut ans, "tokens").unwrap();
    ans.put_slice(SET_OF_VARCHAR);
    let env = response(ProtocolVersion::V4, None, 0, Opcode::RESULT, &ans);
    let out = t.on_response(env.clone(), &read, None, wire(None), &Metrics::default());
    assert_eq!(
        out.as_bytes(),
        env.as_bytes(),
        "a PREPARED answer passes as it is"
    );
    assert!(t.has_prepared());

    // An EXECUTE of that id, with skip_metadata: the answer has no metadata.
    let mut exec = Vec::new();
    exec.put_u16(2);
    exec.put_slice(&[0xab, 0xcd]);
    exec.put_u16(1); // consistency
    exec.put_u8(0x02 | 0x01);
    exec.put_u16(1);
    write_bytes(&mut exec, Some(b"local")).unwrap();
    let exec_header = header(ProtocolVersion::V4, 0, Opcode::EXECUTE, Direction::Request);
    let read = t.classify(&exec_header, &exec, None).unwrap();
    let Read::Execute(p) = &read else {
        panic!("{read:?}")
    };
    assert_eq!(p.table, SystemTable::Local);
    let msg = rows_message(
        "local",
        None,
        2,
        None,
        &[vec![Some(vec![127, 0, 0, 2]), Some(set_of(&["1", "2"]))]],
    );
    let env = response(ProtocolVersion::V4, None, 0, Opcode::RESULT, &msg);
    let out = t.on_response(env, &read, None, wire(None), &Metrics::default());
    let (_, rows) = rows_of(out.body());
    assert_eq!(
        rows,
        vec![vec![Some(vec![10, 1, 2, 3]), Some(set_of(&["1"]))]]
    );

    // Another id is not a topology read.
    exec[2..4].copy_from_slice(&[0xab, 0xce]);
    assert_eq!(t.classify(&exec_header, &exec, None), None);
}

fn write_long_string(out: &mut Vec<u8>, s: &[u8]) {
    out.put_i32(s.len() as i32);
    out.put_slice(s);
}

/// A QUERY body for `q` (consistency ONE, no flags), v4 or v5.
fn query_body(version: ProtocolVersion, q: &str) -> Vec<u8> {
    let mut b = Vec::new();
    write_long_string(&mut b, q.as_bytes());
    b.put_u16(1);
    if version >= ProtocolVersion::V5 {
        b.put_i32(0);
    } else {
        b.put_u8(0);
    }
    b
}

#[test]
fn classifies_the_drivers_topology_queries() {
    let t = topology();
    let h = header(ProtocolVersion::V4, 0, Opcode::QUERY, Direction::Request);
    for (q, want) in [
        // Python driver (and cqlsh, which uses it)
        ("SELECT * FROM system.peers", Some(SystemTable::Peers)),
        ("SELECT * FROM system.local WHERE key='local'", Some(SystemTable::Local)),
        ("SELECT host_id, peer, data_center, rack, rpc_address, rpc_address, release_version, schema_version FROM system.peers", Some(SystemTable::Peers)),
        ("SELECT peer, host_id, rpc_address, schema_version FROM system.peers", Some(SystemTable::Peers)),
        ("SELECT schema_version FROM system.local WHERE key='local'", Some(SystemTable::Local)),
        ("SELECT * FROM system.peers_v2", Some(SystemTable::PeersV2)),
        ("SELECT host_id, peer, peer_port, native_address, native_port, schema_version FROM system.peers_v2", Some(SystemTable::PeersV2)),
        ("select * from system.local where key = 'local'", Some(SystemTable::Local)),
        // Java driver 4
        ("SELECT * FROM system.local", Some(SystemTable::Local)),
        ("SELECT * FROM system.peers WHERE peer = :address", Some(SystemTable::Peers)),
        ("SELECT host_id, schema_version FROM system.peers", Some(SystemTable::Peers)),
        // the scylla crate
        ("select host_id, rpc_address, data_center, rack, tokens from system.local", Some(SystemTable::Local)),
        ("select host_id, rpc_address, data_center, rack, tokens from system.peers", Some(SystemTable::Peers)),
        // the scylla crate against ScyllaDB: a trailing USING TIMEOUT
        ("select host_id, rpc_address, data_center, rack, tokens from system.local USING TIMEOUT 30000ms", Some(SystemTable::Local)),
        // ScyllaDB's client routes
        ("SELECT * FROM system.client_routes", Some(SystemTable::ClientRoutes)),
        ("SELECT connection_id, host_id, address, port FROM system.client_routes WHERE connection_id IN ('a')", Some(SystemTable::ClientRoutes)),
        // not topology
        ("SELECT * FROM ks.local", None),
        ("SELECT * FROM system_schema.tables", None),
        ("SELECT * FROM system.local_things", None),
        ("INSERT INTO ks.t (k, local) VALUES (1, 'peers')", None),
        ("SELECT local FROM ks.peers_by_rack", None),
    ] {
        assert_eq!(t.classify(&h, &query_body(h.version, q), None), want.map(Read::Query), "{q}");
    }
    // Unqualified names read the connection's keyspace; v5 may name one on the QUERY.
    let q = query_body(ProtocolVersion::V4, "SELECT * FROM peers");
    assert_eq!(
        t.classify(&h, &q, Some("system")),
        Some(Read::Query(SystemTable::Peers))
    );
    assert_eq!(t.classify(&h, &q, Some("app")), None);
    assert_eq!(t.classify(&h, &q, None), None);
    let mut v5 = Vec::new();
    write_long_string(&mut v5, b"SELECT * FROM local");
    v5.put_u16(1);
    v5.put_i32(0x80);
    write_string(&mut v5, "system").unwrap();
    let h5 = header(ProtocolVersion::V5, 0, Opcode::QUERY, Direction::Request);
    assert_eq!(
        t.classify(&h5, &v5, Some("app")),
        Some(Read::Query(SystemTable::Local))
    );
    // Other opcodes and malformed bodies are never topology reads.
    let hb = header(ProtocolVersion::V4, 0, Opcode::BATCH, Direction::Request);
    assert_eq!(
        t.classify(
            &hb,
            &query_body(h.version, "SELECT * FROM system.local"),
            None
        ),
        None
    );
    assert_eq!(t.classify(&h, &[0, 0, 0, 50, b'S'], None), None);
}

#[test]
fn host_ids_are_version_3_uuids_of_the_advertised_address() {
    let a = Advertised::new("10.1.2.3:9043".parse().unwrap());
    let b = Advertised::new("10.1.2.3:9043".parse().unwrap());
    let c = Advertised::new("10.1.2.4:9043".parse().unwrap());
    assert_eq!(a, b);
    assert_ne!(a.host_id, c.host_id);
    assert_eq!(a.host_id[6] >> 4, 3, "version 3");
    assert_eq!(a.host_id[8] >> 6, 0b10, "RFC 4122 variant");
}

#[test]
fn advertise_address_rules() {
    // Default: the listen address (the port of the bound listener).
    let t = Topology::new("127.0.0.1:0", None).unwrap();
    assert_eq!(t.advertised(), None);
    t.bound("127.0.0.1:40000".parse().unwrap());
    assert_eq!(
        t.advertised().unwrap().addr,
        "127.0.0.1:40000".parse().unwrap()
    );
    // A wildcard listen address: each connection advertises the address its client reached.
    let t = Topology::new("0.0.0.0:9042", None).unwrap();
    t.bound("0.0.0.0:9042".parse().unwrap());
    assert_eq!(t.advertised(), None);
    let local = "10.9.8.7:9042".parse().unwrap();
    assert_eq!(t.advertised_to(Some(local)), Some(Advertised::new(local)));
    assert_eq!(t.advertised_to(None), None);
    let t = Topology::new("0.0.0.0:9042", Some("10.0.0.5")).unwrap();
    t.bound("0.0.0.0:9042".parse().unwrap());
    assert_eq!(
        t.advertised().unwrap().addr,
        "10.0.0.5:9042".parse().unwrap()
    );
    let t = Topology::new("0.0.0.0:9042", Some("10.0.0.5:19042")).unwrap();
    assert_eq!(
        t.advertised().unwrap().addr,
        "10.0.0.5:19042".parse().unwrap()
    );
    assert!(matches!(
        Topology::new("0.0.0.0:9042", Some("0.0.0.0:1")),
        Err(AdvertiseError::Wildcard(_))
    ));
    for bad in ["pod.local:9042", "10.0.0.5:", "", "10.0.0.5:99999"] {
        assert!(
            matches!(
                Topology::new("127.0.0.1:9042", Some(bad)),
                Err(AdvertiseError::Malformed(_))
            ),
            "{bad}"
        );
    }
}

fn event(kind: &str, rest: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = Vec::new();
    write_string(&mut b, kind).unwrap();
    rest(&mut b);
    b
}

fn inet(b: &mut Vec<u8>, ip: [u8; 4], port: i32) {
    b.put_u8(4);
    b.put_slice(&ip);
    b.put_i32(port);
}

#[test]
fn topology_and_status_events_are_dropped_schema_events_pass() {
    let topo = event("TOPOLOGY_CHANGE", |b| {
        write_string(b, "NEW_NODE").unwrap();
        inet(b, [127, 0, 0, 3], 9042);
    });
    let status = event("STATUS_CHANGE", |b| {
        write_string(b, "DOWN").unwrap();
        inet(b, [127, 0, 0, 3], 9042);
    });
    let schema = event("SCHEMA_CHANGE", |b| {
        for s in ["CREATED", "TABLE", "ks", "t"] {
            write_string(b, s).unwrap();
        }
    });
    // ScyllaDB: the kind, then connection ids and host ids (string lists).
    let routes = event("CLIENT_ROUTES_CHANGE", |b| {
        write_string(b, "UPDATE_NODES").unwrap();
        b.put_u16(0);
        b.put_u16(0);
    });
    for &(version, compression) in FLAVOURS {
        let env = |body: &[u8]| response(version, compression, 0, Opcode::EVENT, body);
        assert!(!keep_event(&env(&routes), wire(compression)));
        assert!(!keep_event(&env(&topo), wire(compression)));
        assert!(!keep_event(&env(&status), wire(compression)));
        assert!(keep_event(&env(&schema), wire(compression)));
    }
    // Garbage passes as the server sent it.
    let garbage = response(ProtocolVersion::V4, None, 0, Opcode::EVENT, &[0xff]);
    assert!(keep_event(&garbage, wire(None)));
}

/// A `[string multimap]` body, entries in the order given.
fn multimap(entries: &[(&str, &[&str])]) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_u16(entries.len() as u16);
    for (k, vs) in entries {
        write_string(&mut b, k).unwrap();
        b.put_u16(vs.len() as u16);
        for v in *vs {
            write_string(&mut b, v).unwrap();
        }
    }
    b
}

/// ScyllaDB's SUPPORTED answer (transport/server.cc `make_supported`, with the extensions of
/// transport/cql_protocol_extension.cc): a std::multimap, so keys come sorted; an extension
/// without parameters has one empty value.
fn scylla_supported() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("COMPRESSION", &["lz4", "snappy"]),
        ("CQL_VERSION", &["3.3.1"]),
        (
            "SCYLLA_FAILURE_REASON_MAP",
            &["REASON_RATE_LIMITED=1", "REASON_LARGE_DATA_REJECTED=2"],
        ),
        (
            "SCYLLA_LWT_ADD_METADATA_MARK",
            &["LWT_OPTIMIZATION_META_BIT_MASK=2147483648"],
        ),
        ("SCYLLA_NR_SHARDS", &["2"]),
        (
            "SCYLLA_PARTITIONER",
            &["org.apache.cassandra.dht.Murmur3Partitioner"],
        ),
        ("SCYLLA_RATE_LIMIT_ERROR", &["ERROR_CODE=61440"]),
        ("SCYLLA_SHARD", &["1"]),
        ("SCYLLA_SHARDING_ALGORITHM", &["biased-token-round-robin"]),
        ("SCYLLA_SHARDING_IGNORE_MSB", &["12"]),
        ("SCYLLA_SHARD_AWARE_PORT", &["19042"]),
        ("SCYLLA_SHARD_AWARE_PORT_SSL", &["19142"]),
        ("SCYLLA_USE_METADATA_ID", &[""]),
        ("TABLETS_ROUTING_V1", &[""]),
        ("TABLETS_ROUTING_V2_EXPERIMENTAL", &[""]),
    ]
}

#[test]
fn scylla_supported_loses_sharding_tablets_and_metadata_id() {
    let full = multimap(&scylla_supported());
    let kept: Vec<_> = scylla_supported()
        .into_iter()
        .filter(|(k, _)| {
            [
                "COMPRESSION",
                "CQL_VERSION",
                "SCYLLA_FAILURE_REASON_MAP",
                "SCYLLA_LWT_ADD_METADATA_MARK",
                "SCYLLA_RATE_LIMIT_ERROR",
            ]
            .contains(k)
        })
        .collect();
    let want = multimap(&kept);
    for &(version, compression) in FLAVOURS {
        // Before STARTUP (uncompressed) and as a heartbeat answer (compressed).
        for c in [None, compression] {
            let env = response(version, c, 0, Opcode::SUPPORTED, &full);
            let out = supported(env, wire(c));
            assert_eq!(body_of(&out, c), want, "{version:?} {c:?}");
            assert_eq!(out.header().opcode, Opcode::SUPPORTED);
        }
    }
    // A Scylla node with enable_shard_aware_drivers: false and no shard-aware port.
    let plain = multimap(&[
        ("COMPRESSION", &["lz4", "snappy"]),
        ("CQL_VERSION", &["3.3.1"]),
        (
            "SCYLLA_LWT_ADD_METADATA_MARK",
            &["LWT_OPTIMIZATION_META_BIT_MASK=2147483648"],
        ),
    ]);
    let env = response(ProtocolVersion::V4, None, 0, Opcode::SUPPORTED, &plain);
    assert_eq!(
        supported(env.clone(), wire(None)).as_bytes(),
        env.as_bytes()
    );
}

#[test]
fn cassandra_supported_is_forwarded_as_it_came() {
    let body = multimap(&[
        ("CQL_VERSION", &["3.4.7"]),
        ("COMPRESSION", &["snappy", "lz4"]),
        ("PROTOCOL_VERSIONS", &["3/v3", "4/v4", "5/v5", "6/v6-beta"]),
    ]);
    for c in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
        let env = response(ProtocolVersion::V4, c, 0, Opcode::SUPPORTED, &body);
        assert_eq!(supported(env.clone(), wire(c)).as_bytes(), env.as_bytes());
    }
    // A malformed answer too.
    let env = response(
        ProtocolVersion::V4,
        None,
        0,
        Opcode::SUPPORTED,
        b"\x00\x05SCYLLA_",
    );
    assert_eq!(
        supported(env.clone(), wire(None)).as_bytes(),
        env.as_bytes()
    );
}

#[test]
fn first_token_keeps_one_element() {
    assert_eq!(first_token(&set_of(&["1", "2", "3"])), set_of(&["1"]));
    assert_eq!(first_token(&set_of(&["-9"])), set_of(&["-9"]));
    // Empty or unreadable sets stay as they are.
    assert_eq!(first_token(&set_of(&[])), set_of(&[]));
    assert_eq!(first_token(&[0, 0, 0, 2, 0, 0]), vec![0, 0, 0, 2, 0, 0]);
}

#[test]
fn the_byte_prefilter_finds_every_casing() {
    for q in [
        "system.local",
        "SYSTEM.LOCAL",
        "x.LoCaL",
        "Peers",
        "peers_v2",
        "pEERs",
    ] {
        assert!(mentions_local_or_peers(q.as_bytes()), "{q}");
    }
    for q in ["", "loca", "SELECT * FROM ks.t", "peer", "lo cal"] {
        assert!(!mentions_local_or_peers(q.as_bytes()), "{q}");
    }
}
