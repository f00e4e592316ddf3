//! Per-mode medians over the measured rounds.

use crate::mode::Mode;
use crate::phase::Phase;
use std::collections::BTreeMap;

/// The median of the finite values (NaN when there is none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per-mode medians over the measured rounds.
pub struct Summary {
    pub mode: Mode,
    /// Server CPU per operation from the metrics endpoints (median).
    pub remote_us: Option<f64>,
    pub ops: u64,
    pub errors: u64,
    pub error_codes: BTreeMap<i32, u64>,
    pub ops_per_sec: f64,
    pub p50: f64,
    pub p99: f64,
    pub server_us: f64,
    pub proxy_us: Option<f64>,
    pub client_us: f64,
    pub other_cores: f64,
    pub regular_per_op: f64,
    pub prepared_per_op: f64,
    /// Requests sent per operation (2 for a PREPARE and its EXECUTE).
    pub requests_per_op: f64,
    /// Statements evicted from the server's prepared cache per operation.
    pub evicted_per_op: f64,
    pub server_syscalls_per_op: f64,
    pub proxy_switches_per_op: Option<f64>,
    /// Per node, µs of CPU per operation (medians).
    pub node_us: Vec<f64>,
    pub internode_per_op: Option<f64>,
    pub server_above_idle_us: Option<f64>,
}

/// The summary of `mode` over its measured phases.
pub fn summarize(mode: Mode, phases: &[&Phase]) -> Summary {
    let m = |f: &dyn Fn(&Phase) -> f64| median(phases.iter().map(|p| f(p)).collect());
    let ops: u64 = phases.iter().map(|p| p.stats.ops).sum();
    Summary {
        mode,
        remote_us: (!phases.is_empty() && phases.iter().all(|p| p.remote.is_some()))
            .then(|| m(&|p| p.remote_us().unwrap_or(f64::NAN))),
        ops,
        errors: phases.iter().map(|p| p.stats.errors).sum(),
        error_codes: phases.iter().flat_map(|p| &p.stats.error_codes).fold(
            BTreeMap::new(),
            |mut m, (&c, &n)| {
                *m.entry(c).or_default() += n;
                m
            },
        ),
        ops_per_sec: m(&|p| p.stats.ops_per_sec()),
        p50: m(&|p| f64::from(p.stats.quantile_us(0.5))),
        p99: m(&|p| f64::from(p.stats.quantile_us(0.99))),
        server_us: m(&|p| p.server_us()),
        proxy_us: phases
            .iter()
            .all(|p| p.proxy_s.is_some())
            .then(|| m(&|p| p.proxy_us().unwrap_or(f64::NAN))),
        client_us: m(&|p| p.per_op_us(p.client_s)),
        other_cores: m(&|p| p.other_s / p.stats.elapsed.as_secs_f64().max(1e-9)),
        server_syscalls_per_op: m(&|p| {
            p.server_syscalls
                .map_or(f64::NAN, |n| n as f64 / p.stats.ops.max(1) as f64)
        }),
        proxy_switches_per_op: phases.iter().all(|p| p.proxy_switches.is_some()).then(|| {
            m(&|p| {
                p.proxy_switches
                    .map_or(f64::NAN, |n| n as f64 / p.stats.ops.max(1) as f64)
            })
        }),
        regular_per_op: phases.iter().map(|p| p.regular).sum::<f64>() / ops.max(1) as f64,
        prepared_per_op: phases.iter().map(|p| p.prepared).sum::<f64>() / ops.max(1) as f64,
        requests_per_op: phases.iter().map(|p| p.stats.requests).sum::<u64>() as f64
            / ops.max(1) as f64,
        evicted_per_op: phases.iter().map(|p| p.evicted).sum::<f64>() / ops.max(1) as f64,
        node_us: (0..phases.first().map_or(0, |p| p.node_s.len()))
            .map(|n| m(&|p| p.node_s.get(n).map_or(f64::NAN, |&s| p.per_op_us(s))))
            .collect(),
        internode_per_op: phases
            .iter()
            .all(|p| p.internode.is_some())
            .then(|| m(&|p| p.internode_per_op().unwrap_or(f64::NAN))),
        server_above_idle_us: phases
            .iter()
            .all(|p| p.idle_cores.is_some())
            .then(|| m(&|p| p.server_above_idle_us().unwrap_or(f64::NAN))),
    }
}
