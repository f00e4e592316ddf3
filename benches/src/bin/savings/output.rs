//! The run's result document (`--json`) and its chart (`--svg`).

use crate::bench::Bench;
use crate::phase::Phase;
use crate::ratios::{Ratio, Rewritten};
use crate::setup::Run;
use crate::summary::Summary;
use crate::svg::svg_from_doc;
use anyhow::{Context, Result};
use autoprep_benches::legacy;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// What the run measured, for the document.
pub struct Results<'a> {
    pub warmups: &'a [Phase],
    pub phases: &'a [Phase],
    pub summaries: &'a [Summary],
    pub ratios: &'a [Ratio],
    pub rewritten: &'a Rewritten,
    /// autoprep's estimate of server CPU saved, checked (`estimate::check_estimate`).
    pub estimate: Value,
    /// Statements of other clients the server counted during the phases.
    pub foreign: f64,
}

/// Writes the document and the chart where `--json` and `--svg` say.
pub fn write(b: &Bench, run: &Run, command: &str, results: &Results<'_>) -> Result<()> {
    let doc = document(b, run, command, results);
    if let Some(path) = &b.args.json {
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("write {path}"))?;
        println!("wrote {path}");
    }
    if let Some(path) = &b.args.svg {
        std::fs::write(path, svg_from_doc(&doc)).with_context(|| format!("write {path}"))?;
        println!("wrote {path}");
    }
    Ok(())
}

/// The result document.
fn document(b: &Bench, run: &Run, command: &str, r: &Results<'_>) -> Value {
    let rewritten = r.rewritten;
    json!({
        "benchmark": "autoprep savings",
        "date": now_utc(),
        "command": command,
        "git_rev": git_rev(),
        "server": server(b, run),
        "machine_cpus": run.machine_cpus,
        "settings": settings(b, run),
        "modes": r.summaries.iter().map(summary).collect::<Vec<_>>(),
        "ratios": r.ratios.iter().map(ratio).collect::<Vec<_>>(),
        "autoprep_us_per_rewritten_op": {
            "median": rewritten.median,
            "rounds": rewritten.rounds,
            "target": "<= 5",
            "met": rewritten.measured.then_some(rewritten.median <= 5.0),
        },
        "server_cpu_estimate": r.estimate,
        "autoprep_rewritten_share": rewritten.measured.then_some(rewritten.share),
        "foreign_statements": r.foreign,
        "warmup": r.warmups.iter().map(Phase::json).collect::<Vec<_>>(),
        "phases": r.phases.iter().map(Phase::json).collect::<Vec<_>>(),
    })
}

/// The server measured: its release, pid, address, nodes and replication.
fn server(b: &Bench, run: &Run) -> Value {
    let a = &b.args;
    json!({
        "release": run.release,
        "pid": b.server_pids.first(),
        "address": a.upstream,
        "nodes": run.nodes.iter().map(|n| json!({
            "node": n.number,
            "address": n.addr.to_string(),
            "datacenter": n.datacenter,
            "rack": n.rack,
            "pid": n.pid,
        })).collect::<Vec<_>>(),
        "replication": a.replication,
        "replication_factor": run.rf,
        "idle_cores": b.idle_cores,
    })
}

/// The run's settings.
fn settings(b: &Bench, run: &Run) -> Value {
    let a = &b.args;
    json!({
        "mix": b.mix.describe(),
        "modes": run.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
        "connections": a.connections,
        "in_flight": a.in_flight,
        "rate": a.rate,
        "server_cpus": a.server_cpus,
        "client_cpus": a.client_cpus,
        "timestamp_literal": a.timestamp_literal,
        "prepare_each_bind_value": a.prepare_each_bind_value,
        "ops_per_phase": a.ops,
        "phase_seconds": a.phase_seconds,
        "rounds": a.rounds,
        "settle_ms": a.settle_ms,
        "warmup_ops": a.warmup_ops,
        "keys": a.keys,
        "compaction": a.compaction,
        "admission_threshold": a.admission_threshold,
        "cluster": a.cluster,
        "metrics_urls": a.metrics_url,
        "cpu_source": match (b.server_pids.is_empty(), b.remote.is_some()) {
            (false, false) => "proc",
            (false, true) => "proc and metrics endpoints",
            _ => "metrics endpoints",
        },
        "statement_counters": if b.remote_counters {
            "metrics endpoints"
        } else {
            "system_views.cql_metrics"
        },
        "replication": a.replication,
        "consistency": "ONE",
        "protocol": "v4",
    })
}

/// One mode's medians.
fn summary(s: &Summary) -> Value {
    json!({
        "mode": s.mode.name(),
        "ops": s.ops,
        "errors": s.errors,
        "error_codes": error_codes(&s.error_codes),
        "ops_per_sec": s.ops_per_sec,
        "p50_us": s.p50,
        "p99_us": s.p99,
        "server_us_per_op": s.server_us,
        "server_us_per_op_metrics_endpoint": s.remote_us,
        "server_cpu_s_per_10k_ops": s.server_us / 100.0,
        "autoprep_us_per_op": s.proxy_us,
        "client_us_per_op": s.client_us,
        "other_cpu_cores": s.other_cores,
        "regular_statements_per_op": s.regular_per_op,
        "prepared_statements_per_op": s.prepared_per_op,
        "requests_per_op": s.requests_per_op,
        "prepared_cache_evictions_per_op": s.evicted_per_op,
        "server_syscalls_per_op": s.server_syscalls_per_op,
        "autoprep_context_switches_per_op": s.proxy_switches_per_op,
        "node_us_per_op": s.node_us,
        "internode_messages_per_op": s.internode_per_op,
        "server_us_per_op_above_idle": s.server_above_idle_us,
    })
}

fn ratio(r: &Ratio) -> Value {
    json!({
        "name": r.name,
        "median": r.value,
        "rounds": r.rounds,
        "target": r.target.map(|(op, t)| format!("{op} {t}")),
        "met": r.met(),
    })
}

/// Errors by code, as `{"0x2500": n}` (UNPREPARED: a statement the server no longer knew, still
/// so after the re-prepares of a prepare-each operation).
pub fn error_codes(codes: &BTreeMap<i32, u64>) -> Value {
    Value::Object(
        codes
            .iter()
            .map(|(c, n)| (format!("0x{c:04x}"), json!(n)))
            .collect(),
    )
}

/// `2026-05-04 12:34:56 UTC`.
fn now_utc() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let mut s = String::new();
    legacy::push_timestamp_literal(&mut s, ms / 1000 * 1000);
    format!("{} UTC", &s[1..20])
}

fn git_rev() -> Option<String> {
    let o = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}
