//! The test client itself against the real server, for every protocol version and compression.

use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::ProtocolVersion;
use autoprep_tests::{upstream, Client, Response};

#[test]
fn client_talks_to_the_real_server() {
    let addr = upstream();
    for (v, c) in [
        (ProtocolVersion::V4, None),
        (ProtocolVersion::V4, Some(Compression::Lz4)),
        (ProtocolVersion::V4, Some(Compression::Snappy)),
        (ProtocolVersion::V5, None),
        (ProtocolVersion::V5, Some(Compression::Lz4)),
    ] {
        let mut cl = Client::connect_with(&addr, v, c).unwrap();
        let rows = cl
            .query("SELECT release_version FROM system.local")
            .unwrap()
            .rows()
            .unwrap();
        assert_eq!(rows.rows.len(), 1, "{v:?} {c:?}");
        let p = cl
            .prepare("SELECT key FROM system.local WHERE key = ?")
            .unwrap()
            .prepared()
            .unwrap();
        assert_eq!(p.bind.len(), 1);
        let r = cl.execute(&p, &[Some(b"local")]).unwrap().rows().unwrap();
        assert_eq!(r.rows, vec![vec![Some(b"local".to_vec())]]);
        assert!(matches!(
            cl.query("SELEC nonsense").unwrap(),
            Response::Error { code: 0x2000, .. }
        ));
    }
}
