//! The proxy's configuration: one [`Config`] with defaults, read from a TOML file
//! (`--config PATH` or `AUTOPREP_CONFIG`), `AUTOPREP_*` environment variables and command-line
//! flags. A flag overrides the environment, the environment overrides the file, the file
//! overrides the defaults. Every option is described once, in [`options`]; `CONFIG.md` at the
//! repository root documents them all.
//!
//! Loading ([`load`]) reports every problem at once, each by option name and where its value
//! came from; the binary then exits with [`EX_USAGE`]. `autoprep --print-config` prints the
//! effective configuration as TOML that can be fed back as a file.
//!
//! Secrets: no option ever holds a secret's value. An option that needs one (a private key, a
//! password) takes the path of a file holding it, read when the proxy starts (and again when
//! it changes, see [`crate::reload`]), so the effective configuration, `--print-config` and
//! the logs only ever show the path.

mod load;
pub mod options;

use std::path::PathBuf;

pub use load::{apply_file, load, LoadError, Loaded, Source};

use autoprep_protocol::types::UtcOffset;
use serde::Serialize;

/// The exit code of a usage or configuration error (`EX_USAGE` of sysexits.h).
pub const EX_USAGE: u8 = 64;

/// The effective configuration of one proxy process.
///
/// To add an option: a field here, its default in [`Config::default`], its description in
/// [`options::OPTIONS`], a check in [`Config::validate`] if it needs one, and a line in
/// `CONFIG.md` (a unit test checks that the four agree).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// Address the application connects to.
    pub listen: String,
    /// The Cassandra / ScyllaDB nodes to forward to: `host:port`, or several contact points
    /// separated by commas (each new client connection goes to the next healthy one).
    pub upstream: String,
    /// The address (`ip` or `ip:port`) drivers are told is the cluster's only node, in
    /// `system.local`; unset, the listen address. Required when `listen` is a wildcard address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_address: Option<String>,
    /// How long the answer to a schema change may be held until every node reports the same
    /// schema version, in milliseconds; 0: answered at once.
    pub schema_agreement_wait_ms: u64,
    /// Largest envelope body accepted from either side, in bytes.
    pub max_frame_bytes: usize,
    /// How long to wait for the upstream node to accept a connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `autoprep=debug`.
    pub log: String,
    /// `text` or `json` (one object per line: see `autoprep::log_json`).
    pub log_format: String,
    /// The OTLP collector request spans are exported to (see `autoprep::otel`); unset, the
    /// standard `OTEL_EXPORTER_OTLP_ENDPOINT`; neither set, tracing is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracing_endpoint: Option<String>,
    /// `grpc` or `http/protobuf`; unset, `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracing_protocol: Option<String>,
    /// The head-sampling ratio; unset, `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracing_sample_ratio: Option<f64>,
    /// Requests at least this slow (milliseconds) are always traced; 0: none by their time.
    pub tracing_slow_ms: u64,
    /// Rewrite literal-bearing QUERYs into EXECUTEs of prepared statements (`false`: a plain
    /// forwarder).
    pub rewrite: bool,
    /// Send each rewritten EXECUTE whose partition is known to a replica that owns it, over a
    /// connection of the client's own to that node (see `cluster` and `replica`).
    pub routing: bool,
    /// The local datacenter: its replicas are preferred, and client connections are homed on
    /// its contact points only. Unset, that of the first contact point that answers, decided
    /// once for the process's life.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing_local_dc: Option<String>,
    /// Home a client connection on a contact point of another datacenter when none of the
    /// local datacenter's answers (as a driver's remote failover does); off, such a
    /// connection is closed.
    pub routing_remote_failover: bool,
    /// Answer a client's PREPARE of a statement with literals inline from its shape (see
    /// `literal_prepare`).
    pub prepare_literals: bool,
    /// Most bytes (approximate) the map of statements prepared with literals inline holds;
    /// beyond it the least recently used are forgotten (their EXECUTEs are answered
    /// UNPREPARED by the server, and the driver prepares them again).
    pub literal_statements_bytes: usize,
    /// The share of time (switchback windows of `control_window_ms`) in which every
    /// rewritable QUERY is sent as the application's original QUERY, to measure the server CPU
    /// and response time with and without the rewrite (see `saving`); 0: none. Unset: see
    /// [`Config::control_fraction`].
    pub control_fraction: Option<f64>,
    /// The length of a switchback window, milliseconds.
    pub control_window_ms: u64,
    /// The nodes' Prometheus metrics endpoints, `{host}` standing for each node's address
    /// (e.g. `http://{host}:7070/metrics`): their CPU gives the estimate of server CPU saved.
    pub server_metrics_url: Option<String>,
    /// Most prepared statements kept in the proxy's cache.
    pub cache_entries: usize,
    /// Most bytes (approximate) the proxy's prepared cache holds.
    pub cache_bytes: usize,
    /// A statement shape is prepared on its Nth sighting.
    pub admission_threshold: u32,
    /// The server's default time zone (`Z`, `UTC`, `+02:00`), so that timestamps written
    /// without a zone can be rewritten too; unset, they pass through unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_time_zone: Option<String>,
    /// Upstream stream ids per connection (the protocol allows 32768); fewer only for tests of
    /// the backpressure path.
    pub upstream_streams: usize,
    /// Address of the admin HTTP server (`/metrics`, `/live`, `/ready`, `/shapes`, `/log`). Unset: no
    /// admin server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<String>,
    /// Never rewrite a statement whose normalized text contains one of these.
    pub exclude: Vec<String>,
    /// Client connections served at once; a client beyond them gets an Overloaded ERROR.
    pub max_client_connections: usize,
    /// After SIGTERM / SIGINT, how long open client connections keep being served before the
    /// proxy closes them, in seconds.
    pub drain_grace_seconds: u64,
    /// A Unix socket path for handing client connections over at a drain: the process listens
    /// there (replacing a stale file), and a draining process with the same path passes its
    /// plain-TCP client connections to whoever listens there (see [`crate::handover`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handover_socket: Option<PathBuf>,
    /// PEM certificate chain presented to clients (with `--tls-key`): clients must then connect
    /// with TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `--tls-cert` (PKCS#8, PKCS#1 or SEC1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates: clients must present a certificate signed by one of them (mutual
    /// TLS). Needs `--tls-cert`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_client_ca: Option<PathBuf>,
    /// Connect to the upstream node with TLS.
    pub upstream_tls: bool,
    /// PEM CA certificates that sign the upstream node's certificate; unset, the system's
    /// trusted roots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_tls_ca: Option<PathBuf>,
    /// PEM client certificate chain presented to the upstream node (with
    /// `--upstream-tls-key`), for nodes that require client certificates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_tls_cert: Option<PathBuf>,
    /// PEM private key of `--upstream-tls-cert`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_tls_key: Option<PathBuf>,
    /// The name the upstream node's certificate must be valid for; unset, the host part of
    /// `--upstream` (a DNS name or an IP address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_tls_server_name: Option<String>,
    /// DANGEROUS, for development only: accept any upstream certificate (no CA or name check;
    /// anyone on the path can read and change the traffic). Logged as a warning at start.
    pub upstream_tls_insecure_skip_verify: bool,
    /// How often the TLS files of both sides are checked for a change, in seconds (0: only on
    /// SIGHUP).
    pub tls_reload_interval_seconds: u64,
    /// Threads that run client connections: 0 means one per CPU the process may use; 1 runs
    /// everything on a single thread.
    pub worker_threads: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: "127.0.0.1:9043".into(),
            upstream: "127.0.0.1:9042".into(),
            advertise_address: None,
            schema_agreement_wait_ms: 10_000,
            max_frame_bytes: autoprep_protocol::envelope::DEFAULT_MAX_BODY_LEN,
            connect_timeout_ms: 5000,
            log: "info".into(),
            log_format: "text".into(),
            tracing_endpoint: None,
            tracing_protocol: None,
            tracing_sample_ratio: None,
            tracing_slow_ms: 100,
            rewrite: true,
            routing: true,
            routing_local_dc: None,
            routing_remote_failover: false,
            prepare_literals: true,
            literal_statements_bytes: 16 * 1024 * 1024,
            control_fraction: None,
            control_window_ms: 1000,
            server_metrics_url: None,
            cache_entries: 10_000,
            cache_bytes: 64 * 1024 * 1024,
            admission_threshold: 2,
            server_time_zone: None,
            upstream_streams: MAX_STREAMS,
            admin: None,
            exclude: Vec::new(),
            max_client_connections: 1024,
            drain_grace_seconds: 20,
            handover_socket: None,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            upstream_tls: false,
            upstream_tls_ca: None,
            upstream_tls_cert: None,
            upstream_tls_key: None,
            upstream_tls_server_name: None,
            upstream_tls_insecure_skip_verify: false,
            tls_reload_interval_seconds: 5,
            worker_threads: 0,
        }
    }
}

/// Stream ids a protocol v3+ connection has.
const MAX_STREAMS: usize = 32768;

/// Most client connections `max_client_connections` may allow.
pub const MAX_CLIENT_CONNECTIONS: usize = 1_000_000;

/// One thing wrong with a configuration: the option (its TOML key) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: &'static str,
    pub message: String,
}

/// The control fraction when none is given and the nodes' CPU is read: 5 % of the time. In the
/// lab, 3 minutes of traffic put the estimate within 4 % of the node's measured saving, its own
/// 95 % interval ±10 % to ±19 % (README, "Server CPU saved").
pub const DEFAULT_CONTROL_FRACTION: f64 = 0.05;

impl Config {
    /// The control fraction in force: as given, or else [`DEFAULT_CONTROL_FRACTION`] when
    /// `server_metrics_url` is set (there is a saving to measure) and 0 when it is not (the
    /// control windows would cost the cluster their share of the saving for a response-time
    /// comparison alone).
    pub fn control_fraction(&self) -> f64 {
        self.control_fraction
            .unwrap_or(if self.server_metrics_url.is_some() {
                DEFAULT_CONTROL_FRACTION
            } else {
                0.0
            })
    }

    /// The defaults, for `upstream`, listening on an ephemeral loopback port (tests, benches).
    pub fn for_upstream(upstream: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".into(),
            upstream: upstream.into(),
            ..Config::default()
        }
    }

    /// The tracing options, as `otel::settings` takes them (with the `OTEL_*` variables).
    pub fn tracing(&self) -> crate::otel::settings::Options {
        crate::otel::settings::Options {
            tracing_endpoint: self.tracing_endpoint.clone(),
            tracing_protocol: self.tracing_protocol.clone(),
            tracing_sample_ratio: self.tracing_sample_ratio,
            tracing_slow_ms: self.tracing_slow_ms,
        }
    }

    /// Every problem of this configuration (empty when it is usable).
    pub fn validate(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut check = |key: &'static str, r: Result<(), String>| {
            if let Err(message) = r {
                out.push(Problem { key, message });
            }
        };
        check("listen", address(&self.listen, true));
        check("upstream", contact_points(&self.upstream));
        check(
            "advertise_address",
            crate::topology::Topology::new(&self.listen, self.advertise_address.as_deref())
                .map(drop)
                .map_err(|e| e.to_string()),
        );
        if let Some(admin) = &self.admin {
            check("admin", address(admin, true));
        }
        let max_body = usize::try_from(i32::MAX).unwrap_or(usize::MAX);
        check("max_frame_bytes", within(self.max_frame_bytes, 1, max_body));
        check(
            "connect_timeout_ms",
            within(self.connect_timeout_ms, 1, u64::MAX),
        );
        check(
            "log",
            crate::log_filter::env_filter(&self.log)
                .map(drop)
                .map_err(|e| format!("not a log filter ({e}), got {:?}", self.log)),
        );
        check(
            "log_format",
            match self.log_format.as_str() {
                "text" | "json" => Ok(()),
                other => Err(format!("expected text or json, got {other:?}")),
            },
        );
        if let Some(e) = &self.tracing_endpoint {
            check("tracing_endpoint", crate::otel::settings::check_endpoint(e));
        }
        if let Some(p) = &self.tracing_protocol {
            check(
                "tracing_protocol",
                p.parse::<crate::otel::settings::Protocol>().map(drop),
            );
        }
        check(
            "control_window_ms",
            within(self.control_window_ms, 100, 3_600_000),
        );
        if let Some(url) = &self.server_metrics_url {
            check(
                "server_metrics_url",
                autoprep_server_metrics::UrlTemplate::parse(url)
                    .map(drop)
                    .map_err(|e| e.to_string()),
            );
        }
        check("cache_entries", within(self.cache_entries, 1, usize::MAX));
        check("cache_bytes", within(self.cache_bytes, 1, usize::MAX));
        check(
            "admission_threshold",
            within(self.admission_threshold, 1, u32::MAX),
        );
        if let Some(z) = &self.server_time_zone {
            check(
                "server_time_zone",
                z.parse::<UtcOffset>()
                    .map(drop)
                    .map_err(|e| format!("{e}, got {z:?}")),
            );
        }
        check(
            "upstream_streams",
            within(self.upstream_streams, 1, MAX_STREAMS),
        );
        if self.exclude.iter().any(String::is_empty) {
            check(
                "exclude",
                Err("an empty pattern would exclude every statement".into()),
            );
        }
        check(
            "max_client_connections",
            within(self.max_client_connections, 1, MAX_CLIENT_CONNECTIONS),
        );
        check("worker_threads", within(self.worker_threads, 0, 1024));
        check(
            "tls_reload_interval_seconds",
            within(self.tls_reload_interval_seconds, 0, 3600),
        );
        out
    }
}

/// `value` within `min..=max`.
fn within<T: PartialOrd + std::fmt::Display>(value: T, min: T, max: T) -> Result<(), String> {
    if value < min {
        Err(format!("must be at least {min}, got {value}"))
    } else if value > max {
        Err(format!("must be at most {max}, got {value}"))
    } else {
        Ok(())
    }
}

/// A comma-separated list of `HOST:PORT` contact points.
fn contact_points(s: &str) -> Result<(), String> {
    let list = options::split_list(s);
    if list.is_empty() {
        return Err(format!("expected HOST:PORT[,HOST:PORT...], got {s:?}"));
    }
    list.iter().try_for_each(|a| address(a, false))
}

/// A `HOST:PORT` address: an IPv4 address or host name, or an IPv6 address in brackets.
/// Port 0 (an ephemeral port) only where `port_zero` allows it (addresses to bind).
fn address(s: &str, port_zero: bool) -> Result<(), String> {
    let wrong = |why: &str| {
        Err(format!(
            "{why}: expected HOST:PORT such as 127.0.0.1:9043 or [::1]:9043, got {s:?}"
        ))
    };
    let Some((host, port)) = s.rsplit_once(':') else {
        return wrong("no port");
    };
    match port.parse::<u16>() {
        Ok(0) if !port_zero => return wrong("port 0"),
        Ok(_) => {}
        Err(_) => return wrong("bad port"),
    }
    if let Some(inner) = host.strip_prefix('[') {
        return match inner
            .strip_suffix(']')
            .map(str::parse::<std::net::Ipv6Addr>)
        {
            Some(Ok(_)) => Ok(()),
            _ => wrong("bad IPv6 address"),
        };
    }
    if host.contains(':') {
        return wrong("an IPv6 address goes in brackets");
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if host.is_empty() || !host.chars().all(name_char) {
        return wrong("bad host");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
