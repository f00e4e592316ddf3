//! The footprint benchmark: what one client connection costs the proxy process in memory, and
//! whether that memory goes back, for autoprep and for a byte-splice forwarder (tokio's
//! `copy_bidirectional`, started by this program as a process of its own).
//!
//! Per forwarder, against a real server:
//! 1. start it and read its RSS (`VmRSS` of /proc/PID/status) once settled: the baseline;
//! 2. open `--connections` client connections through it, STARTUP each: RSS per idle connection;
//! 3. one small query on each (all in flight at once): RSS per connection in use;
//! 4. on each connection, one query whose answer is a `--large-kib` blob (all in flight at
//!    once): RSS per connection after a large result;
//! 5. close every connection: RSS left above the baseline.
//!
//! Every request must be answered, or the run fails. Reports a table and, with `--json`, the
//! figures as JSON.
//!
//! ```text
//! cargo build --release -p autoprep -p autoprep-benches
//! target/release/footprint --connections 300
//! target/release/footprint --connections 2000 --forwarders autoprep
//! ```

use anyhow::{bail, Context, Result};
use autoprep_benches::load::Conn;
use autoprep_benches::splice;
use clap::Parser;
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::net::TcpStream;

#[derive(Parser, Debug)]
#[command(about = "Memory per client connection: autoprep and a byte splice")]
struct Args {
    /// `splice`: run the byte-splice forwarder itself (used by the benchmark).
    #[arg(value_parser = ["measure", "splice"], default_value = "measure")]
    command: String,
    /// The Cassandra node.
    #[arg(long, default_value = "127.0.0.1:9042")]
    upstream: String,
    /// Where the forwarder under test listens.
    #[arg(long, default_value = "127.0.0.1:19050")]
    listen: String,
    /// The autoprep binary.
    #[arg(long, default_value = "target/release/autoprep")]
    autoprep_bin: String,
    /// Forwarders to measure, in order.
    #[arg(long, value_delimiter = ',', default_value = "autoprep,splice")]
    forwarders: Vec<String>,
    /// Client connections opened through the forwarder.
    #[arg(long, default_value_t = 300)]
    connections: usize,
    /// Size of the large result read on every connection, in KiB.
    #[arg(long, default_value_t = 1024)]
    large_kib: usize,
    /// Write the figures as JSON to this file.
    #[arg(long)]
    json: Option<String>,
}

const KEYSPACE: &str = "autoprep_footprint";

fn main() -> Result<()> {
    let a = Args::parse();
    let rt = tokio::runtime::Runtime::new()?;
    if a.command == "splice" {
        return rt.block_on(splice::serve(&a.listen, &a.upstream));
    }
    rt.block_on(measure(&a))
}

/// A forwarder process, killed when dropped.
struct Forwarder {
    child: Child,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Forwarder {
    async fn start(a: &Args, kind: &str) -> Result<Forwarder> {
        let mut cmd = match kind {
            "autoprep" => {
                let mut c = Command::new(&a.autoprep_bin);
                c.args(["--listen", &a.listen, "--upstream", &a.upstream])
                    .args(["--log", "warn"])
                    .args(["--max-client-connections", "100000"]);
                c
            }
            "splice" => {
                let mut c = Command::new(std::env::current_exe()?);
                c.args(["splice", "--listen", &a.listen, "--upstream", &a.upstream]);
                c
            }
            other => bail!("unknown forwarder {other}"),
        };
        let child = cmd
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("start {kind} (cargo build --release -p autoprep)"))?;
        let f = Forwarder { child };
        for _ in 0..200 {
            if TcpStream::connect(&a.listen).await.is_ok() {
                return Ok(f);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("{kind} did not start listening on {}", a.listen)
    }

    /// Resident memory in KiB, read once it has stopped moving (memory given back by an
    /// allocator may take a moment).
    async fn rss_settled(&self) -> Result<u64> {
        let mut last = rss_kib(self.child.id())?;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = rss_kib(self.child.id())?;
            if now == last {
                return Ok(now);
            }
            last = now;
        }
        Ok(last)
    }
}

fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/PID/status")
}

/// Runs `cql` on every connection at once; every request must be answered with rows.
async fn on_all(conns: Vec<Conn>, cql: &'static str) -> Result<Vec<Conn>> {
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let rows = c.rows(cql).await?;
                if rows.is_empty() {
                    bail!("{cql}: no rows");
                }
                Ok::<_, anyhow::Error>(c)
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await??);
    }
    Ok(out)
}

async fn setup(a: &Args) -> Result<()> {
    let mut c = Conn::connect(&a.upstream).await?;
    c.query(&format!(
        "CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = \
         {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    ))
    .await?;
    c.query(&format!(
        "CREATE TABLE IF NOT EXISTS {KEYSPACE}.big (k int PRIMARY KEY, v blob)"
    ))
    .await?;
    let blob: String = (0..a.large_kib * 1024)
        .map(|i| format!("{:02x}", i % 251))
        .collect();
    c.query(&format!(
        "INSERT INTO {KEYSPACE}.big (k, v) VALUES (0, 0x{blob})"
    ))
    .await
}

async fn measure(a: &Args) -> Result<()> {
    setup(a).await?;
    let n = a.connections;
    let mut rows = Vec::new();
    println!(
        "{} client connections, a {} KiB result on each; RSS of the forwarder process",
        n, a.large_kib
    );
    println!(
        "{:<10} {:>10} {:>12} {:>12} {:>14} {:>14}",
        "forwarder", "base KiB", "idle KiB/c", "used KiB/c", "large KiB/c", "after close"
    );
    for kind in &a.forwarders {
        let f = Forwarder::start(a, kind).await?;
        let base = f.rss_settled().await?;
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            conns.push(Conn::connect(&a.listen).await?);
        }
        let idle = f.rss_settled().await?;
        let conns = on_all(
            conns,
            "SELECT release_version FROM system.local WHERE key = 'local'",
        )
        .await?;
        let used = f.rss_settled().await?;
        let conns = on_all(conns, "SELECT v FROM autoprep_footprint.big WHERE k = 0").await?;
        let large = f.rss_settled().await?;
        drop(conns);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let closed = f.rss_settled().await?;
        let per = |kib: u64| kib.saturating_sub(base) as f64 / n as f64;
        println!(
            "{:<10} {:>10} {:>12.1} {:>12.1} {:>14.1} {:>+13}K",
            kind,
            base,
            per(idle),
            per(used),
            per(large),
            closed as i64 - base as i64
        );
        rows.push(json!({
            "forwarder": kind,
            "connections": n,
            "large_kib": a.large_kib,
            "base_kib": base,
            "idle_kib": idle,
            "used_kib": used,
            "large_result_kib": large,
            "after_close_kib": closed,
            "idle_kib_per_connection": per(idle),
            "used_kib_per_connection": per(used),
            "large_result_kib_per_connection": per(large),
            "after_close_above_base_kib": closed as i64 - base as i64,
        }));
    }
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&json!(rows))?)?;
    }
    Ok(())
}
