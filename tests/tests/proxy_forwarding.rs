//! Transparent forwarding through autoprep to the real server, for every protocol version and
//! compression, with many requests in flight on one connection.

use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::ProtocolVersion;
use autoprep_tests::{proxy, upstream, Client, Response};

const COMBOS: [(ProtocolVersion, Option<Compression>); 5] = [
    (ProtocolVersion::V4, None),
    (ProtocolVersion::V4, Some(Compression::Lz4)),
    (ProtocolVersion::V4, Some(Compression::Snappy)),
    (ProtocolVersion::V5, None),
    (ProtocolVersion::V5, Some(Compression::Lz4)),
];

#[test]
fn same_answers_through_the_proxy_as_directly() {
    let direct_addr = upstream();
    let proxy_addr = proxy(&direct_addr);
    let mut setup = Client::connect(&direct_addr).unwrap();
    setup
        .query("CREATE KEYSPACE IF NOT EXISTS autoprep_fwd WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        .unwrap()
        .ok()
        .unwrap();
    setup
        .query("CREATE TABLE IF NOT EXISTS autoprep_fwd.big (k int, c int, v text, PRIMARY KEY (k, c))")
        .unwrap()
        .ok()
        .unwrap();
    // 3000 rows of 100 bytes: a result above the 128 KiB v5 segment payload, split by the server.
    let p = setup
        .prepare("INSERT INTO autoprep_fwd.big (k, c, v) VALUES (1, ?, ?)")
        .unwrap()
        .prepared()
        .unwrap();
    let text = "x".repeat(100);
    for c in 0..3000i32 {
        setup
            .execute(&p, &[Some(&c.to_be_bytes()), Some(text.as_bytes())])
            .unwrap()
            .ok()
            .unwrap();
    }
    for (v, c) in COMBOS {
        let mut direct = Client::connect_with(&direct_addr, v, c).unwrap();
        let mut through = Client::connect_with(&proxy_addr, v, c).unwrap();
        for q in [
            "SELECT key, cluster_name, partitioner FROM system.local",
            "SELECT * FROM autoprep_fwd.big WHERE k = 1",
            "SELECT * FROM autoprep_fwd.big WHERE k = 2",
            "SELEC nonsense",
            "SELECT * FROM autoprep_fwd.missing",
            "USE autoprep_fwd",
        ] {
            let a = direct.query(q).unwrap();
            let b = through.query(q).unwrap();
            assert_eq!(a, b, "{v:?} {c:?} {q}");
        }
        let rows = through
            .query("SELECT * FROM autoprep_fwd.big WHERE k = 1")
            .unwrap()
            .rows()
            .unwrap();
        assert_eq!(rows.rows.len(), 3000);
        let pa = direct
            .prepare("SELECT v FROM big WHERE k = ? AND c = ?")
            .unwrap();
        let pb = through
            .prepare("SELECT v FROM big WHERE k = ? AND c = ?")
            .unwrap();
        assert_eq!(pa, pb);
        let p = pb.prepared().unwrap();
        let r = through
            .execute(&p, &[Some(&1i32.to_be_bytes()), Some(&7i32.to_be_bytes())])
            .unwrap();
        assert_eq!(
            r,
            direct
                .execute(&p, &[Some(&1i32.to_be_bytes()), Some(&7i32.to_be_bytes())])
                .unwrap()
        );
        // Paging: page state from the proxy works on the proxy.
        let page = through
            .query_with("SELECT c FROM autoprep_fwd.big WHERE k = 1", &[], Some(10))
            .unwrap()
            .rows()
            .unwrap();
        assert_eq!(page.rows.len(), 10);
        assert!(page.paging_state.is_some());
        assert!(matches!(
            through.query("SELECT now() FROM system.local").unwrap(),
            Response::Rows(_)
        ));
    }
}

#[test]
fn requests_wait_for_free_upstream_ids_and_none_is_lost() {
    use autoprep::config::Config;
    use autoprep_protocol::envelope::{Direction, Flags, Header, Opcode, StreamId};
    // Four upstream ids for a client that pipelines 500 requests on 500 stream ids.
    let mut cfg = Config::for_upstream(&upstream());
    cfg.upstream_streams = 4;
    let addr = autoprep_tests::proxy_with(cfg).to_string();
    let mut c = Client::connect(&addr).unwrap();
    let mut out = Vec::new();
    for s in 0..500i16 {
        let mut body = Vec::new();
        autoprep_protocol::message::query::encode_query(
            ProtocolVersion::V4,
            format!("SELECT key FROM system.local WHERE key = 'local' /* {s} */").as_bytes(),
            &autoprep_protocol::message::query::QueryParams {
                consistency: 1,
                ..Default::default()
            },
            &mut body,
        )
        .unwrap();
        let env = autoprep_protocol::envelope::Envelope::new(
            Header {
                version: ProtocolVersion::V4,
                direction: Direction::Request,
                flags: Flags(0),
                stream: StreamId(s),
                opcode: Opcode::QUERY,
                length: 0,
            },
            &body,
        );
        out.extend_from_slice(env.as_bytes());
    }
    c.send_raw(&out).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 500 {
        let e = c.read_envelope().unwrap();
        assert_eq!(e.header().opcode, Opcode::RESULT);
        assert!(seen.insert(e.header().stream.0), "stream answered twice");
    }
    assert_eq!(seen.len(), 500);
}
