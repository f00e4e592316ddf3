//! The processes the benchmark puts between its client and the server (an autoprep, the byte
//! splice) and autoprep's counters, read from its admin server.

use crate::args::Args;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// An autoprep child process, killed when dropped.
pub struct Proxy {
    pub child: Child,
    /// Where it listens.
    pub addr: String,
    /// autoprep's admin server (`/metrics`); none for the splice.
    pub admin: Option<String>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    /// This program again, as the byte-splice forwarder (`--serve-splice`).
    pub async fn splice(a: &Args, addr: &str) -> Result<Proxy> {
        let child = Command::new(std::env::current_exe()?)
            .args(["--serve-splice", addr, "--upstream", &a.upstream])
            .stdout(Stdio::null())
            .spawn()
            .context("start the splice forwarder")?;
        Proxy::listening(child, addr).await
    }

    async fn listening(child: Child, addr: &str) -> Result<Proxy> {
        let p = Proxy {
            child,
            addr: addr.to_owned(),
            admin: None,
        };
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(p);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("{addr}: the forwarder did not start listening")
    }

    /// An autoprep (`--autoprep-bin`) listening on `addr`, its admin server 100 ports above.
    pub async fn start(a: &Args, addr: &str, rewrite: bool, routing: bool) -> Result<Proxy> {
        // The admin server 100 ports above the proxy's, for its counters.
        let admin = port_after(addr, 100)?;
        let child = Command::new(&a.autoprep_bin)
            .args(["--listen", addr, "--upstream", &a.upstream])
            .args(["--admin", &admin])
            .args(["--admission-threshold", &a.admission_threshold.to_string()])
            .args(["--rewrite", if rewrite { "true" } else { "false" }])
            .args(["--routing", if routing { "true" } else { "false" }])
            .args(["--log", "warn"])
            .args(&a.autoprep_arg)
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| {
                format!(
                    "start {} (cargo build --release -p autoprep)",
                    a.autoprep_bin
                )
            })?;
        let mut p = Proxy::listening(child, addr).await?;
        p.admin = Some(admin);
        Ok(p)
    }

    /// autoprep's counters (`/metrics`, the histograms' series left out), by series.
    pub async fn counters(&self) -> Option<BTreeMap<String, f64>> {
        let admin = self.admin.as_deref()?;
        match scrape_metrics(admin).await {
            Ok(m) => Some(m),
            Err(e) => {
                println!("  (could not read {admin}/metrics: {e:#})");
                None
            }
        }
    }
}

/// GET /metrics of an admin server, parsed: `name{labels}` to value, without the histograms'
/// series (`_bucket`, `_sum`, `_count`).
async fn scrape_metrics(admin: &str) -> Result<BTreeMap<String, f64>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(admin).await?;
    sock.write_all(b"GET /metrics HTTP/1.0\r\nHost: autoprep\r\n\r\n")
        .await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), sock.read_to_end(&mut raw)).await??;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP body")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("{}", head.lines().next().unwrap_or(""));
    }
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series);
        if ["_bucket", "_sum", "_count"]
            .iter()
            .any(|x| name.ends_with(x))
        {
            continue;
        }
        if let Ok(v) = value.parse::<f64>() {
            out.insert(series.to_owned(), v);
        }
    }
    Ok(out)
}

/// The series of `after` that changed since `before`, with their change.
pub fn counter_deltas(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .filter_map(|(k, &v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d != 0.0).then(|| (k.clone(), d))
        })
        .collect()
}

/// `host:port` of `listen` with the port `k` higher.
pub fn port_after(listen: &str, k: u16) -> Result<String> {
    let (host, p) = listen.rsplit_once(':').context("--listen host:port")?;
    Ok(format!("{host}:{}", p.parse::<u16>()? + k))
}
