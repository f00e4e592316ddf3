//! The proxy's configuration: command-line flags, each with an `AUTOPREP_*` environment
//! variable behind it.

use clap::Parser;

/// autoprep: a CQL sidecar that turns unprepared statements into prepared ones.
#[derive(Debug, Clone, Parser)]
#[command(name = "autoprep", version, about)]
pub struct Config {
    /// Address the application connects to.
    #[arg(long, env = "AUTOPREP_LISTEN", default_value = "127.0.0.1:9043")]
    pub listen: String,

    /// The Cassandra / ScyllaDB nodes to forward to: host:port, or a comma-separated list of
    /// contact points (each new client connection goes to the next healthy one).
    #[arg(long, env = "AUTOPREP_UPSTREAM", default_value = "127.0.0.1:9042")]
    pub upstream: String,

    /// The address (ip or ip:port) drivers are told is the cluster's only node, in
    /// system.local; default: the listen address. Required when --listen is a wildcard
    /// address (0.0.0.0, [::]); in Kubernetes, the pod IP.
    #[arg(long, env = "AUTOPREP_ADVERTISE_ADDRESS")]
    pub advertise_address: Option<String>,

    /// Largest envelope body accepted from either side, in bytes.
    #[arg(long, env = "AUTOPREP_MAX_FRAME_BYTES", default_value_t = autoprep_protocol::envelope::DEFAULT_MAX_BODY_LEN)]
    pub max_frame_bytes: usize,

    /// How long to wait for the upstream node to accept a connection, in milliseconds.
    #[arg(long, env = "AUTOPREP_CONNECT_TIMEOUT_MS", default_value_t = 5000)]
    pub connect_timeout_ms: u64,

    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `autoprep=debug`.
    #[arg(long, env = "AUTOPREP_LOG", default_value = "info")]
    pub log: String,

    /// Rewrite literal-bearing QUERYs into EXECUTEs of prepared statements (`false`: pure
    /// pass-through proxy).
    #[arg(long, env = "AUTOPREP_REWRITE", default_value_t = true, action = clap::ArgAction::Set)]
    pub rewrite: bool,

    /// Most prepared statements kept in the proxy's cache.
    #[arg(long, env = "AUTOPREP_CACHE_ENTRIES", default_value_t = 10_000)]
    pub cache_entries: usize,

    /// Most bytes (approximate) the proxy's prepared cache holds.
    #[arg(long, env = "AUTOPREP_CACHE_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub cache_bytes: usize,

    /// A statement shape is prepared on its Nth sighting.
    #[arg(long, env = "AUTOPREP_ADMISSION_THRESHOLD", default_value_t = 2)]
    pub admission_threshold: u32,

    /// The server's default time zone (`Z`, `UTC`, `+02:00`), so that timestamps written
    /// without a zone can be rewritten too; unset, they pass through unchanged.
    #[arg(long, env = "AUTOPREP_SERVER_TIME_ZONE")]
    pub server_time_zone: Option<String>,

    /// How long, in milliseconds, the answer to a schema change (CREATE, ALTER, DROP) may be
    /// held until every node reports the same schema version (drivers cannot check it through
    /// the proxy: they see no peers); 0: answer at once.
    #[arg(
        long,
        env = "AUTOPREP_SCHEMA_AGREEMENT_WAIT_MS",
        default_value_t = 10_000
    )]
    pub schema_agreement_wait_ms: u64,

    /// Upstream stream ids per connection (the protocol allows 32768); fewer only for tests
    /// of the backpressure path.
    #[arg(
        long,
        env = "AUTOPREP_UPSTREAM_STREAMS",
        default_value_t = 32768,
        hide = true
    )]
    pub upstream_streams: usize,
    /// Address of the admin HTTP server (`/metrics`, `/live`, `/ready`, `/shapes`), e.g.
    /// `127.0.0.1:9100`. Unset: no admin server.
    #[arg(long, env = "AUTOPREP_ADMIN")]
    pub admin: Option<String>,

    /// Never rewrite a statement whose normalized text contains this (repeatable;
    /// comma-separated in the environment variable).
    #[arg(long, env = "AUTOPREP_EXCLUDE", value_delimiter = ',')]
    pub exclude: Vec<String>,
}

impl Config {
    /// A configuration for `upstream` listening on an ephemeral loopback port (tests, benches).
    pub fn for_upstream(upstream: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".into(),
            upstream: upstream.into(),
            advertise_address: None,
            max_frame_bytes: autoprep_protocol::envelope::DEFAULT_MAX_BODY_LEN,
            connect_timeout_ms: 5000,
            schema_agreement_wait_ms: 10_000,
            log: "info".into(),
            rewrite: true,
            cache_entries: 10_000,
            cache_bytes: 64 * 1024 * 1024,
            admission_threshold: 2,
            server_time_zone: None,
            exclude: Vec::new(),
            upstream_streams: 32768,
            admin: None,
        }
    }
}
