//! The savings benchmark's check of autoprep's estimate of server CPU saved
//! (`autoprep_server_cpu_saved_seconds_total`): the estimate, read from the autoprep the
//! benchmark started, against the saving the nodes measured for the same work.
//!
//! Measured, per round: the server CPU per operation of that round's `direct-unprepared` phase,
//! times the operations of its `autoprep` phase, less the server CPU of that phase: what the
//! cluster did not spend on the autoprep phase's work because autoprep ran it. Estimated: the
//! estimate per rewritten QUERY at the end of the phase, times the QUERYs it rewrote. The ratio
//! of the sums over the rounds is the figure the README's acceptance reads (0.75 to 1.33).

use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The series of autoprep's `/metrics` the check reads.
pub const SAVED: &str = "autoprep_server_cpu_saved_seconds_total";
pub const REWRITTEN: &str = "autoprep_rewritable_queries_total{arm=\"rewritten\"}";
pub const HALF_LOW: &str = "autoprep_server_cpu_saved_interval_seconds{bound=\"low\"}";
pub const HALF_HIGH: &str = "autoprep_server_cpu_saved_interval_seconds{bound=\"high\"}";

/// The estimate per rewritten QUERY, and its 95 % bounds, from a reading of `/metrics`.
pub fn per_rewritten(counters: &BTreeMap<String, f64>) -> Option<(f64, f64, f64)> {
    let n = *counters.get(REWRITTEN)?;
    let saved = *counters.get(SAVED)?;
    if n <= 0.0 || !saved.is_finite() {
        return None;
    }
    let low = counters.get(HALF_LOW).copied().unwrap_or(f64::NAN);
    let high = counters.get(HALF_HIGH).copied().unwrap_or(f64::NAN);
    Some((saved / n, low / n, high / n))
}

/// One round's figures.
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub round: usize,
    /// Server CPU seconds per operation of the round's direct-unprepared phase.
    pub direct_per_op: f64,
    /// The autoprep phase: operations, server CPU seconds, QUERYs rewritten, autoprep's CPU.
    pub ops: f64,
    pub server_s: f64,
    pub rewritten: f64,
    pub proxy_s: Option<f64>,
    /// The estimate per rewritten QUERY at the end of the phase (and its bounds).
    pub estimate: Option<(f64, f64, f64)>,
}

impl Round {
    fn measured(&self) -> f64 {
        self.direct_per_op * self.ops - self.server_s
    }
}

/// Prints the check and returns it as JSON (`null` figures where a round lacks them).
pub fn report(label: &str, rounds: &[Round]) -> Value {
    let usable: Vec<&Round> = rounds.iter().filter(|r| r.estimate.is_some()).collect();
    let measured: f64 = usable.iter().map(|r| r.measured()).sum();
    let estimated: f64 = usable
        .iter()
        .map(|r| r.estimate.map_or(0.0, |e| e.0) * r.rewritten)
        .sum();
    let rewritten: f64 = usable.iter().map(|r| r.rewritten).sum();
    let ops: f64 = usable.iter().map(|r| r.ops).sum();
    let proxy: Option<f64> = usable.iter().map(|r| r.proxy_s).sum();
    let ratio = (measured != 0.0 && !usable.is_empty()).then(|| estimated / measured);
    let last = usable.last().and_then(|r| r.estimate);
    println!(
        "\nserver CPU saved ({label}): estimate {} us per rewritten QUERY{}, measured {} us: estimate / measured {} (target 0.75 to 1.33)",
        fmt(rewritten, estimated),
        last.map_or(String::new(), |(_, l, h)| format!(
            " (95 % interval at the end {:.1} to {:.1})",
            l * 1e6,
            h * 1e6
        )),
        fmt(rewritten, measured),
        ratio.map_or("-".into(), |r| format!("{r:.2}")),
    );
    if let Some(p) = proxy {
        println!(
            "  autoprep's own CPU {:.1} us per operation; net of the measured saving {:.1} us per operation",
            p * 1e6 / ops.max(1.0),
            (measured - p) * 1e6 / ops.max(1.0)
        );
    }
    for r in rounds {
        println!(
            "  round {}: direct {:.1} us/op, through autoprep {:.1} us/op, {} rewritten; measured {:.1} us, estimated {} us per rewritten QUERY",
            r.round,
            r.direct_per_op * 1e6,
            r.server_s * 1e6 / r.ops.max(1.0),
            r.rewritten,
            r.measured() * 1e6 / r.rewritten.max(1.0),
            r.estimate.map_or("-".into(), |e| format!("{:.1}", e.0 * 1e6)),
        );
    }
    json!({
        "source": label,
        "estimate_us_per_rewritten": (rewritten > 0.0).then(|| estimated * 1e6 / rewritten),
        "measured_us_per_rewritten": (rewritten > 0.0).then(|| measured * 1e6 / rewritten),
        "interval_us_at_end": last.map(|(_, l, h)| [l * 1e6, h * 1e6]),
        "estimate_over_measured": ratio,
        "target": "0.75 to 1.33",
        "met": ratio.map(|r| (0.75..=1.33).contains(&r)),
        "autoprep_own_us_per_op": proxy.map(|p| p * 1e6 / ops.max(1.0)),
        "net_saved_us_per_op": proxy.map(|p| (measured - p) * 1e6 / ops.max(1.0)),
        "rounds": rounds.iter().map(|r| json!({
            "round": r.round,
            "direct_us_per_op": r.direct_per_op * 1e6,
            "autoprep_us_per_op": r.server_s * 1e6 / r.ops.max(1.0),
            "rewritten": r.rewritten,
            "measured_us_per_rewritten": r.measured() * 1e6 / r.rewritten.max(1.0),
            "estimate_us_per_rewritten": r.estimate.map(|e| e.0 * 1e6),
        })).collect::<Vec<_>>(),
    })
}

fn fmt(n: f64, total: f64) -> String {
    if n > 0.0 {
        format!("{:.1}", total * 1e6 / n)
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_compares_the_sums_over_rounds() {
        let mut c = BTreeMap::new();
        c.insert(REWRITTEN.to_owned(), 1000.0);
        c.insert(SAVED.to_owned(), 0.025);
        c.insert(HALF_LOW.to_owned(), 0.02);
        c.insert(HALF_HIGH.to_owned(), 0.03);
        let e = per_rewritten(&c).unwrap();
        assert!((e.0 - 25e-6).abs() < 1e-12 && (e.1 - 20e-6).abs() < 1e-12);
        let r = Round {
            round: 0,
            direct_per_op: 170e-6,
            ops: 10_000.0,
            server_s: 1.45,
            rewritten: 9_500.0,
            proxy_s: Some(0.05),
            estimate: Some(e),
        };
        // Measured: 1.70 - 1.45 = 0.25 s; estimated 25 us x 9,500 = 0.2375 s.
        let v = report("proc", &[r]);
        let ratio = v["estimate_over_measured"].as_f64().unwrap();
        assert!((ratio - 0.95).abs() < 1e-9, "{ratio}");
        assert_eq!(v["met"], json!(true));
        c.insert(SAVED.to_owned(), f64::NAN);
        assert_eq!(per_rewritten(&c), None);
    }
}
