//! The security tests' own Cassandra node: PasswordAuthenticator, and client encryption that
//! is required (no plain clients) with client certificates, from the PEM files of a
//! [`Pki`] generated for the run. Started once per run through `scripts/cassandra.sh` (its own
//! node name, address and JMX port, seeded by itself), SIGKILLed after the last test.
//!
//! Environment:
//! - `AUTOPREP_TEST_SECURE_NODE`: the node's listen address [127.0.0.24]; `0` skips the tests
//!   that need it.
//! - `AUTOPREP_TEST_SECURE_NODE_KEEP=1`: reuse a running node (and its certificates) and leave
//!   it running (development).

use crate::pki::{self, Pki};
use anyhow::{bail, Context, Result};
use autoprep_tests::repo_root;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const NAME: &str = "autoprep-secure";
const JMX_PORT: &str = "7424";
pub const USER: &str = "cassandra";
pub const PASSWORD: &str = "cassandra";

/// The running node.
#[derive(Debug)]
pub struct SecureNode {
    /// `host:port` of its native transport.
    pub addr: String,
    pub pki: Pki,
    /// Started by this run (and so stopped at its end).
    started: bool,
}

/// The listen address, or `None` when the tests are switched off.
pub fn listen() -> Option<String> {
    match std::env::var("AUTOPREP_TEST_SECURE_NODE") {
        Ok(v) if v == "0" => None,
        Ok(v) if !v.is_empty() => Some(v),
        _ => Some("127.0.0.24".into()),
    }
}

fn keep() -> bool {
    std::env::var("AUTOPREP_TEST_SECURE_NODE_KEEP").is_ok_and(|v| v == "1")
}

fn node_dir() -> PathBuf {
    let cache = std::env::var_os("AUTOPREP_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache"));
    cache.join("cassandra-nodes").join(NAME)
}

static NODE: OnceLock<Result<SecureNode, String>> = OnceLock::new();

/// The node, started on first use (once per run); panics with the reason if it cannot start.
pub fn node() -> &'static SecureNode {
    match NODE.get_or_init(|| start().map_err(|e| format!("{e:#}"))) {
        Ok(n) => n,
        Err(e) => panic!("the security tests' Cassandra node could not start: {e}"),
    }
}

/// Stops the node if this run started it (unless `AUTOPREP_TEST_SECURE_NODE_KEEP=1`).
pub fn stop_if_started() {
    if let Some(Ok(n)) = NODE.get() {
        if n.started && !keep() {
            kill();
        }
    }
}

fn script(ip: &str, pki: &Pki, args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/cassandra.sh")).args(args);
    for k in [
        "CASSANDRA_AUDIT",
        "CASSANDRA_PREPARED_CACHE",
        "CASSANDRA_STORAGE_PORT",
        "CASSANDRA_NATIVE_PORT",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("CASSANDRA_NODE", NAME)
        .env("CASSANDRA_LISTEN", ip)
        .env("CASSANDRA_JMX_PORT", JMX_PORT)
        .env("CASSANDRA_SEEDS", format!("{ip}:7000"))
        .env("CASSANDRA_AUTH", "password")
        .env(
            "CASSANDRA_CLIENT_TLS_KEYSTORE",
            pki.path(pki::NODE_KEYSTORE),
        )
        .env("CASSANDRA_CLIENT_TLS_TRUSTSTORE", pki.path(pki::CA))
        .env("CASSANDRA_CLIENT_TLS_OPTIONAL", "false")
        .env("CASSANDRA_CLIENT_TLS_REQUIRE_CLIENT_AUTH", "true")
        .env("CASSANDRA_START_TIMEOUT", "240");
    cmd
}

fn start() -> Result<SecureNode> {
    let ip = listen().context("AUTOPREP_TEST_SECURE_NODE=0")?;
    let tls_dir = node_dir().join("tls");
    if keep() {
        if let Some(pki) = Pki::existing(&tls_dir) {
            let status = script(&ip, &pki, &["status"]).output()?;
            if status.status.success() {
                eprintln!("security tests: reusing the running node on {ip}");
                return Ok(SecureNode {
                    addr: format!("{ip}:9042"),
                    pki,
                    started: false,
                });
            }
        }
    }
    // A node of an interrupted earlier run (this name only) has other certificates.
    kill();
    let dir = node_dir();
    for sub in ["data", "commitlog", "saved_caches", "hints", "cdc_raw"] {
        let _ = std::fs::remove_dir_all(dir.join(sub));
    }
    let pki = Pki::generate(&tls_dir, &ip)?;
    let t0 = Instant::now();
    let out = script(&ip, &pki, &["start"])
        .output()
        .context("run scripts/cassandra.sh start")?;
    if !out.status.success() {
        bail!(
            "scripts/cassandra.sh start failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!(
        "security tests: node on {ip} (password authentication, required TLS with client certificates) up in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(SecureNode {
        addr: format!("{ip}:9042"),
        pki,
        started: !keep(),
    })
}

/// SIGKILL to this node's JVM (the quickest stop; its data is wiped at the next start). Only
/// the pid of the node's own pid file, checked to be a Cassandra daemon of this node directory.
fn kill() {
    let dir = node_dir();
    let pid_file = dir.join("cassandra.pid");
    let Ok(pid) = std::fs::read_to_string(&pid_file) else {
        return;
    };
    let pid = pid.trim().to_owned();
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let ours = std::fs::read(proc_dir.join("cmdline")).is_ok_and(|c| {
        let c = String::from_utf8_lossy(&c).replace('\0', " ");
        c.contains("org.apache.cassandra.service.CassandraDaemon")
            && c.contains(&dir.to_string_lossy().into_owned())
    });
    if ours && pid.chars().all(|c| c.is_ascii_digit()) {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while proc_dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let _ = std::fs::remove_file(pid_file);
}
