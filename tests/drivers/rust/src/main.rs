//! Driver-matrix test for the Rust `scylla` driver (issue 8): runs the legacy workload of
//! [`workload`] through autoprep, checks that the driver's connections all lead to autoprep and
//! that autoprep rewrote statements, then runs the same workload directly against the server as
//! a control and requires both transcripts to be identical.
//!
//! Environment (set by `tests/drivers/run.sh`):
//! - `AUTOPREP_DRIVER_TARGET`   autoprep's CQL address, host:port (required)
//! - `AUTOPREP_DRIVER_ADMIN`    autoprep's admin address, host:port (required)
//! - `AUTOPREP_DRIVER_UPSTREAM` the server itself, host:port; unset or empty: no direct control
//! - `AUTOPREP_DRIVER_LOG_DIR`  where the two transcripts are written (`rust-proxied.txt`,
//!   `rust-direct.txt`); unset: not written
//!
//! The driver runs with its default load balancing and host handling: autoprep's topology
//! rewriting alone must keep it on autoprep, which the connection check proves.
//!
//! Exits 0 when everything matched, 1 on any mismatch, 2 when it could not run at all.

mod admin;
mod proc_sockets;
mod workload;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::client::{Compression, SelfIdentity};

const NAME: &str = "rust (scylla crate)";

struct Config {
    target: String,
    admin: String,
    upstream: Option<String>,
    log_dir: Option<String>,
}

fn config() -> Result<Config, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    Ok(Config {
        target: var("AUTOPREP_DRIVER_TARGET").ok_or("AUTOPREP_DRIVER_TARGET is not set")?,
        admin: var("AUTOPREP_DRIVER_ADMIN").ok_or("AUTOPREP_DRIVER_ADMIN is not set")?,
        upstream: var("AUTOPREP_DRIVER_UPSTREAM"),
        log_dir: var("AUTOPREP_DRIVER_LOG_DIR"),
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let cfg = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{NAME}: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&cfg).await {
        Ok(true) => {
            println!("{NAME}: PASS");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("{NAME}: FAIL");
            ExitCode::from(1)
        }
        Err(e) => {
            println!("{NAME}: ERROR {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs both phases and prints the summary; `Ok(passed)`.
async fn run(cfg: &Config) -> Result<bool, String> {
    let mut problems: Vec<String> = Vec::new();
    let target_addrs: Vec<SocketAddr> = tokio::net::lookup_host(&cfg.target)
        .await
        .map_err(|e| format!("{}: {e}", cfg.target))?
        .collect();

    // Through autoprep.
    let before = admin::Snapshot::take(&cfg.admin).await?;
    let session = connect(&cfg.target).await?;
    let proxied = workload::run(&session).await;
    let connections = check_connections(&target_addrs, &cfg.admin).await;
    let after = admin::Snapshot::take(&cfg.admin).await?;
    drop(session);
    save(cfg, "proxied", &proxied.transcript);

    println!(
        "{NAME} through autoprep {}: {} observations, {} failures",
        cfg.target,
        proxied.transcript.len(),
        proxied.failures.len()
    );
    for f in &proxied.failures {
        println!("  FAILED {f}");
    }
    problems.extend(
        proxied
            .failures
            .iter()
            .map(|f| format!("through autoprep: {f}")),
    );
    match connections {
        Ok(line) => println!("  connections: {line}"),
        Err(e) => {
            println!("  connections: FAILED {e}");
            problems.push(e);
        }
    }
    let outcomes: Vec<String> = after
        .metrics
        .query_outcomes_since(&before.metrics)
        .into_iter()
        .map(|(k, d)| format!("{} +{d}", k.trim_start_matches("autoprep_queries_total")))
        .collect();
    println!("  autoprep QUERY outcomes: {}", outcomes.join(", "));
    let (queries, batches) = after.rewrites_since(&before, workload::KEYSPACE);
    println!(
        "  autoprep rewrote {queries} QUERYs of the workload (keyspace {}) and {batches} BATCH messages",
        workload::KEYSPACE
    );
    if queries <= 0.0 || batches <= 0.0 {
        println!("  FAILED autoprep rewrote no QUERY or no BATCH of the workload");
        problems.push("autoprep rewrote no QUERY or no BATCH of the workload".into());
    }

    // Directly against the server: the control.
    match &cfg.upstream {
        None => println!("{NAME} directly: skipped (AUTOPREP_DRIVER_UPSTREAM is not set)"),
        Some(upstream) => {
            let session = connect(upstream).await?;
            let direct = workload::run(&session).await;
            drop(session);
            save(cfg, "direct", &direct.transcript);
            println!(
                "{NAME} directly {upstream}: {} observations, {} failures",
                direct.transcript.len(),
                direct.failures.len()
            );
            for f in &direct.failures {
                println!("  FAILED {f}");
            }
            problems.extend(direct.failures.iter().map(|f| format!("directly: {f}")));
            let diffs = differences(&proxied.transcript, &direct.transcript);
            if diffs.is_empty() {
                println!("  through autoprep and directly: identical transcripts");
            } else {
                println!(
                    "  through autoprep and directly: {} differences",
                    diffs.len()
                );
                for d in diffs.iter().take(20) {
                    println!("{d}");
                }
                problems.push(format!("{} transcript differences", diffs.len()));
            }
        }
    }
    Ok(problems.is_empty())
}

/// Writes a transcript to `AUTOPREP_DRIVER_LOG_DIR/rust-{phase}.txt`, for a look after a failure.
fn save(cfg: &Config, phase: &str, transcript: &[String]) {
    if let Some(dir) = &cfg.log_dir {
        let path = std::path::Path::new(dir).join(format!("rust-{phase}.txt"));
        if let Err(e) = std::fs::write(&path, transcript.join("\n") + "\n") {
            eprintln!("{NAME}: writing {}: {e}", path.display());
        }
    }
}

/// A session to `addr` with the driver's default policies (no host filter).
async fn connect(addr: &str) -> Result<Session, String> {
    SessionBuilder::new()
        .known_node(addr)
        .compression(Some(Compression::Lz4))
        .custom_identity(SelfIdentity::new().with_application_name("autoprep-driver-matrix"))
        .build()
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))
}

/// Every TCP connection this process holds must lead to autoprep, and autoprep must count as
/// many client connections (the driver is its only client now). Connections open in the
/// background, so the two counts are compared until they agree, a bounded number of times.
async fn check_connections(target: &[SocketAddr], admin_addr: &str) -> Result<String, String> {
    let mut last = String::new();
    for _ in 0..50 {
        let remotes =
            proc_sockets::established_remotes().map_err(|e| format!("reading /proc: {e}"))?;
        let metrics = admin::scrape(admin_addr).await?;
        let to_autoprep = remotes.iter().filter(|a| target.contains(a)).count();
        let elsewhere: Vec<String> = remotes
            .iter()
            .filter(|a| !target.contains(a))
            .map(|a| a.to_string())
            .collect();
        let counted = metrics.client_connections();
        last = format!(
            "{to_autoprep} to autoprep, {} elsewhere {elsewhere:?}; autoprep counts {counted} client connections",
            elsewhere.len()
        );
        if elsewhere.is_empty() && to_autoprep > 0 && to_autoprep as f64 == counted {
            return Ok(last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last)
}

/// Lines that differ between the two transcripts, as a readable list.
fn differences(proxied: &[String], direct: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..proxied.len().max(direct.len()) {
        let (p, d) = (proxied.get(i), direct.get(i));
        if p != d {
            out.push(format!(
                "  #{i}\n    through autoprep: {}\n    directly:         {}",
                p.map_or("(nothing)", String::as_str),
                d.map_or("(nothing)", String::as_str)
            ));
        }
    }
    out
}
