//! Routing share: which node *coordinated* each request that the Rust `scylla` driver sent at its
//! own defaults (only the consistency set to ONE; default serial consistency LOCAL_SERIAL, default
//! load balancing), either directly to a Cassandra 5.0 cluster or through autoprep (which shows
//! itself to drivers as a single node). The aim is to show that at least 0.99 of the requests
//! are coordinated by the replica that owns their partition.
//!
//! The workload session connects to `--target` only. A second, direct session to `--nodes`
//! creates `<keyspace>.t` (SimpleStrategy, RF 1) and, from its cluster metadata, computes the
//! replica of every operation's key (RF 1: exactly one; it must be one of `--nodes`). The
//! workload is `--ops` operations on random keys in 0..100000, in four kinds of equal share
//! (rotated): unprepared INSERT with literals, unprepared point SELECT with a literal, prepared
//! INSERT, prepared point SELECT.
//!
//! The operations are grouped by the node that owns their key, and the workload runs in one
//! phase per owning node (in `--nodes` order), each split into an unprepared sub-phase (kinds 1
//! and 2, the literal statements a proxy rewrites) and a prepared sub-phase (kinds 3 and 4); the
//! kinds stay interleaved within a sub-phase, each sub-phase runs with `--concurrency` in flight,
//! all through the same workload session. Each node's coordinator counters
//! (`system_views.coordinator_write_latency` / `coordinator_read_latency`, the row for
//! `<keyspace>.t`) are read on that node alone before the first phase and after every sub-phase.
//!
//! Result: in a sub-phase every request is owned by one node, and a sub-phase holds one write kind
//! and one read kind, so per kind every request counted on another node is off replica, and
//! `on_replica = min(counted on the owner, the sub-phase's operations of that kind)`. The share is
//! exact per request, not a per-node count match: `share = Σ on_replica / ops`, reported in all,
//! per kind, and for the unprepared and the prepared kinds apart.
//!
//! Run (through autoprep; for a direct run give a node as `--target`):
//! ```text
//! tests/drivers/rust/target/debug/routing_share --target 127.0.0.1:9043 \
//!     --nodes 127.0.0.51,127.0.0.52,127.0.0.53 --admin 127.0.0.1:9100 --json out.json
//! ```
//! Options: `--keyspace` (lg), `--ops` (60000), `--warmup` (operations over the same session
//! before anything is counted, 0), `--concurrency` (256), `--connections` (driver
//! pool size per host, 4), `--port` (native port of `--nodes`, 9042), `--seed` (1), `--json
//! PATH` (totals, per kind, per family and per phase), `--admin host:port` (autoprep's admin
//! port: its `autoprep_routed*` and `autoprep_home_connections*` metrics are reported too).
//!
//! `--nodes` must list every node that owns a key: the counters of a node left out could not be
//! read. Exits 0 whatever the share (the caller judges), 2 when it could not set up or measure.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::time::Instant;

use futures::StreamExt;
use scylla::client::execution_profile::{ExecutionProfile, ExecutionProfileHandle};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::client::PoolSize;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, Statement};
use scylla::value::{CqlValue, Row};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const USAGE: &str = "usage: routing_share --target host:port --nodes ip,ip,... [--port 9042] \
[--keyspace lg] [--ops 60000] [--warmup 0] [--concurrency 256] [--connections 4] [--seed 1] [--json PATH] \
[--admin host:port]";

/// Keys are drawn from 0..KEYS.
const KEYS: u64 = 100_000;
/// Distinct error messages kept in the histogram; the rest are counted together.
const MAX_MESSAGES: usize = 20;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    target: String,
    nodes: Vec<SocketAddr>,
    keyspace: String,
    ops: usize,
    /// Operations run first and not counted (connections opened, shapes prepared).
    warmup: usize,
    concurrency: usize,
    connections: NonZeroUsize,
    json: Option<String>,
    seed: u64,
    admin: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut opts: BTreeMap<String, String> = BTreeMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(name) = it.next() {
        if name == "--help" || name == "-h" {
            return Err(USAGE.to_string());
        }
        let key = name
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {name:?}\n{USAGE}"))?;
        if !matches!(
            key,
            "target"
                | "nodes"
                | "port"
                | "keyspace"
                | "ops"
                | "warmup"
                | "concurrency"
                | "connections"
                | "json"
                | "seed"
                | "admin"
        ) {
            return Err(format!("unknown option {name}\n{USAGE}"));
        }
        let value = it.next().ok_or_else(|| format!("{name} needs a value"))?;
        opts.insert(key.to_string(), value);
    }
    fn num<T: std::str::FromStr>(
        opts: &BTreeMap<String, String>,
        key: &str,
        default: T,
    ) -> Result<T, String> {
        match opts.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{key}: not a number: {v}")),
        }
    }
    let port: u16 = num(&opts, "port", 9042)?;
    let nodes = opts
        .get("nodes")
        .ok_or_else(|| format!("--nodes is required\n{USAGE}"))?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<SocketAddr>()
                .or_else(|_| s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, port)))
                .map_err(|_| format!("--nodes: not an IP address: {s}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if nodes.is_empty() {
        return Err("--nodes is empty".into());
    }
    let connections: usize = num(&opts, "connections", 4)?;
    let concurrency: usize = num(&opts, "concurrency", 256)?;
    Ok(Args {
        target: opts
            .get("target")
            .cloned()
            .ok_or_else(|| format!("--target is required\n{USAGE}"))?,
        nodes,
        keyspace: opts.get("keyspace").cloned().unwrap_or_else(|| "lg".into()),
        ops: num(&opts, "ops", 60_000)?,
        warmup: num(&opts, "warmup", 0)?,
        concurrency: concurrency.max(1),
        connections: NonZeroUsize::new(connections).ok_or("--connections must be at least 1")?,
        json: opts.get("json").cloned(),
        seed: num(&opts, "seed", 1)?,
        admin: opts.get("admin").cloned(),
    })
}

/// The four kinds of operation, in equal share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    UnpreparedInsert,
    UnpreparedSelect,
    PreparedInsert,
    PreparedSelect,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::UnpreparedInsert,
        Kind::UnpreparedSelect,
        Kind::PreparedInsert,
        Kind::PreparedSelect,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::UnpreparedInsert => "unprepared_insert",
            Kind::UnpreparedSelect => "unprepared_select",
            Kind::PreparedInsert => "prepared_insert",
            Kind::PreparedSelect => "prepared_select",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// 0: write (coordinator_write_latency), 1: read (coordinator_read_latency).
    fn rw(self) -> usize {
        match self {
            Kind::UnpreparedInsert | Kind::PreparedInsert => 0,
            Kind::UnpreparedSelect | Kind::PreparedSelect => 1,
        }
    }

    /// 0: unprepared, 1: prepared.
    fn family(self) -> usize {
        match self {
            Kind::UnpreparedInsert | Kind::UnpreparedSelect => 0,
            Kind::PreparedInsert | Kind::PreparedSelect => 1,
        }
    }

    /// The kind of a family (0 unprepared, 1 prepared) and an rw (0 write, 1 read).
    fn of(family: usize, rw: usize) -> Kind {
        Kind::ALL[2 * family + rw]
    }
}

const RW: [&str; 2] = ["write", "read"];
const FAMILY: [&str; 2] = ["unprepared", "prepared"];
const COUNTER_TABLES: [&str; 2] = [
    "system_views.coordinator_write_latency",
    "system_views.coordinator_read_latency",
];

/// splitmix64: reproducible keys from `--seed` without another dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// node IP → count.
type PerNode = BTreeMap<String, u64>;

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("routing_share: {e}");
            ExitCode::from(2)
        }
    }
}

fn one() -> ExecutionProfile {
    ExecutionProfile::builder()
        .consistency(Consistency::One)
        .build()
}

async fn run(args: &Args) -> Res<()> {
    let ks = args.keyspace.as_str();

    // The direct session: setup, replicas and counters; never through the target.
    let direct = SessionBuilder::new()
        .known_nodes_addr(args.nodes.iter().copied())
        .default_execution_profile_handle(one().into_handle())
        .build()
        .await
        .map_err(|e| format!("connecting to the nodes directly: {e}"))?;
    direct
        .query_unpaged(
            format!(
                "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            ),
            (),
        )
        .await
        .map_err(|e| format!("creating keyspace {ks}: {e}"))?;
    direct
        .query_unpaged(
            format!("CREATE TABLE IF NOT EXISTS {ks}.t (k int PRIMARY KEY, v text)"),
            (),
        )
        .await
        .map_err(|e| format!("creating table {ks}.t: {e}"))?;
    direct
        .await_schema_agreement()
        .await
        .map_err(|e| format!("schema agreement: {e}"))?;
    direct
        .refresh_metadata()
        .await
        .map_err(|e| format!("refreshing metadata: {e}"))?;

    // Every node of --nodes must be in the metadata, or the single-node reads cannot find it.
    let state = direct.get_cluster_state();
    let known: Vec<SocketAddr> = state
        .get_nodes_info()
        .iter()
        .map(|n| SocketAddr::new(n.address.ip(), n.address.port()))
        .collect();
    for addr in &args.nodes {
        if !known.contains(addr) {
            return Err(format!("node {addr} is not in the cluster metadata {known:?}").into());
        }
    }
    let node_profiles: Vec<(String, ExecutionProfileHandle)> = args
        .nodes
        .iter()
        .map(|addr| {
            let profile = ExecutionProfile::builder()
                .consistency(Consistency::One)
                .load_balancing_policy(SingleTargetLoadBalancingPolicy::new(
                    NodeIdentifier::NodeAddress(*addr),
                    None,
                ))
                .build();
            (addr.ip().to_string(), profile.into_handle())
        })
        .collect();

    // The operations and their replicas, computed up front from the direct session's metadata,
    // grouped by owner (index into node_profiles) and family: [owner][family] → operations.
    let node_index: BTreeMap<&str, usize> = node_profiles
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (n.as_str(), i))
        .collect();
    let mut rng = Rng(args.seed);
    let mut phases: Vec<[Vec<(Kind, i32)>; 2]> = vec![Default::default(); node_profiles.len()];
    // [rw][node], and [family][rw][node].
    let mut expected: [PerNode; 2] = Default::default();
    let mut expected_family: [[PerNode; 2]; 2] = Default::default();
    for i in 0..args.ops {
        let kind = Kind::ALL[i % 4];
        let k = (rng.next() % KEYS) as i32;
        let replicas = state
            .get_endpoints(ks, "t", &(k,))
            .map_err(|e| format!("replicas of key {k}: {e}"))?;
        if replicas.len() != 1 {
            return Err(format!(
                "key {k} has {} replicas; {ks} must have replication factor 1",
                replicas.len()
            )
            .into());
        }
        let node = replicas[0].0.address.ip().to_string();
        let owner = *node_index.get(node.as_str()).ok_or_else(|| {
            format!("key {k} is owned by {node}, which is not in --nodes: list every node")
        })?;
        *expected[kind.rw()].entry(node.clone()).or_default() += 1;
        *expected_family[kind.family()][kind.rw()]
            .entry(node)
            .or_default() += 1;
        phases[owner][kind.family()].push((kind, k));
    }
    drop(state);

    // The workload session: the target only, the driver's defaults but for consistency ONE.
    let session = SessionBuilder::new()
        .known_node(&args.target)
        .pool_size(PoolSize::PerHost(args.connections))
        .default_execution_profile_handle(one().into_handle())
        .build()
        .await
        .map_err(|e| format!("connecting to {}: {e}", args.target))?;
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"))
        .await
        .map_err(|e| format!("preparing the INSERT: {e}"))?;
    let select = session
        .prepare(format!("SELECT v FROM {ks}.t WHERE k = ?"))
        .await
        .map_err(|e| format!("preparing the SELECT: {e}"))?;

    // The warm-up: operations of every kind on other keys over the same session, so that the
    // connections are open (through autoprep: its replica connections and the shapes prepared
    // on every node) before anything is counted.
    let warm: Vec<(Kind, i32)> = (0..args.warmup)
        .map(|i| (Kind::ALL[i % 4], (rng.next() % KEYS) as i32))
        .collect();
    let warm_errors = futures::stream::iter(warm.iter().map(|&(kind, k)| {
        let (session, insert, select) = (&session, &insert, &select);
        async move { one_op(session, insert, select, ks, kind, k).await }
    }))
    .buffer_unordered(args.concurrency)
    .filter(|r| futures::future::ready(r.is_err()))
    .count()
    .await;
    if args.warmup > 0 {
        println!(
            "  warm-up: {} ops, {warm_errors} errors (not counted)",
            args.warmup
        );
    }

    // The phases: one per owner, each an unprepared then a prepared sub-phase, the counters read
    // before the first and after each.
    let mut counters = read_counters(&direct, &node_profiles, ks).await?;
    let mut elapsed = 0.0f64;
    let mut errors_by_kind = [0u64; 4];
    let mut messages: BTreeMap<String, u64> = BTreeMap::new();
    // [owner][family].
    let mut subs: Vec<[SubPhase; 2]> = Vec::with_capacity(phases.len());
    for (owner, families) in phases.iter().enumerate() {
        let owner_name = node_profiles[owner].0.as_str();
        let mut pair: [SubPhase; 2] = Default::default();
        for (family, ops) in families.iter().enumerate() {
            let sub = &mut pair[family];
            let started = Instant::now();
            let results: Vec<(Kind, Result<(), String>)> =
                futures::stream::iter(ops.iter().map(|&(kind, k)| {
                    let (session, insert, select) = (&session, &insert, &select);
                    async move { (kind, one_op(session, insert, select, ks, kind, k).await) }
                }))
                .buffer_unordered(args.concurrency)
                .collect()
                .await;
            sub.elapsed = started.elapsed().as_secs_f64();
            elapsed += sub.elapsed;
            let after = read_counters(&direct, &node_profiles, ks).await?;

            for (kind, r) in &results {
                sub.ops[kind.rw()] += 1;
                if let Err(e) = r {
                    sub.errors[kind.rw()] += 1;
                    errors_by_kind[kind.index()] += 1;
                    let msg: String = e.chars().take(100).collect();
                    let mut key = format!("{}: {msg}", kind.name());
                    if !messages.contains_key(&key) && messages.len() >= MAX_MESSAGES {
                        key = "(other messages)".into();
                    }
                    *messages.entry(key).or_default() += 1;
                }
            }
            for (node, b) in &counters {
                let a = after.get(node).copied().unwrap_or_default();
                for rw in 0..2 {
                    let n = a[rw].saturating_sub(b[rw]).max(0) as u64;
                    sub.got[rw].insert(node.clone(), n);
                    if node == owner_name {
                        sub.on_replica[rw] = n.min(sub.ops[rw]);
                    } else {
                        sub.off_replica[rw] += n;
                    }
                }
            }
            counters = after;
        }
        subs.push(pair);
    }
    let admin = match &args.admin {
        None => None,
        Some(addr) => Some(admin_lines(addr).await),
    };
    let errors: u64 = errors_by_kind.iter().sum();

    // Totals: per kind, per family, per rw (got summed over the phases), in all.
    let mut ops_by_kind = [0u64; 4];
    let mut on_by_kind = [0u64; 4];
    let mut off_by_kind = [0u64; 4];
    let mut got: [PerNode; 2] = Default::default();
    for pair in &subs {
        for (family, sub) in pair.iter().enumerate() {
            for (rw, got_rw) in got.iter_mut().enumerate() {
                let kind = Kind::of(family, rw).index();
                ops_by_kind[kind] += sub.ops[rw];
                on_by_kind[kind] += sub.on_replica[rw];
                off_by_kind[kind] += sub.off_replica[rw];
                for (node, n) in &sub.got[rw] {
                    *got_rw.entry(node.clone()).or_default() += n;
                }
            }
        }
    }
    let ratio = |num: u64, den: u64| {
        if den == 0 {
            0.0
        } else {
            num as f64 / den as f64
        }
    };
    let on_replica_rw = |rw: usize| on_by_kind[rw] + on_by_kind[2 + rw];
    let on_replica_family = |f: usize| on_by_kind[2 * f] + on_by_kind[2 * f + 1];
    let ops_family = |f: usize| ops_by_kind[2 * f] + ops_by_kind[2 * f + 1];
    let total_on_replica: u64 = on_by_kind.iter().sum();
    let total_off_replica: u64 = off_by_kind.iter().sum();
    let share = ratio(total_on_replica, args.ops as u64);
    let share_family = [0, 1].map(|f| ratio(on_replica_family(f), ops_family(f)));
    let ops_per_s = if elapsed > 0.0 {
        args.ops as f64 / elapsed
    } else {
        0.0
    };

    // Summary.
    println!(
        "routing_share: target {} nodes {} keyspace {ks}",
        args.target,
        node_profiles
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "  ops {} in {elapsed:.2} s ({ops_per_s:.0} op/s; {} phases × 2, counter reads not timed), \
         concurrency {}, connections {}, errors {errors}",
        args.ops,
        subs.len(),
        args.concurrency,
        args.connections
    );
    for kind in Kind::ALL {
        if errors_by_kind[kind.index()] > 0 {
            println!(
                "    errors {}: {}",
                kind.name(),
                errors_by_kind[kind.index()]
            );
        }
    }
    for (msg, n) in &messages {
        println!("    {n} × {msg}");
    }
    for (owner, pair) in subs.iter().enumerate() {
        let owner_name = node_profiles[owner].0.as_str();
        let phase_ops: u64 = pair.iter().map(|s| s.ops.iter().sum::<u64>()).sum();
        println!(
            "  phase {owner_name}: {phase_ops} ops owned by {owner_name}; got/expected per node"
        );
        for (family, sub) in pair.iter().enumerate() {
            for (rw, rw_name) in RW.iter().enumerate() {
                let per_node: Vec<String> = node_profiles
                    .iter()
                    .map(|(node, _)| {
                        let expect = if node == owner_name { sub.ops[rw] } else { 0 };
                        format!(
                            "{node} {}/{expect}",
                            sub.got[rw].get(node).copied().unwrap_or(0)
                        )
                    })
                    .collect();
                println!(
                    "    {:<10} {:<5} {}  on {} off {}{}",
                    FAMILY[family],
                    rw_name,
                    per_node.join("  "),
                    sub.on_replica[rw],
                    sub.off_replica[rw],
                    if sub.errors[rw] > 0 {
                        format!(" errors {}", sub.errors[rw])
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    for kind in Kind::ALL {
        let i = kind.index();
        println!(
            "  {:<17} on replica {} of {} ({:.4}), off replica {}",
            kind.name(),
            on_by_kind[i],
            ops_by_kind[i],
            ratio(on_by_kind[i], ops_by_kind[i]),
            off_by_kind[i]
        );
    }
    println!(
        "  share unprepared {:.4} ({} of {}), prepared {:.4} ({} of {})",
        share_family[0],
        on_replica_family(0),
        ops_family(0),
        share_family[1],
        on_replica_family(1),
        ops_family(1)
    );
    println!(
        "  share {share:.4} ({total_on_replica} of {} on replica, {total_off_replica} off)",
        args.ops
    );
    if let Some(admin) = &admin {
        match admin {
            Ok(lines) => {
                println!("  autoprep metrics:");
                for l in lines {
                    println!("    {l}");
                }
            }
            Err(e) => println!("  autoprep metrics: {e}"),
        }
    }

    if let Some(path) = &args.json {
        let per_rw = |rw: usize| {
            json!({
                "got": got[rw],
                "expected": expected[rw],
                "on_replica": on_replica_rw(rw),
            })
        };
        let mut by_family = serde_json::Map::new();
        let mut share_by_family = serde_json::Map::new();
        for f in 0..2 {
            by_family.insert(
                FAMILY[f].into(),
                json!({ "write": expected_family[f][0], "read": expected_family[f][1] }),
            );
            share_by_family.insert(
                FAMILY[f].into(),
                json!({
                    "ops": ops_family(f),
                    "on_replica": on_replica_family(f),
                    "share": share_family[f],
                }),
            );
        }
        let by_kind: serde_json::Map<String, Value> = Kind::ALL
            .iter()
            .map(|k| {
                let i = k.index();
                (
                    k.name().to_string(),
                    json!({
                        "ops": ops_by_kind[i],
                        "on_replica": on_by_kind[i],
                        "off_replica": off_by_kind[i],
                        "errors": errors_by_kind[i],
                        "share": ratio(on_by_kind[i], ops_by_kind[i]),
                    }),
                )
            })
            .collect();
        let errors_json: serde_json::Map<String, Value> = Kind::ALL
            .iter()
            .map(|k| (k.name().to_string(), json!(errors_by_kind[k.index()])))
            .collect();
        let phases_json: Vec<Value> = subs
            .iter()
            .enumerate()
            .map(|(owner, pair)| {
                let mut phase = serde_json::Map::new();
                phase.insert("owner".into(), json!(node_profiles[owner].0));
                phase.insert(
                    "ops".into(),
                    json!(pair.iter().map(|s| s.ops.iter().sum::<u64>()).sum::<u64>()),
                );
                for (family, sub) in pair.iter().enumerate() {
                    let rw_json = |rw: usize| {
                        json!({
                            "ops": sub.ops[rw],
                            "errors": sub.errors[rw],
                            "got": sub.got[rw],
                            "on_replica": sub.on_replica[rw],
                            "off_replica": sub.off_replica[rw],
                        })
                    };
                    phase.insert(
                        FAMILY[family].into(),
                        json!({
                            "elapsed_s": sub.elapsed,
                            "write": rw_json(0),
                            "read": rw_json(1),
                        }),
                    );
                }
                Value::Object(phase)
            })
            .collect();
        let doc = json!({
            "target": args.target,
            "nodes": node_profiles.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            "keyspace": ks,
            "ops": args.ops,
            "concurrency": args.concurrency,
            "connections": args.connections.get(),
            "seed": args.seed,
            "elapsed_s": elapsed,
            "ops_per_s": ops_per_s,
            "errors": { "total": errors, "by_kind": errors_json, "messages": messages },
            "write": per_rw(0),
            "read": per_rw(1),
            "expected_by_family": by_family,
            "by_kind": by_kind,
            "share_by_family": share_by_family,
            "phases": phases_json,
            "on_replica": total_on_replica,
            "off_replica": total_off_replica,
            "share": share,
            "admin_metrics": match &admin {
                Some(Ok(lines)) => json!(lines),
                _ => Value::Null,
            },
            "admin_error": match &admin {
                Some(Err(e)) => json!(e),
                _ => Value::Null,
            },
        });
        let text = serde_json::to_string_pretty(&doc)?;
        std::fs::write(path, text + "\n").map_err(|e| format!("writing {path}: {e}"))?;
    }
    Ok(())
}

/// One sub-phase's measure: the operations of one family whose key one node owns. Per rw
/// (0 write, 1 read), which within a family is per kind.
#[derive(Default)]
struct SubPhase {
    ops: [u64; 2],
    errors: [u64; 2],
    /// Counter growth per node over the sub-phase.
    got: [PerNode; 2],
    /// min(growth on the owner, ops).
    on_replica: [u64; 2],
    /// Growth on the other nodes.
    off_replica: [u64; 2],
    elapsed: f64,
}

/// One operation through the workload session; an error as its Display text.
async fn one_op(
    session: &Session,
    insert: &PreparedStatement,
    select: &PreparedStatement,
    ks: &str,
    kind: Kind,
    k: i32,
) -> Result<(), String> {
    let r = match kind {
        Kind::UnpreparedInsert => {
            session
                .query_unpaged(
                    format!("INSERT INTO {ks}.t (k, v) VALUES ({k}, 'v{k}')"),
                    (),
                )
                .await
        }
        Kind::UnpreparedSelect => {
            session
                .query_unpaged(format!("SELECT v FROM {ks}.t WHERE k = {k}"), ())
                .await
        }
        Kind::PreparedInsert => session.execute_unpaged(insert, (k, format!("v{k}"))).await,
        Kind::PreparedSelect => session.execute_unpaged(select, (k,)).await,
    };
    r.map(|_| ()).map_err(|e| e.to_string())
}

/// Each node's coordinator counters for `ks.t`, read on that node alone: node IP → [write, read].
async fn read_counters(
    direct: &Session,
    nodes: &[(String, ExecutionProfileHandle)],
    ks: &str,
) -> Res<BTreeMap<String, [i64; 2]>> {
    let mut out = BTreeMap::new();
    for (node, handle) in nodes {
        let mut counts = [0i64; 2];
        for (rw, table) in COUNTER_TABLES.iter().enumerate() {
            // All rows, filtered here: no doubt about what the virtual table lets WHERE restrict.
            let mut stmt = Statement::new(format!(
                "SELECT keyspace_name, table_name, count FROM {table}"
            ));
            stmt.set_execution_profile_handle(Some(handle.clone()));
            let rows = direct
                .query_unpaged(stmt, ())
                .await
                .map_err(|e| format!("reading {table} on {node}: {e}"))?
                .into_rows_result()
                .map_err(|e| format!("reading {table} on {node}: {e}"))?;
            for row in rows
                .rows::<Row>()
                .map_err(|e| format!("reading {table} on {node}: {e}"))?
            {
                let row = row.map_err(|e| format!("reading {table} on {node}: {e}"))?;
                let text = |i: usize| match row.columns.get(i) {
                    Some(Some(CqlValue::Text(s) | CqlValue::Ascii(s))) => Some(s.as_str()),
                    _ => None,
                };
                if text(0) == Some(ks) && text(1) == Some("t") {
                    counts[rw] = match row.columns.get(2) {
                        Some(Some(CqlValue::BigInt(n))) => *n,
                        Some(Some(CqlValue::Int(n))) => i64::from(*n),
                        Some(Some(CqlValue::Counter(c))) => c.0,
                        Some(None) | None => 0,
                        Some(Some(other)) => {
                            return Err(
                                format!("{table} on {node}: unexpected count {other:?}").into()
                            )
                        }
                    };
                }
            }
        }
        out.insert(node.clone(), counts);
    }
    Ok(out)
}

/// GET http://`admin`/metrics over HTTP/1.0: the `autoprep_routed*` and
/// `autoprep_home_connections*` lines.
async fn admin_lines(admin: &str) -> Result<Vec<String>, String> {
    let err = |e: std::io::Error| format!("admin {admin}: {e}");
    let mut stream = TcpStream::connect(admin).await.map_err(err)?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: autoprep\r\n\r\n")
        .await
        .map_err(err)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.map_err(err)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("admin {admin}: no HTTP header in the answer"))?;
    if head.split_whitespace().nth(1) != Some("200") {
        return Err(format!(
            "admin {admin}/metrics: {}",
            head.lines().next().unwrap_or("")
        ));
    }
    Ok(body
        .lines()
        .filter(|l| l.starts_with("autoprep_routed") || l.starts_with("autoprep_home_connections"))
        .map(str::to_string)
        .collect())
}
