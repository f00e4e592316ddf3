//! autoprep's estimate of the server CPU it saves, against the saving the run measured.

use crate::mode::Mode;
use crate::phase::Phase;
use autoprep_benches::estimate_check;
use serde_json::{json, Value};

/// autoprep's estimate of server CPU saved against the saving measured (`estimate_check`), from
/// /proc and from the metrics endpoints where both were read; `null` when no autoprep phase
/// carried an estimate.
pub fn check_estimate(phases: &[Phase]) -> Value {
    let direct = |round: usize| {
        phases
            .iter()
            .find(|p| p.mode == Mode::DirectUnprepared && p.round == round)
    };
    let rounds = |server: fn(&Phase) -> Option<f64>| -> Vec<estimate_check::Round> {
        phases
            .iter()
            .filter(|p| p.mode == Mode::Autoprep)
            .filter_map(|p| {
                let d = direct(p.round)?;
                Some(estimate_check::Round {
                    round: p.round,
                    direct_per_op: server(d)? / d.stats.ops.max(1) as f64,
                    ops: p.stats.ops as f64,
                    server_s: server(p)?,
                    rewritten: p
                        .proxy_counters
                        .as_ref()
                        .and_then(|c| c.get(estimate_check::REWRITTEN).copied())
                        .unwrap_or(0.0),
                    proxy_s: p.proxy_s,
                    estimate: p.estimate,
                })
            })
            .collect()
    };
    if !phases.iter().any(|p| p.estimate.is_some()) {
        return Value::Null;
    }
    let proc = rounds(|p| Some(p.server_s));
    let remote = rounds(|p| p.remote_total().map(|t| t.cpu_seconds));
    json!({
        "proc": estimate_check::report("node CPU from /proc", &proc),
        "metrics_endpoints": (!remote.is_empty())
            .then(|| estimate_check::report("node CPU from the metrics endpoints", &remote)),
    })
}
