//! What one phase measured ([`Phase`]: the changes of the counters read around it), per
//! operation and as JSON.

use crate::mode::Mode;
use crate::output::error_codes;
use autoprep_benches::load::Stats;
use autoprep_benches::remote_cpu::{self, NodeDelta};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What one phase (one mode in one round) measured.
#[derive(Debug, Clone)]
pub struct Phase {
    pub mode: Mode,
    pub round: usize,
    pub stats: Stats,
    /// From the metrics endpoints (--metrics-url), per node.
    pub remote: Option<Vec<NodeDelta>>,
    /// Summed over the nodes.
    pub server_s: f64,
    /// Per node (one entry on a single server).
    pub node_s: Vec<f64>,
    /// Internode messages sent during the phase (a cluster only).
    pub internode: Option<f64>,
    /// Seconds from the counters before the phase to those after it.
    pub wall_s: f64,
    /// The nodes' CPU with no load, in cores (a cluster only).
    pub idle_cores: Option<f64>,
    pub proxy_s: Option<f64>,
    pub client_s: f64,
    /// CPU seconds of everything else on the machine during the phase.
    pub other_s: f64,
    pub regular: f64,
    pub prepared: f64,
    /// Statements the server evicted from its prepared cache during the phase.
    pub evicted: f64,
    /// How autoprep's counters changed during the phase (the series that did).
    pub proxy_counters: Option<BTreeMap<String, f64>>,
    /// autoprep's estimate of server CPU saved per rewritten QUERY at the end of the phase,
    /// and its 95 % bounds (`estimate_check`).
    pub estimate: Option<(f64, f64, f64)>,
    /// Read and write system calls of the server and of the proxy during the phase.
    pub server_syscalls: Option<u64>,
    pub proxy_switches: Option<u64>,
}

impl Phase {
    /// `secs` of CPU per operation, in microseconds.
    pub fn per_op_us(&self, secs: f64) -> f64 {
        secs * 1e6 / self.stats.ops.max(1) as f64
    }
    /// The server's CPU per operation, µs.
    pub fn server_us(&self) -> f64 {
        self.per_op_us(self.server_s)
    }
    /// The nodes' CPU from their metrics endpoints, summed.
    pub fn remote_total(&self) -> Option<NodeDelta> {
        self.remote.as_deref().map(remote_cpu::total)
    }
    /// The server's CPU per operation from the metrics endpoints, µs.
    pub fn remote_us(&self) -> Option<f64> {
        self.remote_total().map(|t| self.per_op_us(t.cpu_seconds))
    }
    /// What the metrics endpoints said during the phase, per operation.
    fn remote_json(&self) -> Value {
        let Some(t) = self.remote_total() else {
            return Value::Null;
        };
        let per_op = |n: Option<f64>| n.map(|n| n / self.stats.ops.max(1) as f64);
        json!({
            "server_cpu_s": t.cpu_seconds,
            "server_us_per_op": self.per_op_us(t.cpu_seconds),
            "node_us_per_op": self.remote.iter().flatten()
                .map(|d| self.per_op_us(d.cpu_seconds)).collect::<Vec<_>>(),
            "regular_statements": t.regular,
            "prepared_statements": t.prepared,
            "requests_served_per_op": per_op(t.requests_served),
            "statements_parsed_per_op": per_op(t.statements_prepared),
            "cpu_used_us_per_op": t.cpu_used_seconds.map(|c| self.per_op_us(c)),
            "scheduler_runtime_us_per_op": t.scheduler_runtime_seconds.map(|c| self.per_op_us(c)),
        })
    }
    /// The proxy's CPU per operation, µs.
    pub fn proxy_us(&self) -> Option<f64> {
        self.proxy_s.map(|s| self.per_op_us(s))
    }
    /// `n` per operation.
    pub fn per_op(&self, n: f64) -> f64 {
        n / self.stats.ops.max(1) as f64
    }
    /// Internode messages per operation.
    pub fn internode_per_op(&self) -> Option<f64> {
        self.internode.map(|n| n / self.stats.ops.max(1) as f64)
    }
    /// Server CPU per operation beyond what the nodes use with no load over the same time.
    pub fn server_above_idle_us(&self) -> Option<f64> {
        self.idle_cores
            .map(|idle| self.per_op_us(self.server_s - idle * self.wall_s))
    }
    /// The phase as the JSON document lists it.
    pub fn json(&self) -> Value {
        let s = &self.stats;
        json!({
            "mode": self.mode.name(),
            "round": self.round,
            "metrics_endpoint": self.remote_json(),
            "ops": s.ops,
            "errors": s.errors,
            "error_codes": error_codes(&s.error_codes),
            "requests_per_op": self.per_op(s.requests as f64),
            "seconds": s.elapsed.as_secs_f64(),
            "ops_per_sec": s.ops_per_sec(),
            "p50_us": s.quantile_us(0.50),
            "p99_us": s.quantile_us(0.99),
            "server_cpu_s": self.server_s,
            "server_us_per_op": self.server_us(),
            "server_cpu_s_per_10k_ops": self.server_us() / 100.0,
            "node_us_per_op": self.node_s.iter().map(|&s| self.per_op_us(s)).collect::<Vec<_>>(),
            "internode_messages_per_op": self.internode_per_op(),
            "server_us_per_op_above_idle": self.server_above_idle_us(),
            "wall_seconds": self.wall_s,
            "autoprep_cpu_s": self.proxy_s,
            "autoprep_us_per_op": self.proxy_us(),
            "client_us_per_op": self.per_op_us(self.client_s),
            "other_cpu_cores": self.other_s / s.elapsed.as_secs_f64().max(1e-9),
            "regular_statements": self.regular,
            "prepared_statements": self.prepared,
            "prepared_cache_evictions_per_op": self.per_op(self.evicted),
            "autoprep_counters": self.proxy_counters,
            "server_syscalls_per_op": self.server_syscalls.map(|n| n as f64 / s.ops.max(1) as f64),
            "autoprep_context_switches_per_op": self.proxy_switches.map(|n| n as f64 / s.ops.max(1) as f64),
        })
    }
}
