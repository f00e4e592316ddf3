//! The counters read before and after a phase: the server's, the nodes' metrics endpoints',
//! the proxy's and this process's CPU, and the statement counters.

use crate::bench::Bench;
use crate::counters::{cql_metrics_sum, internode_sent};
use crate::mode::Mode;
use anyhow::Result;
use autoprep_benches::procfs;
use autoprep_benches::remote_cpu::NodeReading;
use std::collections::BTreeMap;

/// The counters read before and after a phase.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Every node's metrics endpoint (--metrics-url).
    pub remote: Option<Vec<NodeReading>>,
    /// Summed over the nodes.
    pub server: u64,
    pub server_nodes: Vec<u64>,
    pub server_sys: Option<u64>,
    /// Messages the nodes sent one another (a cluster only).
    pub internode: Option<u64>,
    pub proxy_cs: Option<u64>,
    pub proxy: Option<u64>,
    pub client: u64,
    pub machine_busy: u64,
    pub machine_total: u64,
    pub regular: f64,
    pub prepared: f64,
    /// Statements evicted from the prepared cache (summed over the nodes).
    pub evicted: f64,
    /// autoprep's counters (the proxy of the mode, if any).
    pub proxy_counters: Option<BTreeMap<String, f64>>,
}

impl Bench {
    /// Reads every counter; `metrics_first`: the statement counters before the rest (before a
    /// phase), otherwise after.
    pub async fn sample(&mut self, mode: Mode, metrics_first: bool) -> Result<Sample> {
        let remote = match &self.remote {
            Some(r) => Some(r.read().await?),
            None => None,
        };
        let s = self.sample_local(mode, metrics_first).await?;
        if !self.remote_counters {
            return Ok(Sample { remote, ..s });
        }
        let sum = |f: fn(&NodeReading) -> Option<f64>| -> f64 {
            remote.iter().flatten().map(|r| f(r).unwrap_or(0.0)).sum()
        };
        Ok(Sample {
            regular: sum(|r| r.regular),
            prepared: sum(|r| r.prepared),
            evicted: sum(|r| r.evicted),
            remote,
            ..s
        })
    }

    async fn sample_local(&mut self, mode: Mode, metrics_first: bool) -> Result<Sample> {
        // Each read of the counters is a regular statement of its node: `metrics_first` keeps
        // the reads before the phase out of it, and the reads after it are subtracted.
        let mut m = (0.0, 0.0, 0.0);
        let mut internode = None;
        if metrics_first && !self.remote_counters {
            m = cql_metrics_sum(&mut self.metrics).await?;
        }
        if self.internode {
            internode = Some(internode_sent(&mut self.metrics).await?);
        }
        let proxy = match self.proxy_of(mode) {
            Some(p) => Some(procfs::process_ticks(p.child.id())?),
            None => None,
        };
        let (machine_busy, machine_total) = procfs::machine_ticks()?;
        let proxy_cs = self
            .proxy_of(mode)
            .and_then(|p| procfs::process_context_switches(p.child.id()));
        let proxy_counters = match self.proxy_of(mode) {
            Some(p) => p.counters().await,
            None => None,
        };
        let server_nodes = self
            .server_pids
            .iter()
            .map(|&p| procfs::process_ticks(p))
            .collect::<Result<Vec<_>>>()?;
        let s = Sample {
            remote: None,
            server: server_nodes.iter().sum(),
            server_nodes,
            server_sys: if self.server_pids.is_empty() {
                None
            } else {
                self.server_pids
                    .iter()
                    .map(|&p| procfs::process_syscalls(p))
                    .sum()
            },
            internode,
            proxy_cs,
            proxy,
            client: procfs::process_ticks(std::process::id())?,
            machine_busy,
            machine_total,
            regular: m.0,
            prepared: m.1,
            evicted: m.2,
            proxy_counters,
        };
        if metrics_first || self.remote_counters {
            return Ok(s);
        }
        let m = cql_metrics_sum(&mut self.metrics).await?;
        Ok(Sample {
            regular: m.0,
            prepared: m.1,
            evicted: m.2,
            ..s
        })
    }
}
