//! The drain, run for real: the `autoprep` binary in front of the real server, signalled with
//! SIGTERM / SIGINT while clients hold connections. During the grace period `/ready` is 503,
//! new connections are refused and open ones are served (requests in flight at the signal are
//! answered); the process exits 0 as soon as the last client leaves; a connection still open
//! at the end of the grace period is closed; a second signal exits at once.
//!
//! No timing is asserted: every wait is for a condition, with a generous bound that only turns
//! a hang into a failure.

#![cfg(unix)]

use autoprep_protocol::envelope::{Direction, Envelope, Flags, Header, Opcode, StreamId};
use autoprep_protocol::message::query::{encode_query, QueryParams};
use autoprep_tests::{upstream, Client, Response};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

mod support;
use support::Proxy;

const KEYSPACE: &str = "lifecycle_drain";

/// Bound on any wait for a condition (a hang becomes a failure, not a timed assertion).
const PATIENCE: Duration = Duration::from_secs(90);

impl Proxy {
    /// `/ready`'s status code.
    fn ready(&self) -> u16 {
        let mut s = TcpStream::connect(self.admin).unwrap();
        write!(
            s,
            "GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        raw.split(' ').nth(1).unwrap().parse().unwrap()
    }

    /// Waits until the drain has started: `/ready` answers 503 and connecting is refused.
    fn wait_until_draining(&self) {
        wait_for("/ready to answer 503", || self.ready() == 503);
        wait_for("new connections to be refused", || {
            TcpStream::connect(&self.addr).is_err()
        });
    }

    /// Waits for the process to exit, and for its last log lines to be collected.
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.read_log_to_the_end();
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("autoprep did not exit; log:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn setup() {
    let mut c = Client::connect(&upstream()).unwrap();
    for q in [
        &format!("CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
        &format!("CREATE TABLE IF NOT EXISTS {KEYSPACE}.kv (k int PRIMARY KEY, v text)"),
    ] {
        c.query(q).unwrap().ok().unwrap();
    }
}

/// `n` QUERY envelopes (v4, streams 1..=n) inserting literal rows, as one buffer.
fn pipelined_inserts(n: i16) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 1..=n {
        let cql = format!("INSERT INTO {KEYSPACE}.kv (k, v) VALUES ({i}, 'row {i}')");
        let mut body = Vec::new();
        let params = QueryParams {
            consistency: 1,
            ..Default::default()
        };
        encode_query(
            autoprep_protocol::envelope::ProtocolVersion::V4,
            cql.as_bytes(),
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

#[test]
fn open_connections_are_served_until_they_close_then_the_process_exits_0() {
    setup();
    let mut p = Proxy::start(&["--drain-grace-seconds", "600"]);
    let mut idle = Client::connect(&p.addr).unwrap();
    let mut busy = Client::connect(&p.addr).unwrap();

    // Requests in flight when the signal arrives.
    const N: i16 = 2000;
    busy.send_raw(&pipelined_inserts(N)).unwrap();
    p.signal("TERM");
    p.wait_until_draining();
    let mut answered = vec![false; N as usize + 1];
    for _ in 0..N {
        let env = busy.read_envelope().unwrap();
        assert_eq!(busy.decode(&env).unwrap(), Response::Void);
        answered[env.header().stream.0 as usize] = true;
    }
    assert!(answered[1..].iter().all(|a| *a), "every request answered");

    // The grace period is long: open connections go on being served.
    idle.query(&format!("USE {KEYSPACE}"))
        .unwrap()
        .ok()
        .unwrap();
    let rows = idle
        .query("SELECT v FROM kv WHERE k = 7")
        .unwrap()
        .rows()
        .unwrap();
    assert_eq!(rows.rows, [[Some(b"row 7".to_vec())]]);
    assert_eq!(p.ready(), 503);

    // The last client leaves: the process exits at once, long before the grace period ends.
    drop(idle);
    drop(busy);
    let status = p.wait_exit();
    assert_eq!(status.code(), Some(0), "log:\n{}", p.log_text());
    let log = p.log_text();
    let draining = log.lines().find(|l| l.contains("draining:")).unwrap();
    assert!(draining.contains("open=2"), "{draining}");
    assert!(log.contains("every client connection has closed"), "{log}");
    assert!(!log.contains("grace period over"), "{log}");
}

#[test]
fn connections_still_open_after_the_grace_period_are_closed() {
    setup();
    let mut p = Proxy::start(&["--drain-grace-seconds", "1"]);
    let mut idle = Client::connect(&p.addr).unwrap();
    let mut busy = Client::connect(&p.addr).unwrap();
    busy.query(&format!("USE {KEYSPACE}"))
        .unwrap()
        .ok()
        .unwrap();
    // A client that keeps sending until the proxy closes its connection.
    let busy = std::thread::spawn(move || {
        let mut answered = 0u64;
        loop {
            match busy.query("SELECT v FROM kv WHERE k = 1") {
                Ok(r) => {
                    r.rows().unwrap();
                    answered += 1;
                }
                Err(e) => return (answered, e.to_string()),
            }
        }
    });
    p.signal("INT");
    // Nothing to read until the proxy closes the connection at the end of the grace period.
    idle.set_read_timeout(PATIENCE).unwrap();
    let err = idle.read_envelope().unwrap_err().to_string();
    assert!(err.contains("closed by peer"), "{err}");
    let (answered, err) = busy.join().unwrap();
    assert!(answered > 0);
    // Every request got its answer or none (the connection ended): never a wrong one.
    assert!(
        err.contains("closed by peer") || err.contains("reset") || err.contains("Broken pipe"),
        "{err}"
    );
    let status = p.wait_exit();
    assert_eq!(status.code(), Some(0), "log:\n{}", p.log_text());
    let log = p.log_text();
    assert!(log.contains("grace period over"), "{log}");
    assert!(log.contains("every client connection has closed"), "{log}");
}

#[test]
fn a_second_signal_exits_at_once() {
    let mut p = Proxy::start(&["--drain-grace-seconds", "600"]);
    let _open = Client::connect(&p.addr).unwrap();
    p.signal("TERM");
    p.wait_until_draining();
    p.signal("TERM");
    let status = p.wait_exit();
    assert_eq!(status.code(), Some(1), "log:\n{}", p.log_text());
    assert!(p.log_text().contains("second signal"));
}
