//! The proxy's configuration: command-line flags, each with an `AUTOPREP_*` environment
//! variable behind it.

use clap::Parser;
use std::path::PathBuf;

/// autoprep: a CQL sidecar that turns unprepared statements into prepared ones.
#[derive(Debug, Clone, Parser)]
#[command(name = "autoprep", version, about)]
pub struct Config {
    /// Address the application connects to.
    #[arg(long, env = "AUTOPREP_LISTEN", default_value = "127.0.0.1:9043")]
    pub listen: String,

    /// The Cassandra / ScyllaDB node to forward to (host:port).
    #[arg(long, env = "AUTOPREP_UPSTREAM", default_value = "127.0.0.1:9042")]
    pub upstream: String,

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

    /// PEM certificate chain presented to clients (with `--tls-key`): clients must then connect
    /// with TLS.
    #[arg(long, env = "AUTOPREP_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of `--tls-cert` (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "AUTOPREP_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// PEM CA certificates: clients must present a certificate signed by one of them (mutual
    /// TLS). Needs `--tls-cert`.
    #[arg(long, env = "AUTOPREP_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,

    /// Connect to the upstream node with TLS (`--upstream-tls` alone means `true`).
    #[arg(long, env = "AUTOPREP_UPSTREAM_TLS", default_value_t = false, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub upstream_tls: bool,

    /// PEM CA certificates that sign the upstream node's certificate; unset, the system's
    /// trusted roots.
    #[arg(long, env = "AUTOPREP_UPSTREAM_TLS_CA")]
    pub upstream_tls_ca: Option<PathBuf>,

    /// PEM client certificate chain presented to the upstream node (with
    /// `--upstream-tls-key`), for nodes that require client certificates.
    #[arg(long, env = "AUTOPREP_UPSTREAM_TLS_CERT")]
    pub upstream_tls_cert: Option<PathBuf>,

    /// PEM private key of `--upstream-tls-cert`.
    #[arg(long, env = "AUTOPREP_UPSTREAM_TLS_KEY")]
    pub upstream_tls_key: Option<PathBuf>,

    /// The name the upstream node's certificate must be valid for; unset, the host part of
    /// `--upstream` (a DNS name or an IP address).
    #[arg(long, env = "AUTOPREP_UPSTREAM_TLS_SERVER_NAME")]
    pub upstream_tls_server_name: Option<String>,

    /// DANGEROUS, for development only: accept any upstream certificate (no CA or name check;
    /// anyone on the path can read and change the traffic). Logged as a warning at start.
    #[arg(
        long,
        env = "AUTOPREP_UPSTREAM_TLS_INSECURE_SKIP_VERIFY",
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub upstream_tls_insecure_skip_verify: bool,
}

impl Config {
    /// A configuration for `upstream` listening on an ephemeral loopback port (tests, benches).
    pub fn for_upstream(upstream: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".into(),
            upstream: upstream.into(),
            max_frame_bytes: autoprep_protocol::envelope::DEFAULT_MAX_BODY_LEN,
            connect_timeout_ms: 5000,
            log: "info".into(),
            rewrite: true,
            cache_entries: 10_000,
            cache_bytes: 64 * 1024 * 1024,
            admission_threshold: 2,
            server_time_zone: None,
            exclude: Vec::new(),
            upstream_streams: 32768,
            admin: None,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            upstream_tls: false,
            upstream_tls_ca: None,
            upstream_tls_cert: None,
            upstream_tls_key: None,
            upstream_tls_server_name: None,
            upstream_tls_insecure_skip_verify: false,
        }
    }
}
