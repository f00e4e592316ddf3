//! The ratios between modes that a run reports (server CPU, throughput, the forwarder's own
//! CPU and latency), per round and as medians, with the issues' targets; and autoprep's own CPU
//! per rewritten operation.

use crate::mode::Mode::{self, *};
use crate::phase::Phase;
use crate::summary::median;

/// A ratio with its target: its value (the median of the per-round ratios unless its name
/// says otherwise), every round's, and the target (`<=` or `>=` a bound), if it has one.
pub struct Ratio {
    pub name: &'static str,
    pub value: f64,
    pub rounds: Vec<f64>,
    pub target: Option<(&'static str, f64)>,
}

impl Ratio {
    /// Whether the target is met (`None` without a target).
    pub fn met(&self) -> Option<bool> {
        self.target.map(|(op, t)| match op {
            "<=" => self.value <= t,
            _ => self.value >= t,
        })
    }
}

/// What a ratio compares, per phase.
#[derive(Debug, Clone, Copy)]
enum Metric {
    /// Server CPU per operation.
    Server,
    /// Server CPU per operation from the metrics endpoints.
    Remote,
    /// Server CPU per operation beyond the nodes' idle use.
    AboveIdle,
    /// Operations per second.
    Throughput,
    /// The proxy's (or the splice's) own CPU per operation.
    Forwarder,
}

impl Metric {
    fn of(self, p: &Phase) -> f64 {
        match self {
            Metric::Server => p.server_us(),
            Metric::Remote => p.remote_us().unwrap_or(f64::NAN),
            Metric::AboveIdle => p.server_above_idle_us().unwrap_or(f64::NAN),
            Metric::Throughput => p.stats.ops_per_sec(),
            Metric::Forwarder => p
                .proxy_s
                .map_or(f64::NAN, |s| s * 1e6 / p.stats.ops.max(1) as f64),
        }
    }
}

/// A ratio's target.
#[derive(Debug, Clone, Copy)]
enum Target {
    None,
    Always(&'static str, f64),
    /// Only at replication factor 1, where every replica is one node.
    AtRf1(&'static str, f64),
}

/// A ratio of `metric` between two modes, reported when both ran.
struct Spec(&'static str, Mode, Mode, Metric, Target);

/// The same savings from the metrics endpoints' CPU, where /proc is read too (without a pid,
/// the figures of [`SPECS`] are the endpoints' already).
const REMOTE_SPECS: [Spec; 3] = [
    Spec(
        "metrics CPU/op: autoprep / direct-unprepared",
        Autoprep,
        DirectUnprepared,
        Metric::Remote,
        Target::None,
    ),
    Spec(
        "metrics CPU/op: autoprep / direct-prepared",
        Autoprep,
        DirectPrepared,
        Metric::Remote,
        Target::None,
    ),
    Spec(
        "metrics CPU/op: direct-prepared / direct-unprepared",
        DirectPrepared,
        DirectUnprepared,
        Metric::Remote,
        Target::None,
    ),
];

/// Every other ratio, in the order reported.
const SPECS: [Spec; 29] = {
    use Metric::{AboveIdle, Forwarder, Server, Throughput};
    use Target::{Always, AtRf1};
    const NONE: Target = Target::None;
    [
        // On a cluster: routing against a token-aware driver, and against no routing (the
        // issue's targets; the second is set at replication factor 1).
        Spec(
            "server CPU/op: autoprep / direct-token-aware",
            Autoprep,
            DirectTokenAware,
            Server,
            Always("<=", 1.05),
        ),
        Spec(
            "server CPU/op: autoprep / autoprep-unrouted",
            Autoprep,
            AutoprepUnrouted,
            Server,
            AtRf1("<=", 0.85),
        ),
        Spec(
            "above idle: autoprep / direct-token-aware",
            Autoprep,
            DirectTokenAware,
            AboveIdle,
            NONE,
        ),
        Spec(
            "above idle: autoprep / autoprep-unrouted",
            Autoprep,
            AutoprepUnrouted,
            AboveIdle,
            NONE,
        ),
        Spec(
            "server CPU/op: autoprep-unrouted / direct-unprepared",
            AutoprepUnrouted,
            DirectUnprepared,
            Server,
            NONE,
        ),
        Spec(
            "server CPU/op: direct-token-aware / direct-unprepared",
            DirectTokenAware,
            DirectUnprepared,
            Server,
            NONE,
        ),
        Spec(
            "op/s: autoprep / autoprep-unrouted",
            Autoprep,
            AutoprepUnrouted,
            Throughput,
            NONE,
        ),
        Spec(
            "op/s: autoprep / direct-token-aware",
            Autoprep,
            DirectTokenAware,
            Throughput,
            NONE,
        ),
        Spec(
            "server CPU/op: autoprep / direct-unprepared",
            Autoprep,
            DirectUnprepared,
            Server,
            Always("<=", 0.70),
        ),
        Spec(
            "server CPU/op: autoprep / direct-prepared",
            Autoprep,
            DirectPrepared,
            Server,
            Always("<=", 1.10),
        ),
        Spec(
            "server CPU/op: direct-prepared / direct-unprepared",
            DirectPrepared,
            DirectUnprepared,
            Server,
            NONE,
        ),
        Spec(
            "server CPU/op: passthrough / direct-unprepared",
            Passthrough,
            DirectUnprepared,
            Server,
            NONE,
        ),
        Spec(
            "server CPU/op: proxied-prepared / direct-prepared",
            ProxiedPrepared,
            DirectPrepared,
            Server,
            NONE,
        ),
        Spec(
            "server CPU/op: autoprep / proxied-prepared",
            Autoprep,
            ProxiedPrepared,
            Server,
            NONE,
        ),
        Spec(
            "op/s: autoprep / direct-unprepared",
            Autoprep,
            DirectUnprepared,
            Throughput,
            NONE,
        ),
        Spec(
            "op/s: autoprep / direct-prepared",
            Autoprep,
            DirectPrepared,
            Throughput,
            NONE,
        ),
        Spec(
            "op/s: direct-prepared / direct-unprepared",
            DirectPrepared,
            DirectUnprepared,
            Throughput,
            NONE,
        ),
        Spec(
            "op/s: passthrough / direct-unprepared",
            Passthrough,
            DirectUnprepared,
            Throughput,
            NONE,
        ),
        // The second legacy pattern, a PREPARE of each formatted statement (issue 17): through
        // autoprep against an application that prepares its statements with markers.
        Spec(
            "server CPU/op: autoprep-prepare-each / direct-prepared",
            AutoprepPrepareEach,
            DirectPrepared,
            Server,
            Always("<=", 1.10),
        ),
        Spec(
            "server CPU/op: autoprep-prepare-each / direct-prepare-each",
            AutoprepPrepareEach,
            DirectPrepareEach,
            Server,
            NONE,
        ),
        Spec(
            "server CPU/op: direct-prepare-each / direct-prepared",
            DirectPrepareEach,
            DirectPrepared,
            Server,
            NONE,
        ),
        Spec(
            "server CPU/op: direct-prepare-each / direct-unprepared",
            DirectPrepareEach,
            DirectUnprepared,
            Server,
            NONE,
        ),
        Spec(
            "server CPU/op: autoprep-prepare-each / autoprep",
            AutoprepPrepareEach,
            Autoprep,
            Server,
            NONE,
        ),
        Spec(
            "op/s: autoprep-prepare-each / direct-prepare-each",
            AutoprepPrepareEach,
            DirectPrepareEach,
            Throughput,
            NONE,
        ),
        Spec(
            "op/s: autoprep-prepare-each / direct-prepared",
            AutoprepPrepareEach,
            DirectPrepared,
            Throughput,
            NONE,
        ),
        Spec(
            "op/s: direct-prepare-each / direct-prepared",
            DirectPrepareEach,
            DirectPrepared,
            Throughput,
            NONE,
        ),
        // The proxy's own cost against the byte splice's, passing the same stream.
        Spec(
            "forwarder CPU/op: proxied-prepared / splice-prepared",
            ProxiedPrepared,
            SplicePrepared,
            Forwarder,
            Always("<=", 1.30),
        ),
        Spec(
            "forwarder CPU/op: autoprep / splice-unprepared",
            Autoprep,
            SpliceUnprepared,
            Forwarder,
            Always("<=", 1.75),
        ),
        Spec(
            "op/s: proxied-prepared / splice-prepared",
            ProxiedPrepared,
            SplicePrepared,
            Throughput,
            Always(">=", 0.97),
        ),
    ]
};

/// Every ratio between the modes that ran, in the order reported; `remote_and_proc`: the
/// server's CPU was read from /proc and from the metrics endpoints both.
pub fn compute(
    phases: &[Phase],
    modes: &[Mode],
    rf: Option<usize>,
    remote_and_proc: bool,
) -> Vec<Ratio> {
    let has = |m: Mode| modes.contains(&m);
    let remote = REMOTE_SPECS.iter().filter(|_| remote_and_proc);
    let mut ratios: Vec<Ratio> = remote
        .chain(&SPECS)
        .filter(|Spec(_, a, b, _, _)| has(*a) && has(*b))
        .map(|&Spec(name, a, b, metric, target)| {
            let rounds = paired(phases, a, b, |p| metric.of(p));
            Ratio {
                name,
                value: median(rounds.clone()),
                rounds,
                target: match target {
                    Target::None => None,
                    Target::Always(op, t) => Some((op, t)),
                    Target::AtRf1(op, t) => (rf == Some(1)).then_some((op, t)),
                },
            }
        })
        .collect();
    if has(DirectPrepared) && has(ProxiedPrepared) && has(SplicePrepared) {
        ratios.push(p50_added(phases));
    }
    ratios
}

/// Latency the forwarder adds over direct, at the same concurrency (run with --connections 1
/// --in-flight 1 for the one-in-flight figure). A few µs added against rounds whose p50
/// moves by tens of µs: a per-round ratio of two such differences swings wildly (and its sign
/// with them), so the figure judged is the ratio of the two medians over the rounds; the
/// per-round ratios are shown.
fn p50_added(phases: &[Phase]) -> Ratio {
    let p50 = |p: &Phase| f64::from(p.stats.quantile_us(0.5));
    let added = |p: &Phase| {
        let direct = phases
            .iter()
            .find(|d| d.round == p.round && d.mode == DirectPrepared);
        direct.map_or(f64::NAN, |d| p50(p) - p50(d))
    };
    let of = |m: Mode| median(phases.iter().filter(|p| p.mode == m).map(added).collect());
    Ratio {
        name: "p50 added over direct (medians): proxied / splice",
        value: of(ProxiedPrepared) / of(SplicePrepared),
        rounds: paired(phases, ProxiedPrepared, SplicePrepared, added),
        target: Some(("<=", 1.20)),
    }
}

/// Per-round ratios of `f(a) / f(b)` for the rounds where both modes ran.
fn paired(phases: &[Phase], a: Mode, b: Mode, f: impl Fn(&Phase) -> f64) -> Vec<f64> {
    let rounds = phases.iter().map(|p| p.round).max().map_or(0, |r| r + 1);
    (0..rounds)
        .filter_map(|r| {
            let x = phases.iter().find(|p| p.round == r && p.mode == a)?;
            let y = phases.iter().find(|p| p.round == r && p.mode == b)?;
            Some(f(x) / f(y))
        })
        .collect()
}

/// Prints the ratios with their targets and rounds.
pub fn print(ratios: &[Ratio]) {
    println!();
    println!("ratios (median of the per-round ratios)              value   target    rounds");
    for r in ratios {
        println!(
            "  {:<58} {:>6.3}   {:<9} {}",
            r.name,
            r.value,
            match (r.target, r.met()) {
                (Some((op, t)), Some(met)) =>
                    format!("{op} {t:.2} {}", if met { "met" } else { "MISSED" }),
                _ => String::new(),
            },
            r.rounds
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// autoprep's own CPU per rewritten operation: the rewritten operations are the EXECUTEs the
/// server counted during autoprep's phases.
pub struct Rewritten {
    /// Whether `autoprep` ran.
    pub measured: bool,
    /// µs per rewritten operation, per round.
    pub rounds: Vec<f64>,
    /// Their median.
    pub median: f64,
    /// The share of autoprep's operations the server ran as EXECUTEs.
    pub share: f64,
}

impl Rewritten {
    /// From the `autoprep` phases.
    pub fn of(phases: &[Phase]) -> Rewritten {
        let auto: Vec<&Phase> = phases.iter().filter(|p| p.mode == Autoprep).collect();
        let rounds: Vec<f64> = auto
            .iter()
            .filter_map(|p| Some(p.proxy_s? * 1e6 / p.prepared.max(1.0)))
            .collect();
        let share = auto.iter().map(|p| p.prepared).sum::<f64>()
            / auto.iter().map(|p| p.stats.ops).sum::<u64>().max(1) as f64;
        Rewritten {
            measured: !auto.is_empty(),
            median: median(rounds.clone()),
            rounds,
            share,
        }
    }

    /// Prints the figure against its target (5 µs), if `autoprep` ran.
    pub fn print(&self) {
        if !self.measured {
            return;
        }
        let proxy_us = self.median;
        println!(
            "  {:<58} {:>6.3}   {:<9} {}",
            "autoprep CPU per rewritten operation, µs",
            proxy_us,
            format!("<= 5.00 {}", if proxy_us <= 5.0 { "met" } else { "MISSED" }),
            self.rounds
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        println!(
            "  {:<58} {:>6.3}",
            "share of autoprep's operations run as EXECUTE", self.share
        );
    }
}
