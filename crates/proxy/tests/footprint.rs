//! Memory per client connection, run for real: the `autoprep` binary in front of the real
//! server, its resident memory read from /proc. Loose bounds, so that a regression cannot land
//! silently (the budgets themselves are measured by `benches/src/bin/footprint.rs`, see the
//! README's "Footprint"): at most 256 KiB per idle connection (with its upstream connection),
//! at most 512 KiB per connection after each read a 512 KiB result, and after every connection
//! closed the process within 32 MiB of where it started.
//!
//! No timing is asserted: every wait is for a condition, with a generous bound.

#![cfg(target_os = "linux")]

use autoprep_tests::{upstream, Client, Response};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_autoprep");
const KEYSPACE: &str = "footprint_test";
const CONNECTIONS: usize = 150;
const LARGE_KIB: usize = 512;

struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// RSS once it has stopped moving (an allocator gives memory back a little later).
fn rss_settled(pid: u32) -> u64 {
    let mut last = rss_kib(pid);
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        let now = rss_kib(pid);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

#[test]
fn connections_cost_kilobytes_and_memory_is_given_back() {
    let up = upstream();
    let mut setup = Client::connect(&up).unwrap();
    setup
        .query(&format!(
            "CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = \
             {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ))
        .unwrap();
    setup
        .query(&format!(
            "CREATE TABLE IF NOT EXISTS {KEYSPACE}.big (k int PRIMARY KEY, v blob)"
        ))
        .unwrap();
    let blob = vec![0x5a_u8; LARGE_KIB * 1024];
    setup
        .query_with(
            &format!("INSERT INTO {KEYSPACE}.big (k, v) VALUES (0, ?)"),
            &[Some(&blob)],
            None,
        )
        .unwrap();

    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AUTOPREP_") {
            cmd.env_remove(k);
        }
    }
    let proxy = Proxy(
        cmd.args(["--listen", &addr, "--upstream", &up, "--log", "warn"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = proxy.0.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "autoprep did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let base = rss_settled(pid);

    let mut clients: Vec<Client> = (0..CONNECTIONS)
        .map(|_| Client::connect(&addr).unwrap())
        .collect();
    let idle = rss_settled(pid);
    let per_idle = (idle.saturating_sub(base)) / CONNECTIONS as u64;

    let select = format!("SELECT v FROM {KEYSPACE}.big WHERE k = 0");
    for c in &mut clients {
        match c.query(&select).unwrap() {
            Response::Rows(r) => assert_eq!(r.rows.len(), 1),
            other => panic!("{other:?}"),
        }
    }
    let large = rss_settled(pid);
    let per_large = (large.saturating_sub(base)) / CONNECTIONS as u64;

    drop(clients);
    let closed = rss_settled(pid);
    eprintln!(
        "autoprep RSS: base {base} KiB, {per_idle} KiB per idle connection, {per_large} KiB per \
         connection after a {LARGE_KIB} KiB result, {closed} KiB after close"
    );
    assert!(per_idle <= 256, "{per_idle} KiB per idle connection");
    assert!(
        per_large <= 512,
        "{per_large} KiB per connection after a large result"
    );
    assert!(
        closed <= base + 32 * 1024,
        "{closed} KiB after every connection closed, {base} KiB before"
    );
}
