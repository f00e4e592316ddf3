//! What the run prints as it goes and at its end: the settings, each phase, and the tables of
//! per-mode medians (with the metrics endpoints' CPU, the prepare-each modes' requests and
//! evictions, autoprep's counters, and the nodes of a cluster).

use crate::bench::Bench;
use crate::mode::Mode;
use crate::output::error_codes;
use crate::phase::Phase;
use crate::setup::Run;
use crate::summary::Summary;
use std::collections::BTreeMap;

/// The server's pids, separated by commas.
pub fn pid_list(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// `v` with `prec` decimals, or `-`.
fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |u| format!("{u:.prec$}"))
}

/// What the run measures, and how.
pub fn print_start(b: &Bench, run: &Run) {
    let a = &b.args;
    let (nodes, rf, release) = (&run.nodes, run.rf, &run.release);
    let pids = pid_list(&b.server_pids);
    let server = if nodes.is_empty() {
        format!("pid {pids} at {}", a.upstream)
    } else {
        format!(
            "{} nodes (pids {pids}; node 1 at {}), keyspace replication {} (RF {})",
            nodes.len(),
            a.upstream,
            a.replication,
            rf.unwrap_or(0)
        )
    };
    let server = match (&b.remote, b.server_pids.is_empty()) {
        (Some(r), true) => format!(
            "at {} (CPU from the metrics endpoints of {} nodes)",
            a.upstream,
            r.endpoints.len()
        ),
        (Some(r), false) => format!(
            "{server}; CPU also from the metrics endpoints of {} nodes",
            r.endpoints.len()
        ),
        (None, _) => server,
    };
    println!(
        "savings: Cassandra {release} {server}, mix {} ({} timestamps), {} connections × {} in flight{}, {} rounds of {} ops (≤ {} s) per mode",
        b.mix.describe(),
        a.timestamp_literal,
        a.connections,
        a.in_flight,
        a.rate.map_or(" closed loop".into(), |r| format!(" at {r:.0} op/s")),
        a.rounds,
        a.ops,
        a.phase_seconds
    );
    if a.server_cpus.is_some() || a.client_cpus.is_some() {
        println!(
            "pinned: server on CPUs {}, load generator and autoprep on CPUs {}",
            a.server_cpus.as_deref().unwrap_or("(all)"),
            a.client_cpus.as_deref().unwrap_or("(all)")
        );
    }
}

/// One line per phase, as it ends.
pub fn print_phase(p: &Phase) {
    let s = &p.stats;
    println!(
        "  round {:<2} {:<21} {:>8} ops {:>8.0} op/s  p50 {:>6} µs  p99 {:>6} µs  server {:>6.2} µs/op{}{}  other load {:.2} cores  regular {:.0} prepared {:.0}{}",
        p.round,
        p.mode.name(),
        s.ops,
        s.ops_per_sec(),
        s.quantile_us(0.5),
        s.quantile_us(0.99),
        p.server_us(),
        if p.node_s.len() > 1 {
            format!(
                " ({})  internode {:.2}/op",
                p.node_s
                    .iter()
                    .map(|&n| format!("{:.1}", p.per_op_us(n)))
                    .collect::<Vec<_>>()
                    .join(" + "),
                p.internode_per_op().unwrap_or(f64::NAN)
            )
        } else {
            String::new()
        },
        p.proxy_us()
            .map(|u| format!("  autoprep {u:>5.2} µs/op"))
            .unwrap_or_default()
            + &p.remote_us()
                .map(|u| format!("  metrics endpoint {u:>6.2} µs/op"))
                .unwrap_or_default(),
        p.other_s / s.elapsed.as_secs_f64().max(1e-9),
        p.regular,
        p.prepared,
        if s.errors > 0 {
            format!("  ERRORS {} {}", s.errors, error_codes(&s.error_codes))
        } else {
            String::new()
        }
    );
}

/// Every table of per-mode medians.
pub fn print_tables(b: &Bench, run: &Run, summaries: &[Summary], phases: &[Phase]) {
    print_modes(summaries);
    if summaries.iter().any(|s| s.remote_us.is_some()) {
        print_metrics_endpoints(b, summaries);
    }
    let each = [Mode::DirectPrepareEach, Mode::AutoprepPrepareEach];
    if run.modes.iter().any(|m| each.contains(m)) {
        print_prepare_each(summaries);
    }
    print_counters(&run.modes, phases);
    if run.nodes.len() > 1 {
        print_cluster(summaries, run.nodes.len(), b.idle_cores);
    }
}

/// The main table: throughput, latency, CPU and statements per operation.
fn print_modes(summaries: &[Summary]) {
    println!();
    println!(
        "{:<21} {:>8} {:>7} {:>7} {:>8} {:>9} {:>7} {:>6} {:>9} {:>9} {:>8} {:>8} {:>6}",
        "mode (medians)",
        "op/s",
        "p50",
        "p99",
        "server",
        "autoprep",
        "client",
        "other",
        "regular",
        "prepared",
        "server",
        "autoprep",
        "errors"
    );
    println!(
        "{:<21} {:>8} {:>7} {:>7} {:>8} {:>9} {:>7} {:>6} {:>9} {:>9} {:>8} {:>8} {:>6}",
        "",
        "",
        "µs",
        "µs",
        "µs/op",
        "µs/op",
        "µs/op",
        "cores",
        "stmt/op",
        "stmt/op",
        "sysc/op",
        "cs/op",
        ""
    );
    for s in summaries {
        println!(
            "{:<21} {:>8.0} {:>7.0} {:>7.0} {:>8.2} {:>9} {:>7.2} {:>6.2} {:>9.3} {:>9.3} {:>8} {:>8} {:>6}",
            s.mode.name(),
            s.ops_per_sec,
            s.p50,
            s.p99,
            s.server_us,
            opt(s.proxy_us, 2),
            s.client_us,
            s.other_cores,
            s.regular_per_op,
            s.prepared_per_op,
            opt(Some(s.server_syscalls_per_op).filter(|x| x.is_finite()), 2),
            opt(s.proxy_switches_per_op, 2),
            s.errors
        );
    }
    println!(
        "(server sysc/op: read and write system calls per operation, from /proc/PID/io; \
         autoprep cs/op: context switches of its threads per operation, from \
         /proc/PID/task/*/status)"
    );
}

/// The server's CPU from /proc and from the metrics endpoints.
fn print_metrics_endpoints(b: &Bench, summaries: &[Summary]) {
    let proc_seen = !b.server_pids.is_empty();
    println!();
    println!(
        "{:<21} {:>10} {:>10} {:>9}",
        "server CPU (medians)", "/proc", "metrics", "metrics"
    );
    println!(
        "{:<21} {:>10} {:>10} {:>9}",
        "", "µs/op", "µs/op", "/ /proc"
    );
    for s in summaries {
        let r = s.remote_us.unwrap_or(f64::NAN);
        println!(
            "{:<21} {:>10} {:>10.2} {:>9}",
            s.mode.name(),
            opt(Some(s.server_us).filter(|_| proc_seen), 2),
            r,
            opt(Some(r / s.server_us).filter(|_| proc_seen), 3)
        );
    }
    println!(
        "(/proc: utime + stime of the server's pid(s); metrics: the CPU series of each node's \
         metrics endpoint, summed over {} endpoints)",
        b.remote.as_ref().map_or(0, |r| r.endpoints.len())
    );
}

/// Requests and prepared-cache evictions per operation (the prepare-each modes).
fn print_prepare_each(summaries: &[Summary]) {
    println!();
    println!("{:<21} {:>9} {:>12}", "mode", "requests", "prepared-cache");
    println!("{:<21} {:>9} {:>12}", "", "per op", "evictions/op");
    for s in summaries {
        println!(
            "{:<21} {:>9.3} {:>12.3}",
            s.mode.name(),
            s.requests_per_op,
            s.evicted_per_op
        );
    }
    println!(
        "(requests: what the application sent per operation, a PREPARE and its EXECUTE for \
         prepare-each; evictions: system_views.cql_metrics prepared_statements_evicted)"
    );
}

/// How autoprep's counters moved during its phases, summed per mode.
fn print_counters(modes: &[Mode], phases: &[Phase]) {
    for &m in modes {
        let mut sum: BTreeMap<String, f64> = BTreeMap::new();
        let mut ops = 0u64;
        for p in phases.iter().filter(|p| p.mode == m) {
            let Some(c) = &p.proxy_counters else { continue };
            ops += p.stats.ops;
            for (k, v) in c {
                *sum.entry(k.clone()).or_default() += v;
            }
        }
        // The counters (a gauge's change per operation means nothing), bytes left out.
        let interesting = |k: &str| {
            k.split('{').next().is_some_and(|n| n.ends_with("_total")) && !k.contains("bytes")
        };
        if ops == 0 || sum.is_empty() {
            continue;
        }
        println!();
        println!("autoprep's counters during {} (per operation):", m.name());
        for (k, v) in sum.iter().filter(|(k, _)| interesting(k)) {
            println!("  {:<90} {:>10.0} {:>8.4}", k, v, v / ops as f64);
        }
    }
}

/// The nodes of a cluster: CPU per node, above idle, internode messages.
fn print_cluster(summaries: &[Summary], nodes: usize, idle_cores: Option<f64>) {
    println!();
    println!(
        "{:<18} {:>8} {:>10}  {:<24} {:>10}",
        "mode (medians)", "server", "above idle", "per node (1 + 2 + ...)", "internode"
    );
    println!(
        "{:<18} {:>8} {:>10}  {:<24} {:>10}",
        "", "µs/op", "µs/op", "µs/op", "msg/op"
    );
    for s in summaries {
        println!(
            "{:<18} {:>8.2} {:>10}  {:<24} {:>10}",
            s.mode.name(),
            s.server_us,
            opt(s.server_above_idle_us, 2),
            s.node_us
                .iter()
                .map(|u| format!("{u:.1}"))
                .collect::<Vec<_>>()
                .join(" + "),
            opt(s.internode_per_op, 3)
        );
    }
    println!(
        "(server: the sum over the {} nodes; above idle: less what they used with no load \
         ({:.3} cores) over the phase's time; internode: messages the nodes sent one \
         another per operation, from system_views.internode_outbound)",
        nodes,
        idle_cores.unwrap_or(f64::NAN)
    );
}

/// Statements the server counted beyond the benchmark's own during the phases (other clients,
/// the counters' own reads left aside), printed; their number.
pub fn print_foreign(phases: &[Phase]) -> f64 {
    let foreign: f64 = phases
        .iter()
        .map(|p| (p.regular + p.prepared - p.stats.ops as f64).max(0.0))
        .sum();
    let measured_ops: u64 = phases.iter().map(|p| p.stats.ops).sum();
    println!(
        "  statements from other clients during the phases: {foreign:.0} ({:.3}% of ours)",
        foreign * 100.0 / measured_ops.max(1) as f64
    );
    foreign
}
