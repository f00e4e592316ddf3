//! Everything before the first phase: the server found (its nodes, pids and metrics
//! endpoints), the run pinned to its CPUs, the benchmark's keyspace claimed and its schema made,
//! the statements prepared, the keyed rows written, and the proxies the modes need started.

use crate::args::Args;
use crate::bench::Bench;
use crate::counters::cql_metrics;
use crate::mode::Mode;
use crate::proxy::{port_after, Proxy};
use anyhow::{bail, Context, Result};
use autoprep_benches::affinity::Pinned;
use autoprep_benches::bench_keyspace;
use autoprep_benches::cluster::{self, ClusterNode};
use autoprep_benches::legacy::{self, Mix, Preload};
use autoprep_benches::load::{self, Conn};
use autoprep_benches::procfs;
use autoprep_benches::remote_cpu::{NodeReading, RemoteCpu};
use autoprep_benches::token_aware::TokenAware;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What the run found before its first phase, and what it holds until its end.
pub struct Run {
    /// `--modes`, in their order.
    pub modes: Vec<Mode>,
    /// The cluster's nodes (`--cluster`); empty on a single server.
    pub nodes: Vec<ClusterNode>,
    /// The server's `release_version`.
    pub release: String,
    /// The benchmark keyspace's replication factor, where the ring was read.
    pub rf: Option<usize>,
    /// CPUs this machine has.
    pub machine_cpus: usize,
    /// The server's and this process's CPU affinities, restored when dropped.
    _pinned: (Vec<Pinned>, Option<Pinned>),
    /// The connection that set the run up, kept open to its end.
    _setup: Conn,
}

/// Where the server is.
struct Server {
    nodes: Vec<ClusterNode>,
    /// The address `--upstream` resolves to.
    contact: SocketAddr,
    remote: Option<RemoteCpu>,
    /// The server's process, or every node's on a cluster.
    pids: Vec<u32>,
    /// The metrics endpoints' first reading.
    remote_first: Option<Vec<NodeReading>>,
}

/// The proxies the modes need.
struct Proxies {
    autoprep: Option<Proxy>,
    passthrough: Option<Proxy>,
    splice: Option<Proxy>,
    unrouted: Option<Proxy>,
}

/// Sets the run up from its arguments.
pub async fn start(mut args: Args) -> Result<(Bench, Run)> {
    let mix = Mix::parse(&args.mix)?;
    let modes = args
        .modes
        .iter()
        .map(|m| Mode::parse(m))
        .collect::<Result<Vec<_>>>()?;
    if modes.is_empty() {
        bail!("no modes");
    }
    let server = locate(&mut args).await?;
    let ticks = procfs::clock_ticks_per_sec();
    let machine_cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    // Before the proxy starts, so that it inherits the load generator's CPUs.
    let pinned = pin(&args, &server.pids)?;

    let mut setup = Conn::connect(&args.upstream).await?;
    let release = release(&mut setup).await?;
    let remote_counters = statement_counters(&mut setup, server.remote_first.as_deref()).await?;
    let ids = schema(&mut setup, &args, &mix).await?;
    let router = router(&mut setup, &server, &modes).await?;
    let rf = router.as_ref().map(|r| r.replication_factor());
    if mix.select + mix.update > 0 {
        preload(&mut setup, &args).await?;
    }
    let millis = match args.timestamp_literal.as_str() {
        "iso" => false,
        "millis" => true,
        t => bail!("--timestamp-literal {t:?}: iso or millis"),
    };
    let proxies = Proxies::start(&args, &modes).await?;
    let mut metrics = vec![Conn::connect(&args.upstream).await?];
    for n in server.nodes.iter().skip(1) {
        metrics.push(Conn::connect(&n.addr.to_string()).await?);
    }
    let mut b = Bench {
        remote: server.remote,
        remote_counters,
        splice: proxies.splice,
        server_pids: server.pids,
        ticks,
        metrics,
        internode: !server.nodes.is_empty(),
        idle_cores: None,
        mix,
        ids,
        autoprep: proxies.autoprep,
        passthrough: proxies.passthrough,
        unrouted: proxies.unrouted,
        router,
        next_insert: 0,
        millis,
        args,
    };
    if server.nodes.len() > 1 {
        b.prepare_everywhere().await?;
    }
    let run = Run {
        modes,
        nodes: server.nodes,
        release,
        rf,
        machine_cpus,
        _pinned: pinned,
        _setup: setup,
    };
    Ok((b, run))
}

/// The server's nodes (`--cluster`: node 1 becomes `--upstream`), pids and metrics endpoints,
/// each endpoint read once before anything is written, so that a wrong URL fails here.
async fn locate(args: &mut Args) -> Result<Server> {
    let nodes: Vec<ClusterNode> = match &args.cluster {
        Some(script) => cluster::nodes(script)?,
        None => Vec::new(),
    };
    if let Some(first) = nodes.first() {
        args.upstream = first.addr.to_string();
    }
    let contact = std::net::ToSocketAddrs::to_socket_addrs(&args.upstream)
        .with_context(|| format!("resolve {}", args.upstream))?
        .next()
        .context("--upstream must be host:port")?;
    let remote = match args.metrics_url.is_empty() {
        true => None,
        false => Some(RemoteCpu::parse(&args.metrics_url)?),
    };
    let pids: Vec<u32> = match (nodes.is_empty(), args.server_pid) {
        (false, _) => nodes.iter().map(|n| n.pid).collect(),
        (true, Some(p)) => vec![p],
        // With metrics endpoints, /proc is read too only for a pid named: a local process found
        // by its port could be another server than the one measured (behind a port forward).
        (true, None) if remote.is_some() => Vec::new(),
        (true, None) => vec![procfs::find_cassandra(contact)?],
    };
    let remote_first = match &remote {
        Some(r) => {
            let readings = r.read().await?;
            for (e, n) in r.endpoints.iter().zip(&readings) {
                println!(
                    "metrics endpoint {} (http://{}{}): {}, CPU from {} ({:.1} s so far)",
                    e.name,
                    e.addr,
                    e.path,
                    n.server.name(),
                    n.cpu_series,
                    n.cpu_seconds
                );
            }
            Some(readings)
        }
        None => None,
    };
    Ok(Server {
        nodes,
        contact,
        remote,
        pids,
        remote_first,
    })
}

/// Pins the server's threads (`--server-cpus`) and this process's (`--client-cpus`).
fn pin(args: &Args, server_pids: &[u32]) -> Result<(Vec<Pinned>, Option<Pinned>)> {
    let server = match &args.server_cpus {
        Some(cpus) => server_pids
            .iter()
            .map(|&p| Pinned::pin(p, cpus))
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    let client = match &args.client_cpus {
        Some(cpus) => Some(Pinned::pin(std::process::id(), cpus)?),
        None => None,
    };
    Ok((server, client))
}

/// The server's `release_version` (empty if unread).
async fn release(setup: &mut Conn) -> Result<String> {
    Ok(setup
        .rows("SELECT release_version FROM system.local")
        .await?
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_default())
}

/// Where the server's statement counters come from: system_views.cql_metrics (Cassandra 4+,
/// `false`), or the metrics endpoints' where the server has no such table (ScyllaDB, `true`).
async fn statement_counters(
    setup: &mut Conn,
    remote_first: Option<&[NodeReading]>,
) -> Result<bool> {
    match cql_metrics(setup).await {
        Ok(_) => Ok(false),
        Err(e) => match remote_first {
            Some(r)
                if r.iter()
                    .all(|n| n.regular.is_some() && n.prepared.is_some()) =>
            {
                println!(
                    "no system_views.cql_metrics ({e:#}): statements counted from the metrics \
                     endpoints"
                );
                Ok(true)
            }
            _ => Err(e.context(
                "the server's statement counters: system_views.cql_metrics, or \
                 --metrics-url endpoints that export them",
            )),
        },
    }
}

/// Claims the benchmark's keyspace (nothing is written before it is known to be the
/// benchmark's own), makes its schema and prepares the statements: their ids.
async fn schema(setup: &mut Conn, args: &Args, mix: &Mix) -> Result<[Vec<u8>; 3]> {
    match bench_keyspace::claim(setup, &args.replication).await? {
        bench_keyspace::Ownership::Absent => {
            println!(
                "keyspace {}: created, marked as the benchmark's",
                legacy::KEYSPACE
            )
        }
        bench_keyspace::Ownership::Earlier => println!(
            "keyspace {}: earlier runs' (only the benchmarks' tables), marked as the benchmark's",
            legacy::KEYSPACE
        ),
        _ => {}
    }
    legacy::create_schema(setup, &args.replication, !args.keep_data, args.compaction).await?;
    legacy::prepare(setup, mix).await
}

/// The token-aware client's view of the ring (also what tells the replication factor), on a
/// cluster or for `direct-token-aware`.
async fn router(
    setup: &mut Conn,
    server: &Server,
    modes: &[Mode],
) -> Result<Option<Arc<TokenAware>>> {
    let nodes = &server.nodes;
    if nodes.is_empty() && !modes.contains(&Mode::DirectTokenAware) {
        return Ok(None);
    }
    let r = TokenAware::read(setup, server.contact, legacy::KEYSPACE).await?;
    let seen: Vec<_> = r.nodes().iter().map(|n| n.addr).collect();
    if !nodes.is_empty() && nodes.iter().any(|n| !seen.contains(&n.addr)) {
        bail!("the ring lists the nodes {seen:?}, not all those of the cluster script");
    }
    if nodes.is_empty() && seen.len() > 1 {
        // Its requests reach every node, and only one would be measured.
        bail!(
            "direct-token-aware on a ring of {} nodes needs --cluster",
            seen.len()
        );
    }
    Ok(Some(Arc::new(r)))
}

/// Writes the rows that selects and updates address (`--keys`).
async fn preload(setup: &mut Conn, args: &Args) -> Result<()> {
    let id = setup.prepare(&legacy::Op::Insert.prepared_text()).await?;
    let s = load::run(
        &args.upstream,
        Arc::new(Preload { id }),
        1,
        64,
        Duration::from_secs(120),
        args.keys,
    )
    .await?;
    if s.errors > 0 {
        bail!("{} errors writing the {} keyed rows", s.errors, args.keys);
    }
    Ok(())
}

impl Proxies {
    /// Starts those the modes go through: autoprep (`--listen`), the pass-through autoprep (the
    /// next port), the splice (the one after) and the unrouted autoprep (the one after that).
    async fn start(args: &Args, modes: &[Mode]) -> Result<Proxies> {
        let any = |of: &[Mode]| of.iter().any(|m| modes.contains(m));
        let autoprep = if any(&[
            Mode::Autoprep,
            Mode::ProxiedPrepared,
            Mode::AutoprepPrepareEach,
        ]) {
            Some(Proxy::start(args, &args.listen, true, true).await?)
        } else {
            None
        };
        let passthrough = if any(&[Mode::Passthrough]) {
            let addr = port_after(&args.listen, 1)?;
            Some(Proxy::start(args, &addr, false, false).await?)
        } else {
            None
        };
        let splice = if any(&[Mode::SpliceUnprepared, Mode::SplicePrepared]) {
            Some(Proxy::splice(args, &port_after(&args.listen, 2)?).await?)
        } else {
            None
        };
        let unrouted = if any(&[Mode::AutoprepUnrouted]) {
            Some(Proxy::start(args, &port_after(&args.listen, 3)?, true, false).await?)
        } else {
            None
        };
        Ok(Proxies {
            autoprep,
            passthrough,
            splice,
            unrouted,
        })
    }
}
