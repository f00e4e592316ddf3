//! The run's state ([`Bench`]) and one phase: one mode's load, with the counters read around
//! it.

use crate::args::Args;
use crate::mode::Mode;
use crate::phase::Phase;
use crate::proxy::{counter_deltas, Proxy};
use crate::sample::Sample;
use anyhow::{bail, Context, Result};
use autoprep_benches::estimate_check;
use autoprep_benches::legacy::{self, Legacy, Mix};
use autoprep_benches::load::{self, Conn, Stats};
use autoprep_benches::remote_cpu::{self, RemoteCpu};
use autoprep_benches::token_aware::TokenAware;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The run's state: its settings, connections, started proxies and counters' sources.
pub struct Bench {
    pub args: Args,
    /// The nodes' metrics endpoints (--metrics-url).
    pub remote: Option<RemoteCpu>,
    /// The statement counters come from the metrics endpoints (ScyllaDB: no
    /// `system_views.cql_metrics`).
    pub remote_counters: bool,
    /// The server's process, or every node's on a cluster.
    pub server_pids: Vec<u32>,
    pub ticks: f64,
    /// One connection to each node (node 1, the upstream, first), for its counters.
    pub metrics: Vec<Conn>,
    /// Whether the nodes' internode counters are read (a cluster).
    pub internode: bool,
    /// The nodes' CPU with no load, in cores (measured on a cluster before the warm-up).
    pub idle_cores: Option<f64>,
    pub mix: Mix,
    pub ids: [Vec<u8>; 3],
    pub autoprep: Option<Proxy>,
    pub passthrough: Option<Proxy>,
    /// The autoprep of `autoprep-unrouted` (`--routing false`).
    pub unrouted: Option<Proxy>,
    /// The token-aware client's view of the cluster (`direct-token-aware`).
    pub router: Option<Arc<TokenAware>>,
    /// The byte-splice forwarder of the splice modes.
    pub splice: Option<Proxy>,
    /// Insert sequence offset of the next phase: every phase writes rows of its own.
    pub next_insert: u64,
    /// Timestamps as integer literals.
    pub millis: bool,
}

impl Bench {
    /// The proxy the requests of `mode` go through, if any.
    pub fn proxy_of(&self, mode: Mode) -> Option<&Proxy> {
        match mode {
            Mode::Autoprep | Mode::ProxiedPrepared | Mode::AutoprepPrepareEach => {
                self.autoprep.as_ref()
            }
            Mode::Passthrough => self.passthrough.as_ref(),
            Mode::AutoprepUnrouted => self.unrouted.as_ref(),
            Mode::SpliceUnprepared | Mode::SplicePrepared => self.splice.as_ref(),
            _ => None,
        }
    }

    /// Prepares the statements on every node measured (a node knows only what it was asked to
    /// prepare; the ids are the same everywhere).
    pub async fn prepare_everywhere(&mut self) -> Result<()> {
        let mut ids = None;
        for conn in &mut self.metrics {
            let here = legacy::prepare(conn, &self.mix).await?;
            if ids.as_ref().is_some_and(|i| *i != here) {
                bail!("the nodes returned different prepared ids for the same statements");
            }
            ids = Some(here);
        }
        self.ids = ids.context("no node")?;
        Ok(())
    }

    /// Runs one phase of `mode`: `ops` operations (or `seconds`), with the counters around it.
    pub async fn phase(
        &mut self,
        mode: Mode,
        round: usize,
        ops: u64,
        seconds: u64,
        rate: Option<f64>,
    ) -> Result<Phase> {
        let form = mode.form(&self.ids, self.args.prepare_each_bind_value);
        let router = match mode {
            Mode::DirectTokenAware => Some(
                self.router
                    .clone()
                    .context("direct-token-aware needs --cluster")?,
            ),
            _ => None,
        };
        let addrs: Vec<String> = match (self.proxy_of(mode), &router) {
            (Some(p), _) => vec![p.addr.clone()],
            (None, Some(r)) => r.nodes().iter().map(|n| n.addr.to_string()).collect(),
            (None, None) => vec![self.args.upstream.clone()],
        };
        let w = Arc::new(Legacy {
            mix: self.mix,
            form,
            keys: self.args.keys,
            insert_offset: self.next_insert,
            millis: self.millis,
            router,
        });
        // load::run numbers requests sent * 64 + connection.
        self.next_insert += ops.div_ceil(self.args.connections.max(1) as u64) * 64 + 64;
        let before = self.sample(mode, true).await?;
        let t0 = Instant::now();
        let stats = load::run_nodes(
            &addrs,
            w,
            self.args.connections,
            self.args.in_flight,
            Duration::from_secs(seconds),
            ops,
            rate,
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(self.args.settle_ms)).await;
        let after = self.sample(mode, false).await?;
        let wall_s = t0.elapsed().as_secs_f64();
        self.difference(mode, round, stats, &before, &after, wall_s)
    }

    /// The phase of `mode` whose load gave `stats`, from the counters read `before` and
    /// `after` it, `wall_s` apart.
    fn difference(
        &self,
        mode: Mode,
        round: usize,
        stats: Stats,
        before: &Sample,
        after: &Sample,
        wall_s: f64,
    ) -> Result<Phase> {
        let secs = |a: u64, b: u64| a.saturating_sub(b) as f64 / self.ticks;
        let remote = match (&before.remote, &after.remote) {
            (Some(b), Some(a)) => Some(RemoteCpu::deltas(b, a)?),
            _ => None,
        };
        let mut server_s = secs(after.server, before.server);
        let mut node_s: Vec<f64> = after
            .server_nodes
            .iter()
            .zip(&before.server_nodes)
            .map(|(&a, &b)| secs(a, b))
            .collect();
        if self.server_pids.is_empty() {
            // Only the metrics endpoints see the server: theirs is the server's figure.
            let r = remote
                .as_deref()
                .context("no server pid and no metrics endpoint")?;
            server_s = remote_cpu::total(r).cpu_seconds;
            node_s = r.iter().map(|d| d.cpu_seconds).collect();
        }
        let internode = after
            .internode
            .zip(before.internode)
            .map(|(a, b)| a.saturating_sub(b) as f64);
        // The counter reads after the phase that it counted: per node, the internode read
        // before it and after it, and the metrics read itself.
        let reads = if self.remote_counters {
            0.0
        } else {
            self.metrics.len() as f64 * if self.internode { 3.0 } else { 1.0 }
        };
        let proxy_s = after.proxy.zip(before.proxy).map(|(a, b)| secs(a, b));
        let client_s = secs(after.client, before.client);
        let busy_s = secs(after.machine_busy, before.machine_busy);
        let _ = after.machine_total;
        Ok(Phase {
            remote,
            mode,
            round,
            server_s,
            node_s,
            internode,
            wall_s,
            idle_cores: self.idle_cores,
            proxy_s,
            client_s,
            other_s: (busy_s - server_s - proxy_s.unwrap_or(0.0) - client_s).max(0.0),
            regular: after.regular - before.regular - reads,
            prepared: after.prepared - before.prepared,
            evicted: after.evicted - before.evicted,
            estimate: after
                .proxy_counters
                .as_ref()
                .and_then(estimate_check::per_rewritten),
            proxy_counters: before
                .proxy_counters
                .as_ref()
                .zip(after.proxy_counters.as_ref())
                .map(|(b, a)| counter_deltas(b, a)),
            server_syscalls: after.server_sys.zip(before.server_sys).map(|(a, b)| a - b),
            proxy_switches: after.proxy_cs.zip(before.proxy_cs).map(|(a, b)| a - b),
            stats,
        })
    }
}
