//! The savings benchmark: what autoprep saves the server.
//!
//! A legacy workload (time-series inserts, point selects, updates with their values inline as
//! literals) runs against one Cassandra node in interleaved modes:
//!
//! - `direct-unprepared`: the literal QUERYs, straight to the server;
//! - `autoprep`: the same QUERY stream through an autoprep process this program starts;
//! - `direct-prepared`: the same statements as EXECUTEs of server-prepared ids, straight to the
//!   server (what the application would cost if it had been rewritten);
//! - `passthrough` (optional): the QUERY stream through a second autoprep with `--rewrite false`;
//! - `proxied-prepared` (optional): the EXECUTE stream of `direct-prepared` through the autoprep
//!   of `autoprep`, which passes EXECUTEs through: what being behind a proxy alone costs the
//!   server, apart from the rewrite;
//! - `splice-unprepared`, `splice-prepared` (optional): the QUERY stream, and the EXECUTE
//!   stream, through a byte-splice forwarder (`autoprep_benches::splice`, a process of its own
//!   that this program starts): the yardstick of the proxy's own CPU per operation, throughput
//!   and added latency;
//! - `direct-prepare-each`, `autoprep-prepare-each` (optional): the second legacy pattern, an
//!   application that PREPAREs each formatted statement (the values inline, so every
//!   operation's text is distinct) and EXECUTEs the returned id once, as gocql does with every
//!   statement an application formats with `fmt.Sprintf`: straight to the server (a parse, a
//!   prepared-cache insert and an eviction, and a round trip more per operation), and through
//!   the autoprep of `autoprep` (`--prepare-literals`, its default: answered from the shape).
//!   `direct-prepared` is their reference. The server's prepared-cache evictions per operation
//!   (`prepared_statements_evicted`) and, through autoprep, the changes of its counters
//!   (`/metrics`) are reported per phase.
//!
//! On a cluster (`--cluster`: the local one of `scripts/cluster.sh`, every node's pid and
//! address from `scripts/cluster.sh info`), the server is every node: its CPU per operation is
//! the sum over the nodes, the statement counters are summed too, and `--upstream` is node 1.
//! Two more modes compare routing:
//!
//! - `autoprep-unrouted`: the QUERY stream through an autoprep with `--routing false`, which
//!   sends every rewritten EXECUTE to node 1, the coordinator that forwards it to the replicas;
//! - `direct-token-aware`: the EXECUTE stream straight to the cluster from a token-aware client
//!   (`autoprep_benches::token_aware`: the ring and the keyspace's replication read from
//!   `system.local`, `system.peers_v2` and `system_schema.keyspaces`, replicas computed with
//!   the `autoprep-routing` crate), each statement sent over the connection's socket to a
//!   replica of its partition: what a token-aware driver costs the cluster.
//!
//! `autoprep` then runs with `--routing true` (its default), and the internode messages the
//! nodes sent per operation (`system_views.internode_outbound`) show the forwarding that routing
//! saves.
//!
//! Per mode it reports op/s, p50/p99 latency, server CPU per operation (utime + stime of the
//! server process from /proc), autoprep's own CPU per operation, the statements the server
//! counted in `system_views.cql_metrics`, and the ratios against the targets; as a table, as
//! JSON (`--json`) and as an SVG chart (`--svg`).
//!
//! Against a cluster whose processes this machine cannot see (staging, managed, containers),
//! `--metrics-url` reads each node's CPU from its Prometheus metrics endpoint instead
//! (`autoprep_benches::remote_cpu`: Cassandra through jmx_exporter, ScyllaDB's own), and on
//! ScyllaDB, which has no `system_views.cql_metrics`, its statement counts too. With a local pid
//! as well, both CPU figures are measured in the same phases and both sets of ratios reported.
//! The benchmark writes only to its own keyspace (`autoprep_benches::bench_keyspace`: marked,
//! checked before anything is written, any other keyspace of its name refused), and every phase
//! is bounded (`--ops`, `--phase-seconds`, `--rounds`, `--max-seconds`, `--keys`).
//!
//! ```text
//! cargo build --release -p autoprep -p autoprep-benches
//! target/release/savings --mix insert --json savings.json --svg savings.svg
//! target/release/savings --cluster \
//!     --modes direct-unprepared,autoprep-unrouted,autoprep,direct-token-aware
//! target/release/savings --upstream 10.0.0.5:9042 \
//!     --metrics-url n1=http://10.0.0.5:9180,n2=http://10.0.0.6:9180,n3=http://10.0.0.7:9180
//! ```

mod args;
mod bench;
mod counters;
mod estimate;
mod mode;
mod output;
mod phase;
mod proxy;
mod ratios;
mod report;
mod rounds;
mod sample;
mod setup;
mod summary;
mod svg;

use anyhow::Result;
use args::Args;
use clap::Parser;
use phase::Phase;
use std::time::Instant;
use summary::Summary;

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(listen) = &args.serve_splice {
        return autoprep_benches::splice::serve(listen, &args.upstream).await;
    }
    if let (Some(from), Some(to)) = (&args.replot, &args.svg) {
        return svg::replot(from, to);
    }
    let started = Instant::now();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let (mut b, run) = setup::start(args).await?;
    report::print_start(&b, &run);
    b.idle_cores = rounds::idle_cores(&b, !run.nodes.is_empty()).await?;
    let warmups = rounds::warm_up(&mut b, &run.modes).await?;
    let phases = rounds::measure(&mut b, &run.modes, started).await?;

    let summaries: Vec<Summary> = run
        .modes
        .iter()
        .map(|&m| {
            let ps: Vec<&Phase> = phases.iter().filter(|p| p.mode == m).collect();
            summary::summarize(m, &ps)
        })
        .collect();
    report::print_tables(&b, &run, &summaries, &phases);
    let remote_and_proc = !b.server_pids.is_empty() && b.remote.is_some();
    let ratios = ratios::compute(&phases, &run.modes, run.rf, remote_and_proc);
    ratios::print(&ratios);
    let estimate = estimate::check_estimate(&phases);
    let rewritten = ratios::Rewritten::of(&phases);
    rewritten.print();
    let foreign = report::print_foreign(&phases);
    println!("run took {:.0} s", started.elapsed().as_secs_f64());
    let results = output::Results {
        warmups: &warmups,
        phases: &phases,
        summaries: &summaries,
        ratios: &ratios,
        rewritten: &rewritten,
        estimate,
        foreign,
    };
    output::write(&b, &run, &command, &results)?;
    // The proxies stop before the CPU affinities are restored.
    drop(b);
    drop(run);
    Ok(())
}
