//! End-to-end benchmark: the same prepared-statement workload at the same concurrency, directly
//! against the server and through an autoprep process, in alternating rounds of one run.
//!
//! ```text
//! cargo run --release -p autoprep-benches --bin e2e -- --upstream 127.0.0.1:9042
//! ```

use anyhow::{Context, Result};
use autoprep_benches::load::{self, Conn, PreparedInsert, Stats};
use clap::Parser;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser, Debug)]
struct Args {
    /// The Cassandra node.
    #[arg(long, default_value = "127.0.0.1:9042")]
    upstream: String,
    /// The autoprep binary to start in front of it.
    #[arg(long, default_value = "target/release/autoprep")]
    autoprep_bin: String,
    /// Where the started autoprep listens.
    #[arg(long, default_value = "127.0.0.1:19043")]
    listen: String,
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Requests in flight per connection (total concurrency = connections × this).
    #[arg(long, default_value_t = 16)]
    in_flight: usize,
    /// Seconds per measured round.
    #[arg(long, default_value_t = 8)]
    seconds: u64,
    /// Measured rounds per target (direct and proxied alternate).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Warm-up seconds per target before the rounds.
    #[arg(long, default_value_t = 8)]
    warmup: u64,
}

struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_listening(addr: &str) -> Result<()> {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("autoprep did not start listening on {addr}")
}

fn line(name: &str, s: &Stats) {
    println!(
        "{name:<10} {:>10.0} op/s   p50 {:>6} µs   p99 {:>6} µs   errors {}",
        s.ops_per_sec(),
        s.quantile_us(0.50),
        s.quantile_us(0.99),
        s.errors
    );
}

#[tokio::main]
async fn main() -> Result<()> {
    let a = Args::parse();
    let proxy = Proxy(
        Command::new(&a.autoprep_bin)
            .args([
                "--listen",
                &a.listen,
                "--upstream",
                &a.upstream,
                "--log",
                "warn",
            ])
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("start {}", a.autoprep_bin))?,
    );
    wait_listening(&a.listen).await?;

    let mut setup = Conn::connect(&a.upstream).await?;
    setup.query("CREATE KEYSPACE IF NOT EXISTS autoprep_bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await?;
    setup.query("CREATE TABLE IF NOT EXISTS autoprep_bench.ts (sensor text, at timestamp, value double, PRIMARY KEY (sensor, at))").await?;
    let id = setup
        .prepare("INSERT INTO autoprep_bench.ts (sensor, at, value) VALUES (?, ?, ?)")
        .await?;
    let w = Arc::new(PreparedInsert { id });

    let targets = [
        ("direct", a.upstream.clone()),
        ("autoprep", a.listen.clone()),
    ];
    println!(
        "prepared time-series inserts, {} connections × {} in flight, {} rounds of {} s",
        a.connections, a.in_flight, a.rounds, a.seconds
    );
    for (_, addr) in &targets {
        load::run(
            addr,
            w.clone(),
            a.connections,
            a.in_flight,
            Duration::from_secs(a.warmup),
            u64::MAX,
        )
        .await?;
    }
    let mut all: [Stats; 2] = Default::default();
    let mut ratios = Vec::new();
    for r in 0..a.rounds {
        let mut round = Vec::new();
        for (i, (name, addr)) in targets.iter().enumerate() {
            let s = load::run(
                addr,
                w.clone(),
                a.connections,
                a.in_flight,
                Duration::from_secs(a.seconds),
                u64::MAX,
            )
            .await?;
            print!("round {r}  ");
            line(name, &s);
            round.push(s.ops_per_sec());
            all[i].ops += s.ops;
            all[i].errors += s.errors;
            all[i].elapsed += s.elapsed;
            all[i].latencies_us.extend(s.latencies_us);
        }
        ratios.push(round[1] / round[0]);
    }
    println!("\nall rounds");
    for (i, (name, _)) in targets.iter().enumerate() {
        all[i].latencies_us.sort_unstable();
        line(name, &all[i]);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "throughput autoprep / direct: median {:.3} (rounds: {})",
        ratios[ratios.len() / 2],
        ratios
            .iter()
            .map(|r| format!("{r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(proxy);
    Ok(())
}
