//! Topology answers through autoprep, against the real server: `system.local` shows the proxy
//! (advertised address, port, host id, one token) and nothing else changes; the peers tables
//! are empty; prepared topology reads, and topology reads autoprep itself prepared, are
//! rewritten too; SUPPORTED from Cassandra is untouched; several contact points, one refusing.

use autoprep::config::Config;
use autoprep::topology::Advertised;
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::{Opcode, ProtocolVersion};
use autoprep_tests::client::Rows;
use autoprep_tests::{proxy_ctx, upstream, Client, Response};
use std::sync::atomic::Ordering;

const COMBOS: [(ProtocolVersion, Option<Compression>); 5] = [
    (ProtocolVersion::V4, None),
    (ProtocolVersion::V4, Some(Compression::Lz4)),
    (ProtocolVersion::V4, Some(Compression::Snappy)),
    (ProtocolVersion::V5, None),
    (ProtocolVersion::V5, Some(Compression::Lz4)),
];

fn column(rows: &Rows, name: &str) -> usize {
    rows.columns
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

/// The first element of a serialized `set<text>`, as a one-element set.
fn first_of_set(cell: &[u8]) -> Vec<u8> {
    let len = i32::from_be_bytes(cell[4..8].try_into().unwrap()) as usize;
    let mut out = 1i32.to_be_bytes().to_vec();
    out.extend_from_slice(&cell[4..8 + len]);
    out
}

#[test]
fn system_local_shows_the_proxy_and_peers_are_empty() {
    let direct_addr = upstream();
    let (proxy_addr, ctx) = proxy_ctx(Config::for_upstream(&direct_addr));
    let adv = Advertised::new(proxy_addr);
    assert_eq!(ctx.topology.advertised(), Some(&adv));
    let ip = match proxy_addr.ip() {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    };
    let port = i32::from(proxy_addr.port()).to_be_bytes().to_vec();
    let rewritten = [
        "broadcast_address",
        "listen_address",
        "rpc_address",
        "rpc_port",
        "host_id",
        "tokens",
    ];
    for (v, c) in COMBOS {
        let mut direct = Client::connect_with(&direct_addr, v, c).unwrap();
        let mut through = Client::connect_with(&proxy_addr.to_string(), v, c).unwrap();
        // Three times: a literal-bearing QUERY is auto-prepared from its second sighting,
        // topology reads included.
        for _ in 0..3 {
            for q in [
                "SELECT * FROM system.local WHERE key='local'",
                "SELECT * FROM system.local",
            ] {
                let d = direct.query(q).unwrap().rows().unwrap();
                let t = through.query(q).unwrap().rows().unwrap();
                assert_eq!(t.columns, d.columns, "metadata unchanged: {q}");
                assert_eq!(t.paging_state, d.paging_state);
                assert_eq!(t.rows.len(), 1);
                for (i, (name, _)) in d.columns.iter().enumerate() {
                    let got = t.rows[0][i].clone();
                    match name.as_str() {
                        "broadcast_address" | "listen_address" | "rpc_address" => {
                            assert_eq!(got, Some(ip.clone()), "{name}")
                        }
                        "rpc_port" => assert_eq!(got, Some(port.clone())),
                        "host_id" => assert_eq!(got, Some(adv.host_id.to_vec())),
                        "tokens" => {
                            let want = d.rows[0][i].as_deref().map(first_of_set);
                            assert_eq!(got, want)
                        }
                        // Read twice, while other tests change the schema and flush.
                        "gossip_generation" | "truncated_at" | "schema_version" => {}
                        _ => assert_eq!(got, d.rows[0][i], "{name} unchanged"),
                    }
                }
                for name in rewritten {
                    column(&d, name);
                }
            }
            for q in [
                "SELECT * FROM system.peers",
                "SELECT * FROM system.peers_v2",
                "SELECT peer, host_id, rpc_address, schema_version FROM system.peers",
            ] {
                let d = direct.query(q).unwrap().rows().unwrap();
                let t = through.query(q).unwrap().rows().unwrap();
                assert_eq!(t.columns, d.columns, "{q}");
                assert!(t.rows.is_empty(), "{q}: {:?}", t.rows);
            }
        }
        // A prepared topology read, executed: rewritten the same way.
        let p = through
            .prepare("SELECT rpc_address, rpc_port, cluster_name FROM system.local WHERE key = ?")
            .unwrap()
            .prepared()
            .unwrap();
        let r = through
            .execute(&p, &[Some(b"local")])
            .unwrap()
            .rows()
            .unwrap();
        assert_eq!(r.rows[0][0], Some(ip.clone()));
        assert_eq!(r.rows[0][1], Some(port.clone()));
        let d = direct
            .query("SELECT cluster_name FROM system.local")
            .unwrap()
            .rows()
            .unwrap();
        assert_eq!(r.rows[0][2], d.rows[0][0]);
        // Cassandra's SUPPORTED has nothing to remove: byte for byte the server's.
        let a = direct.request(Opcode::OPTIONS, &[]).unwrap();
        let b = through.request(Opcode::OPTIONS, &[]).unwrap();
        assert_eq!(a.body(), b.body(), "{v:?} {c:?}");
    }
    assert!(ctx.metrics.topology_rewrites.load(Ordering::Relaxed) >= 5 * 3 * 5);
    // `... WHERE key='local'` has a literal: it was auto-prepared like any other statement,
    // and its EXECUTE's answer rewritten all the same.
    assert!(ctx.metrics.queries_rewritten.load(Ordering::Relaxed) >= 5);
}

#[test]
fn schema_changes_are_answered_after_the_agreement_check() {
    // On a one-node cluster the check agrees at once; the answers are the server's.
    let (proxy_addr, _ctx) = proxy_ctx(Config::for_upstream(&upstream()));
    for (v, c) in COMBOS {
        let mut through = Client::connect_with(&proxy_addr.to_string(), v, c).unwrap();
        let ks = format!("topology_rs_{}", v as u8);
        for q in [
            format!("DROP KEYSPACE IF EXISTS {ks}"),
            format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
            format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)"),
            format!("ALTER TABLE {ks}.t ADD w int"),
        ] {
            let r = through.query(&q).unwrap();
            assert!(
                matches!(r, Response::SchemaChange | Response::Void),
                "{q}: {r:?}"
            );
        }
        let r = through
            .query(&format!("INSERT INTO {ks}.t (k, v, w) VALUES (1, 'a', 2)"))
            .unwrap();
        assert_eq!(r, Response::Void);
        let r = through.query(&format!("DROP KEYSPACE {ks}")).unwrap();
        assert_eq!(r, Response::SchemaChange);
    }
}

#[test]
fn a_refusing_contact_point_is_skipped() {
    let live = upstream();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (proxy_addr, ctx) = proxy_ctx(Config::for_upstream(&format!("{dead},{live}")));
    for _ in 0..4 {
        let mut c = Client::connect(&proxy_addr.to_string()).unwrap();
        let r = c.query("SELECT release_version FROM system.local").unwrap();
        assert!(matches!(r, Response::Rows(_)), "{r:?}");
    }
    // The dead node was tried once, then kept in back-off behind the live one.
    assert_eq!(
        ctx.metrics
            .upstream_connect_failures
            .load(Ordering::Relaxed),
        1
    );
}
