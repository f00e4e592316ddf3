//! The command line.

use autoprep_benches::legacy;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Server CPU per operation: unprepared, through autoprep, prepared")]
pub struct Args {
    /// The Cassandra node.
    #[arg(long, default_value = "127.0.0.1:9042")]
    pub upstream: String,
    /// Pid of the server process (default: the CassandraDaemon listening on the upstream port).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Measure a local cluster: the nodes (address, pid) are those `SCRIPT info` lists (the
    /// `AUTOPREP_CLUSTER_*` variables pass through), the server's CPU is the sum over them, and
    /// --upstream is node 1.
    #[arg(
        long,
        value_name = "SCRIPT",
        num_args = 0..=1,
        default_missing_value = "scripts/cluster.sh",
        conflicts_with = "server_pid"
    )]
    pub cluster: Option<String>,
    /// Each node's Prometheus metrics endpoint, `[NAME=]http://HOST:PORT[/PATH]`, separated by
    /// commas: the server's CPU is read from them (Cassandra: jmx_exporter's
    /// cassandra_process_cpu_seconds_total or the javaagent's process_cpu_seconds_total;
    /// ScyllaDB: scylla_reactor_cpu_busy_ms), summed over the nodes. List every node the
    /// workload reaches. With --server-pid (or --cluster) too, /proc is read as well and both
    /// figures are reported.
    #[arg(long, value_delimiter = ',', value_name = "URLS")]
    pub metrics_url: Vec<String>,
    /// The benchmark keyspace's replication, a CQL map (an existing keyspace is altered to it),
    /// such as "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 1}".
    #[arg(long, default_value = legacy::DEFAULT_REPLICATION)]
    pub replication: String,
    /// Run as the byte-splice forwarder on this address (how the splice modes start it).
    #[arg(long, hide = true)]
    pub serve_splice: Option<String>,
    /// The autoprep binary to start in front of the server.
    #[arg(long, default_value = "target/release/autoprep")]
    pub autoprep_bin: String,
    /// Where the started autoprep listens (the pass-through one listens on the next port, the
    /// splice on the one after, the unrouted autoprep on the one after that).
    #[arg(long, default_value = "127.0.0.1:19044")]
    pub listen: String,
    /// More arguments for every autoprep the benchmark starts, one per flag (such as
    /// `--autoprep-arg=--server-metrics-url=http://{host}:7070/metrics`, which turns on the
    /// estimate of server CPU saved that the run then checks against what it measured).
    #[arg(long, allow_hyphen_values = true, value_name = "ARG")]
    pub autoprep_arg: Vec<String>,
    /// autoprep's --admission-threshold.
    #[arg(long, default_value_t = 2)]
    pub admission_threshold: u32,
    /// Modes, measured in this order with the order rotated every round: direct-unprepared,
    /// autoprep, direct-prepared, passthrough, proxied-prepared, splice-unprepared,
    /// splice-prepared, autoprep-unrouted, direct-token-aware, direct-prepare-each,
    /// autoprep-prepare-each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "direct-unprepared,autoprep,direct-prepared"
    )]
    pub modes: Vec<String>,
    /// Statement mix: `insert`, or weights such as `insert=8,select=1,update=1`.
    #[arg(long, default_value = "insert")]
    pub mix: String,
    /// How the literal statements write timestamps: `iso` ('2027-01-01 00:00:00.000+0000') or
    /// `millis` (1798761600000).
    #[arg(long, default_value = "iso")]
    pub timestamp_literal: String,
    /// In the prepare-each modes, keep the value of inserts and updates as a `?` marker in the
    /// prepared text and bind it on the EXECUTE (the other values stay inline).
    #[arg(long)]
    pub prepare_each_bind_value: bool,
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Requests in flight per connection (concurrency = connections × in-flight).
    #[arg(long, default_value_t = 16)]
    pub in_flight: usize,
    /// Offered load in operations per second over all connections (default: closed loop, as
    /// fast as the concurrency allows). A rate every mode sustains compares server CPU at the
    /// same load rather than each mode at its own saturation.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Operations per measured phase (one mode, one round).
    #[arg(long, default_value_t = 200_000)]
    pub ops: u64,
    /// A phase also ends after this many seconds.
    #[arg(long, default_value_t = 40)]
    pub phase_seconds: u64,
    /// Milliseconds to wait after each phase's load before reading the counters, so that work
    /// the phase leaves behind (garbage collection, memtable flushes) is counted in the phase
    /// rather than in the next one.
    #[arg(long, default_value_t = 1500)]
    pub settle_ms: u64,
    /// Measured rounds; each runs every mode once, in an order that cycles through every
    /// permutation of the modes, so that each mode follows each other mode equally often.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Unprepared warm-up operations sent directly before measuring (the server's JIT needs on
    /// the order of a million for its unprepared figures to settle); the other modes warm up
    /// with a third of this.
    #[arg(long, default_value_t = 300_000)]
    pub warmup_ops: u64,
    /// Upper bound of the warm-up, seconds.
    #[arg(long, default_value_t = 150)]
    pub warmup_seconds: u64,
    /// No round starts after this many seconds of the run (at least one round runs).
    #[arg(long, default_value_t = 1200)]
    pub max_seconds: u64,
    /// Rows that selects and updates address (written before the run).
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Keep the table's rows from earlier runs (by default the table is truncated first).
    #[arg(long)]
    pub keep_data: bool,
    /// Leave automatic compaction of the benchmark table on. By default it is off: it costs
    /// the server the same in every mode, but it starts whenever enough SSTables have gathered,
    /// and a 50 MB merge held the server's core for 10-30 s inside whichever phase it fell in.
    /// Selects read every SSTable of a partition, though, so a mix with selects
    /// grows dearer phase after phase without it: turn it on for those.
    #[arg(long)]
    pub compaction: bool,
    /// Pin the server's threads (every node's, with --cluster) to these CPUs for the run (a
    /// `taskset -c` list such as `1`);
    /// its former affinity is restored at the end (a run killed before that leaves it pinned:
    /// `taskset -a -p -c 0-N PID` undoes it).
    #[arg(long)]
    pub server_cpus: Option<String>,
    /// Pin this load generator, and the autoprep it starts, to these CPUs (such as `0`): with
    /// --server-cpus, the proxy no longer takes CPU from the server, as in a deployment where
    /// autoprep runs beside the application and the cluster on hosts of its own.
    #[arg(long)]
    pub client_cpus: Option<String>,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<String>,
    /// Write the chart as SVG here.
    #[arg(long)]
    pub svg: Option<String>,
    /// Only draw the chart (--svg) of an earlier run's JSON; no server needed.
    #[arg(long, requires = "svg")]
    pub replot: Option<String>,
}
