//! autoprep in front of ScyllaDB, started as a container with `testcontainers` where a Docker
//! engine answers; skipped, with a line saying so on stderr, where none does (the docker CLI
//! alone is not enough: the engine's `/_ping` must answer).
//!
//! The workload: literal INSERTs and SELECTs through autoprep, each answer compared with the
//! same statement sent directly; autoprep must have rewritten them, and ScyllaDB's own counter of
//! EXECUTE requests (`scylla_transport_cql_requests_count{kind="EXECUTE"}`, which the Grafana
//! dashboard also reads) must have grown by at least as much.
//!
//! `AUTOPREP_SCYLLA_IMAGE` (`name:tag`) picks the image; `AUTOPREP_SKIP_CONTAINERS=1` skips.

use autoprep::config::Config;
use autoprep_tests::{proxy_ctx, Client, Response};
use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::SyncRunner;
use testcontainers::{GenericImage, ImageExt};

const DEFAULT_IMAGE: &str = "scylladb/scylla:6.2";

/// Says why the test does not run, where `cargo test` shows it (libtest captures `eprintln!`,
/// not writes to the stderr handle).
fn skip(why: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "scylla_container: SKIPPED: {why}; the ScyllaDB container test runs where a Docker engine answers"
    );
}

/// Whether a Docker engine answers `GET /_ping` at `DOCKER_HOST` (unix:// or tcp://) or at the
/// default socket. `Err` says what was tried.
fn docker_engine() -> Result<(), String> {
    let host = std::env::var("DOCKER_HOST").unwrap_or_default();
    let timeout = Duration::from_secs(3);
    let ping = |s: &mut dyn ReadWrite| -> std::io::Result<String> {
        s.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        Ok(answer)
    };
    let answer = if let Some(addr) = host.strip_prefix("tcp://") {
        let mut s = std::net::TcpStream::connect(addr)
            .map_err(|e| format!("no Docker engine at {host}: {e}"))?;
        s.set_read_timeout(Some(timeout)).ok();
        ping(&mut s).map_err(|e| format!("{host}: {e}"))?
    } else {
        let path = host
            .strip_prefix("unix://")
            .unwrap_or("/var/run/docker.sock");
        let mut s = std::os::unix::net::UnixStream::connect(path)
            .map_err(|e| format!("no Docker engine at {path}: {e}"))?;
        s.set_read_timeout(Some(timeout)).ok();
        ping(&mut s).map_err(|e| format!("{path}: {e}"))?
    };
    if answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!(
            "the Docker engine answered /_ping with {:?}",
            answer.lines().next()
        ))
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Connects to the node, retrying while it finishes starting (the log line comes a little
/// before the CQL port answers on some versions). Bounded, not a timed assertion.
fn connect(addr: &str) -> Client {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match Client::connect(addr) {
            Ok(c) => return c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
            Err(e) => panic!("ScyllaDB at {addr} never answered: {e}"),
        }
    }
}

/// The sum of `scylla_transport_cql_requests_count{kind="EXECUTE",...}` over shards and
/// scheduling groups, from ScyllaDB's Prometheus endpoint.
fn scylla_executes(metrics_addr: &str) -> f64 {
    let mut s = std::net::TcpStream::connect(metrics_addr).expect("ScyllaDB metrics port");
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: scylla\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body.lines()
        .filter(|l| {
            l.starts_with("scylla_transport_cql_requests_count{") && l.contains("kind=\"EXECUTE\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn rewrite_workload_against_a_scylladb_container() {
    if std::env::var("AUTOPREP_SKIP_CONTAINERS").is_ok_and(|v| v == "1") {
        return skip("AUTOPREP_SKIP_CONTAINERS=1");
    }
    if let Err(why) = docker_engine() {
        return skip(&why);
    }
    let image = std::env::var("AUTOPREP_SCYLLA_IMAGE").unwrap_or_else(|_| DEFAULT_IMAGE.into());
    let (name, tag) = image.rsplit_once(':').unwrap_or((&image, "latest"));
    let node = GenericImage::new(name, tag)
        .with_exposed_port(9042.tcp())
        .with_exposed_port(9180.tcp())
        .with_wait_for(WaitFor::message_on_either_std("init - serving"))
        .with_cmd([
            "--smp",
            "1",
            "--memory",
            "750M",
            "--overprovisioned",
            "1",
            "--developer-mode",
            "1",
        ])
        .start()
        .unwrap_or_else(|e| panic!("start {image}: {e}"));
    let host = node.get_host().expect("container host").to_string();
    let cql = format!(
        "{host}:{}",
        node.get_host_port_ipv4(9042.tcp()).expect("port 9042")
    );
    let metrics = format!(
        "{host}:{}",
        node.get_host_port_ipv4(9180.tcp()).expect("port 9180")
    );

    let mut direct = connect(&cql);
    for q in [
        "CREATE KEYSPACE IF NOT EXISTS deploy_scylla WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1}",
        "CREATE TABLE IF NOT EXISTS deploy_scylla.ts (sensor text, at timestamp, value double, PRIMARY KEY (sensor, at))",
    ] {
        direct.query(q).unwrap().ok().unwrap();
    }
    direct.query("USE deploy_scylla").unwrap().ok().unwrap();

    let mut cfg = Config::for_upstream(&cql);
    cfg.admission_threshold = 1;
    let (addr, ctx) = proxy_ctx(cfg);
    let mut through = Client::connect(&addr.to_string()).unwrap();
    through.query("USE deploy_scylla").unwrap().ok().unwrap();

    let executes_before = scylla_executes(&metrics);
    for i in 0..100 {
        let q = format!(
            "INSERT INTO ts (sensor, at, value) VALUES ('s-{}', '2026-01-02 03:04:{:02}+0000', {i}.5)",
            i % 5,
            i % 60
        );
        assert_eq!(through.query(&q).unwrap(), Response::Void, "{q}");
    }
    for i in 0..5 {
        for q in [
            format!("SELECT * FROM ts WHERE sensor = 's-{i}'"),
            format!("SELECT sensor, value FROM ts WHERE sensor = 's-{i}' AND at > '2026-01-02 03:04:05+0000' LIMIT 3"),
            format!("SELECT * FROM ts WHERE sensor IN ('s-{i}', 'nope')"),
        ] {
            // Twice: the first sighting may pass through while the shape is prepared.
            for _ in 0..2 {
                assert_eq!(through.query(&q).unwrap(), direct.query(&q).unwrap(), "{q}");
            }
        }
    }
    let rewritten = ctx.metrics.queries_rewritten.load(Ordering::Relaxed);
    let executes = scylla_executes(&metrics) - executes_before;
    assert!(
        rewritten >= 90,
        "only {rewritten} statements were rewritten"
    );
    assert!(
        executes >= rewritten as f64,
        "ScyllaDB counted {executes} EXECUTEs for {rewritten} rewritten statements"
    );
}
