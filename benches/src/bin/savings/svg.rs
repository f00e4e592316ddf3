//! The chart of a run, drawn from its result document (so that committed results can be drawn
//! again with `--replot`).

use anyhow::{Context, Result};
use autoprep_benches::chart;
use serde_json::Value;

/// What the chart's subtitle says about a run.
fn subtitle(doc: &Value) -> String {
    let st = &doc["settings"];
    let n = |k: &str| st[k].as_f64().unwrap_or(0.0);
    let rounds = doc["phases"]
        .as_array()
        .and_then(|p| p.iter().filter_map(|x| x["round"].as_u64()).max())
        .map_or(0, |r| r + 1);
    format!(
        "Cassandra {}, {} mix, {} timestamps, {} connections × {} in flight{}, median of {rounds} rounds × {} ops, {}",
        doc["server"]["release"].as_str().unwrap_or("?"),
        st["mix"].as_str().unwrap_or("?"),
        st["timestamp_literal"].as_str().unwrap_or("iso"),
        n("connections"),
        n("in_flight"),
        st["rate"]
            .as_f64()
            .map_or(" (closed loop)".into(), |r| format!(" at {r:.0} op/s")),
        n("ops_per_phase"),
        doc["date"].as_str().unwrap_or("").get(..10).unwrap_or(""),
    )
}

/// Which CPUs the run pinned, if it did (for the chart; the subtitle has no room left).
fn pinned(settings: &Value) -> Option<String> {
    match (
        settings["server_cpus"].as_str(),
        settings["client_cpus"].as_str(),
    ) {
        (None, None) => None,
        (server, client) => Some(format!(
            "CPUs: server {}, client + autoprep {}",
            server.unwrap_or("all"),
            client.unwrap_or("all")
        )),
    }
}

/// The chart of a result document (what `--json` writes), so that committed results can be
/// drawn again with `--replot`.
pub fn svg_from_doc(doc: &Value) -> String {
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let empty = Vec::new();
    let modes = doc["modes"].as_array().unwrap_or(&empty);
    let phases = doc["phases"].as_array().unwrap_or(&empty);
    let rounds_of = |mode: &str, k: &str| -> Vec<f64> {
        phases
            .iter()
            .filter(|p| p["mode"] == mode)
            .filter_map(|p| f(p, k))
            .collect()
    };
    let bars: Vec<chart::Bar> = modes
        .iter()
        .map(|m| {
            let name = m["mode"].as_str().unwrap_or("?");
            chart::Bar {
                mode: name.into(),
                server_us: f(m, "server_us_per_op").unwrap_or(f64::NAN),
                proxy_us: f(m, "autoprep_us_per_op"),
                server_rounds: rounds_of(name, "server_us_per_op"),
                ops: f(m, "ops_per_sec").unwrap_or(f64::NAN),
                ops_rounds: rounds_of(name, "ops_per_sec"),
            }
        })
        .collect();
    let server_of = |mode: &str| {
        modes
            .iter()
            .find(|m| m["mode"] == mode)
            .and_then(|m| f(m, "server_us_per_op"))
    };
    let mut lines = Vec::new();
    if let Some(u) = server_of("direct-unprepared") {
        lines.push(chart::Line {
            label: "target 0.70 × unprepared".into(),
            us: u * 0.70,
            color: "#a03030".into(),
        });
    }
    if let Some(p) = server_of("direct-prepared") {
        lines.push(chart::Line {
            label: "target 1.10 × prepared".into(),
            us: p * 1.10,
            color: "#4a7a20".into(),
        });
    }
    if let Some(t) = server_of("direct-token-aware") {
        lines.push(chart::Line {
            label: "target 1.05 × token-aware".into(),
            us: t * 1.05,
            color: "#4a7a20".into(),
        });
    }
    if let (Some(u), Some(1)) = (
        server_of("autoprep-unrouted"),
        doc["server"]["replication_factor"].as_u64(),
    ) {
        lines.push(chart::Line {
            label: "target 0.85 × unrouted".into(),
            us: u * 0.85,
            color: "#a03030".into(),
        });
    }
    let footer = doc["ratios"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter(|r| !r["target"].is_null())
        .filter_map(|r| {
            let name = r["name"].as_str()?.trim_start_matches("server CPU/op: ");
            Some(format!("{name} = {:.2}", f(r, "median")?))
        })
        .chain(
            f(&doc["autoprep_us_per_rewritten_op"], "median")
                .map(|u| format!("autoprep {u:.1} µs/op")),
        )
        .chain(pinned(&doc["settings"]))
        .collect::<Vec<_>>()
        .join(" · ");
    let nodes = doc["server"]["nodes"].as_array().map_or(0, Vec::len);
    let title = if nodes > 1 {
        format!(
            "Cluster CPU per operation, summed over {nodes} nodes (RF {})",
            doc["server"]["replication_factor"].as_u64().unwrap_or(0)
        )
    } else {
        "Cassandra CPU per operation: legacy unprepared vs autoprep vs prepared".to_owned()
    };
    chart::render(
        &title,
        &subtitle(doc),
        &bars,
        &lines,
        &format!("server CPU/op {footer}"),
    )
}

/// `--replot`: draws the chart of the result document `from` into `to`.
pub fn replot(from: &str, to: &str) -> Result<()> {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(from).with_context(|| format!("read {from}"))?,
    )?;
    std::fs::write(to, svg_from_doc(&doc)).with_context(|| format!("write {to}"))?;
    println!("wrote {to}");
    Ok(())
}
