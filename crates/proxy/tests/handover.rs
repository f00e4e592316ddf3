//! The drain's hand-over, run for real: two `autoprep` processes with the same
//! `--handover-socket`; a client connected to the first keeps using the same TCP connection
//! after the first is signalled (SIGTERM) and hands it over to the second. Requests in flight
//! at the signal are answered by the first; the connection's keyspace goes with it.
//!
//! Runs only against a node already listening (`AUTOPREP_TEST_UPSTREAM`, else 127.0.0.1:9042):
//! it never starts one. No timing is asserted: every wait has a generous bound that only
//! turns a hang into a failure.

#![cfg(unix)]

use autoprep_protocol::envelope::{Direction, Envelope, Flags, Header, Opcode, StreamId};
use autoprep_protocol::message::query::{encode_query, QueryParams};
use autoprep_tests::{Client, Response};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod support;
use support::Proxy;

const PATIENCE: Duration = Duration::from_secs(90);

/// The node to use, if one is already listening.
fn running_node() -> Option<String> {
    let addr = std::env::var("AUTOPREP_TEST_UPSTREAM")
        .ok()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "127.0.0.1:9042".into());
    let reachable = addr
        .parse()
        .ok()
        .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).ok())
        .is_some();
    reachable.then_some(addr)
}

fn metrics(p: &Proxy) -> String {
    let mut s = TcpStream::connect(p.admin).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw
}

/// Waits for the draining process `old` to exit, and checks it exited 0.
fn exited_ok(old: &mut Proxy) {
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = old.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the old process did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    old.read_log_to_the_end();
    assert!(status.success(), "{}", old.log_text());
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` QUERY envelopes (v4, streams 1..=n) reading `system.local`, as one buffer.
fn pipelined_reads(n: i16) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 1..=n {
        let mut body = Vec::new();
        let params = QueryParams {
            consistency: 1,
            ..Default::default()
        };
        encode_query(
            autoprep_protocol::envelope::ProtocolVersion::V4,
            b"SELECT key FROM local",
            &params,
            &mut body,
        )
        .unwrap();
        let env = Envelope::new(
            Header {
                version: autoprep_protocol::envelope::ProtocolVersion::V4,
                direction: Direction::Request,
                flags: Flags(0),
                stream: StreamId(i),
                opcode: Opcode::QUERY,
                length: 0,
            },
            &body,
        );
        out.extend_from_slice(env.as_bytes());
    }
    out
}

/// One drain with hand-over, for a client of `version` and `compression`. With `in_flight`
/// (v4 without compression: the test writes raw envelopes), requests are in flight when the
/// signal arrives, and half of one is written before it and the rest after the hand-over.
/// A statement prepared with a bind marker of a partition key.
const BOUND: &str = "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?";

fn keeps_its_connection(
    node: &str,
    version: autoprep_protocol::envelope::ProtocolVersion,
    compression: Option<autoprep_protocol::compression::Compression>,
    in_flight: bool,
) {
    let dir = std::env::temp_dir().join(format!(
        "autoprep-handover-test-{}-{}-{}",
        std::process::id(),
        version.as_u8(),
        compression.is_some()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("handover.sock");
    let sock = path.to_str().unwrap();
    let args = ["--handover-socket", sock, "--drain-grace-seconds", "60"];
    let mut old = Proxy::start_on(node, &args);
    let mut client = Client::connect_with(&old.addr, version, compression).unwrap();
    client.query("USE system").unwrap().ok().unwrap();
    assert!(matches!(
        client.query("SELECT key FROM local").unwrap().ok().unwrap(),
        Response::Rows(_)
    ));
    // A statement the client prepared (with a literal inline: autoprep may answer it with an
    // id of its own), and one it prepared with a bind marker (of a table's partition key, not
    // a topology table's: routing remembers it).
    let literal = client
        .prepare("SELECT key FROM local WHERE key = 'local'")
        .unwrap()
        .prepared()
        .unwrap();
    let bound = client.prepare(BOUND).unwrap().prepared().unwrap();
    let before = client.local_addr().unwrap();

    // The next process, on its own port, takes the hand-over socket over.
    let new = Proxy::start_on(node, &args);
    // Requests in flight when the signal arrives: the old process answers them first.
    const N: i16 = 200;
    let reads = pipelined_reads(N + 1);
    let (whole, last) = reads.split_at(reads.len() - reads.len() / (N as usize + 1));
    let (half, rest) = last.split_at(last.len() / 2);
    if in_flight {
        client.send_raw(whole).unwrap();
        client.send_raw(half).unwrap();
    }
    old.signal("TERM");
    if in_flight {
        for _ in 0..N {
            let env = client.read_envelope().unwrap();
            assert!(matches!(
                client.decode(&env).unwrap().ok().unwrap(),
                Response::Rows(_)
            ));
        }
    }
    // The old process exits once it has handed the connection over.
    exited_ok(&mut old);
    assert!(
        old.log_text().contains("handed_over=1"),
        "{}",
        old.log_text()
    );

    // The same TCP connection goes on, served by the new process, in the same keyspace:
    // first the request whose first half the old process may have read.
    if in_flight {
        client.send_raw(rest).unwrap();
        let env = client.read_envelope().unwrap();
        assert_eq!(env.header().stream.0, N + 1);
        assert!(matches!(
            client.decode(&env).unwrap().ok().unwrap(),
            Response::Rows(_)
        ));
    }
    for _ in 0..5 {
        assert!(
            matches!(
                client.query("SELECT key FROM local").unwrap().ok().unwrap(),
                Response::Rows(_)
            ),
            "{}",
            new.log_text()
        );
    }
    // Statements prepared before: executed, or answered UNPREPARED (an id the new process
    // or its home does not know), then prepared again as a driver does, and executed.
    for (p, text, values) in [
        (
            &literal,
            "SELECT key FROM local WHERE key = 'local'",
            vec![],
        ),
        (&bound, BOUND, vec![Some(&b"system"[..])]),
    ] {
        let p = match client.execute(p, &values).unwrap() {
            Response::Rows(_) => continue,
            Response::Error { code: 0x2500, .. } => {
                client.prepare(text).unwrap().prepared().unwrap()
            }
            other => panic!("EXECUTE after the hand-over: {other:?}"),
        };
        assert!(matches!(
            client.execute(&p, &values).unwrap().ok().unwrap(),
            Response::Rows(_)
        ));
    }
    assert_eq!(client.local_addr().unwrap(), before);
    wait_for("the new process to count the adopted connection", || {
        metrics(&new).contains("autoprep_handover_adopted_total{outcome=\"adopted\"} 1")
    });
    // Before the connection, the new process learned the statement the client prepared with
    // a marker (routing remembers those with a partition key).
    let learned = metrics(&new)
        .lines()
        .find_map(|l| {
            l.strip_prefix("autoprep_handover_statements_total ")
                .map(str::to_owned)
        })
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(learned.is_some_and(|n| n >= 1.0), "{learned:?}");
    if std::env::var_os("HANDOVER_TEST_LOGS").is_some() {
        eprintln!("old:\n{}\nnew:\n{}", old.log_text(), new.log_text());
    }
    drop(new);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_client_keeps_its_connection_across_the_drain() {
    use autoprep_protocol::compression::Compression;
    use autoprep_protocol::envelope::ProtocolVersion::{V4, V5};
    let Some(node) = running_node() else {
        eprintln!("no node listening: skipped (this test never starts one)");
        return;
    };
    keeps_its_connection(&node, V4, None, true);
    keeps_its_connection(&node, V4, Some(Compression::Lz4), false);
    // v5 framing (and its LZ4 segments) goes on where it was.
    keeps_its_connection(&node, V5, None, false);
    keeps_its_connection(&node, V5, Some(Compression::Lz4), false);
}

#[test]
fn with_nobody_on_the_socket_the_drain_is_as_before() {
    let Some(node) = running_node() else {
        eprintln!("no node listening: skipped (this test never starts one)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("autoprep-handover-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("handover.sock");
    let sock = path.to_str().unwrap();
    let mut old = Proxy::start_on(
        &node,
        &["--handover-socket", sock, "--drain-grace-seconds", "2"],
    );
    let mut client = Client::connect(&old.addr).unwrap();
    client
        .query("SELECT key FROM system.local")
        .unwrap()
        .ok()
        .unwrap();
    old.signal("TERM");
    // Served during the grace period (its own socket file is no new process)...
    std::thread::sleep(Duration::from_millis(500));
    client
        .query("SELECT key FROM system.local")
        .unwrap()
        .ok()
        .unwrap();
    // ...then closed, and counted.
    exited_ok(&mut old);
    let log = old.log_text();
    assert!(
        log.contains("no new process on the hand-over socket"),
        "{log}"
    );
    assert!(log.contains("handed_over=0 closed=1"), "{log}");
    assert!(client.query("SELECT key FROM system.local").is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TLS client connection cannot be handed over (its TLS session stays in the process): it
/// is served through the grace period and then closed, as without a hand-over, while the new
/// process listens on the socket.
#[test]
fn a_tls_client_connection_is_drained_not_handed_over() {
    use rcgen::{CertificateParams, KeyPair};
    let Some(node) = running_node() else {
        eprintln!("no node listening: skipped (this test never starts one)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("autoprep-handover-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let path = dir.join("handover.sock");
    let args = [
        "--handover-socket",
        path.to_str().unwrap(),
        "--drain-grace-seconds",
        "3",
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
    ];
    let mut old = Proxy::start_on(&node, &args);
    let tls = autoprep_tests::TlsClient::new(&cert.pem(), None, "localhost").unwrap();
    let v4 = autoprep_protocol::envelope::ProtocolVersion::V4;
    let mut client = Client::connect_raw_tls(&old.addr, v4, &tls).unwrap();
    assert_eq!(
        client.startup(None, &[]).unwrap().header().opcode,
        Opcode::READY
    );
    client
        .query("SELECT key FROM system.local")
        .unwrap()
        .ok()
        .unwrap();
    let new = Proxy::start_on(&node, &args);
    old.signal("TERM");
    // The hand-over starts (the new process answers), and the TLS connection is still served.
    wait_for("the hand-over to start", || {
        old.log_text()
            .contains("a new process takes connections over")
    });
    client
        .query("SELECT key FROM system.local")
        .unwrap()
        .ok()
        .unwrap();
    exited_ok(&mut old);
    assert!(
        old.log_text().contains("handed_over=0 closed=1"),
        "{}",
        old.log_text()
    );
    assert!(client.query("SELECT key FROM system.local").is_err());
    assert!(metrics(&new).contains("autoprep_handover_adopted_total{outcome=\"adopted\"} 0"));
    drop(new);
    let _ = std::fs::remove_dir_all(&dir);
}
