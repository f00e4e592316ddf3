//! Every configuration option, described once: its TOML key, flag, environment variable, help
//! text, and how a value given in any of the three places sets the [`Config`] field. The
//! command line, the environment reader, the file reader, `--print-config` and the CONFIG.md
//! check all walk [`OPTIONS`].

use super::Config;
use std::str::FromStr;

/// Whether an option takes one value or a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One value; a flag given twice is an error.
    One,
    /// A list: a repeatable flag, a comma-separated environment variable, a TOML array.
    List,
}

/// One option.
#[derive(Debug)]
pub struct Spec {
    /// The TOML key, which names the option in every message.
    pub key: &'static str,
    /// The flag, without its dashes.
    pub flag: &'static str,
    /// The environment variable.
    pub env: &'static str,
    /// What the value looks like, in `--help`.
    pub value_name: &'static str,
    pub kind: Kind,
    /// Left out of `--help` (options for tests).
    pub hidden: bool,
    /// One line of help.
    pub help: &'static str,
    /// Sets the field from a value, or says why the value is wrong.
    pub set: fn(&mut Config, &Raw<'_>) -> Result<(), String>,
}

/// A value as one source gives it.
#[derive(Debug)]
pub enum Raw<'a> {
    /// A flag's or an environment variable's text.
    Text(&'a str),
    /// A list flag's values, or a list variable split at commas.
    Texts(Vec<String>),
    /// A value from the TOML file, typed.
    Toml(&'a toml::Value),
}

impl Raw<'_> {
    /// A string.
    pub fn text(&self) -> Result<String, String> {
        match self {
            Raw::Text(s) => Ok((*s).to_owned()),
            Raw::Toml(toml::Value::String(s)) => Ok(s.clone()),
            Raw::Toml(v) => Err(format!("expected a string, got {}", v.type_str())),
            Raw::Texts(_) => Err("expected one value".into()),
        }
    }

    /// A string that may be absent: empty means unset (so that a variable or a flag can unset
    /// what the file sets).
    pub fn optional(&self) -> Result<Option<String>, String> {
        self.text().map(|s| (!s.is_empty()).then_some(s))
    }

    /// A whole number.
    pub fn number<T: FromStr + TryFrom<i64>>(&self) -> Result<T, String> {
        match self {
            Raw::Text(s) => s
                .trim()
                .parse()
                .map_err(|_| format!("expected a whole number, got {s:?}")),
            Raw::Toml(toml::Value::Integer(i)) => {
                T::try_from(*i).map_err(|_| format!("out of range, got {i}"))
            }
            Raw::Toml(v) => Err(format!("expected an integer, got {}", v.type_str())),
            Raw::Texts(_) => Err("expected one value".into()),
        }
    }

    /// A number from 0 to 1.
    pub fn fraction(&self) -> Result<f64, String> {
        let v = match self {
            Raw::Text(s) => s
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("expected a number from 0 to 1, got {s:?}"))?,
            Raw::Toml(toml::Value::Float(f)) => *f,
            Raw::Toml(toml::Value::Integer(i)) => *i as f64,
            Raw::Toml(v) => return Err(format!("expected a number, got {}", v.type_str())),
            Raw::Texts(_) => return Err("expected one value".into()),
        };
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(format!("expected a number from 0 to 1, got {v}"))
        }
    }

    /// A boolean: `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off` in text).
    pub fn boolean(&self) -> Result<bool, String> {
        match self {
            Raw::Text(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(format!("expected true or false, got {s:?}")),
            },
            Raw::Toml(toml::Value::Boolean(b)) => Ok(*b),
            Raw::Toml(v) => Err(format!("expected a boolean, got {}", v.type_str())),
            Raw::Texts(_) => Err("expected one value".into()),
        }
    }

    /// A list of strings.
    pub fn list(&self) -> Result<Vec<String>, String> {
        match self {
            Raw::Texts(v) => Ok(v.clone()),
            Raw::Text(s) => Ok(split_list(s)),
            Raw::Toml(toml::Value::Array(a)) => a
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s.clone()),
                    other => Err(format!(
                        "expected an array of strings, got an array holding a {}",
                        other.type_str()
                    )),
                })
                .collect(),
            Raw::Toml(v) => Err(format!(
                "expected an array of strings, got {}",
                v.type_str()
            )),
        }
    }
}

/// A comma-separated list (an environment variable): items trimmed, empty items dropped.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The option named by TOML key `key`.
pub fn by_key(key: &str) -> Option<&'static Spec> {
    OPTIONS.iter().find(|o| o.key == key)
}

/// Every option, in the order `--help`, `--print-config` and CONFIG.md show them.
pub static OPTIONS: &[Spec] = &[
    Spec {
        key: "listen",
        flag: "listen",
        env: "AUTOPREP_LISTEN",
        value_name: "HOST:PORT",
        kind: Kind::One,
        hidden: false,
        help: "Address the application connects to",
        set: |c, v| {
            c.listen = v.text()?;
            Ok(())
        },
    },
    Spec {
        key: "upstream",
        flag: "upstream",
        env: "AUTOPREP_UPSTREAM",
        value_name: "HOST:PORT",
        kind: Kind::One,
        hidden: false,
        help: "The Cassandra / ScyllaDB node to forward to; several contact points separated by commas",
        set: |c, v| {
            c.upstream = v.text()?;
            Ok(())
        },
    },
    Spec {
        key: "advertise_address",
        flag: "advertise-address",
        env: "AUTOPREP_ADVERTISE_ADDRESS",
        value_name: "IP[:PORT]",
        kind: Kind::One,
        hidden: false,
        help: "The address drivers are told is the cluster's only node (unset: the listen address; required when listen is 0.0.0.0 or [::])",
        set: |c, v| {
            c.advertise_address = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "schema_agreement_wait_ms",
        flag: "schema-agreement-wait-ms",
        env: "AUTOPREP_SCHEMA_AGREEMENT_WAIT_MS",
        value_name: "MS",
        kind: Kind::One,
        hidden: false,
        help: "How long a schema change's answer may wait for every node to report the same schema version (0: not at all)",
        set: |c, v| {
            c.schema_agreement_wait_ms = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "admin",
        flag: "admin",
        env: "AUTOPREP_ADMIN",
        value_name: "HOST:PORT",
        kind: Kind::One,
        hidden: false,
        help: "Address of the admin HTTP server (/live, /ready, /metrics, /shapes, /log); unset or empty: none",
        set: |c, v| {
            c.admin = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "log",
        flag: "log",
        env: "AUTOPREP_LOG",
        value_name: "FILTER",
        kind: Kind::One,
        hidden: false,
        help: "Log filter (tracing EnvFilter syntax), e.g. info or autoprep=debug",
        set: |c, v| {
            c.log = v.text()?;
            Ok(())
        },
    },
    Spec {
        key: "log_format",
        flag: "log-format",
        env: "AUTOPREP_LOG_FORMAT",
        value_name: "FORMAT",
        kind: Kind::One,
        hidden: false,
        help: "Log lines as text, or json: one object per line with timestamp, level, target, message, the connection's fields and trace_id/span_id",
        set: |c, v| {
            c.log_format = v.text()?;
            Ok(())
        },
    },
    Spec {
        key: "tracing_endpoint",
        flag: "tracing-endpoint",
        env: "AUTOPREP_TRACING_ENDPOINT",
        value_name: "URL",
        kind: Kind::One,
        hidden: false,
        help: "OTLP collector to export request spans to, http://HOST:PORT (unset: OTEL_EXPORTER_OTLP_ENDPOINT; neither: tracing off)",
        set: |c, v| {
            c.tracing_endpoint = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "tracing_protocol",
        flag: "tracing-protocol",
        env: "AUTOPREP_TRACING_PROTOCOL",
        value_name: "PROTOCOL",
        kind: Kind::One,
        hidden: false,
        help: "OTLP transport: grpc or http/protobuf (unset: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)",
        set: |c, v| {
            c.tracing_protocol = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "tracing_sample_ratio",
        flag: "tracing-sample-ratio",
        env: "AUTOPREP_TRACING_SAMPLE_RATIO",
        value_name: "FRACTION",
        kind: Kind::One,
        hidden: false,
        help: "Share of requests traced, 0 to 1, following a client's sampled flag when it sends a traceparent (unset: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else 1); errors and slow requests are always traced",
        set: |c, v| {
            c.tracing_sample_ratio = match v.optional()? {
                None => None,
                Some(_) => Some(v.fraction()?),
            };
            Ok(())
        },
    },
    Spec {
        key: "tracing_slow_ms",
        flag: "tracing-slow-ms",
        env: "AUTOPREP_TRACING_SLOW_MS",
        value_name: "MS",
        kind: Kind::One,
        hidden: false,
        help: "A request that takes at least this long is always traced (0: none by their time)",
        set: |c, v| {
            c.tracing_slow_ms = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "rewrite",
        flag: "rewrite",
        env: "AUTOPREP_REWRITE",
        value_name: "BOOL",
        kind: Kind::One,
        hidden: false,
        help: "Rewrite literal-bearing QUERYs into EXECUTEs of prepared statements (false: a plain forwarder)",
        set: |c, v| {
            c.rewrite = v.boolean()?;
            Ok(())
        },
    },
    Spec {
        key: "routing",
        flag: "routing",
        env: "AUTOPREP_ROUTING",
        value_name: "BOOL",
        kind: Kind::One,
        hidden: false,
        help: "Send rewritten statements to a replica of their partition, over a connection of the client's own to that node (false: everything goes through the client's upstream connection)",
        set: |c, v| {
            c.routing = v.boolean()?;
            Ok(())
        },
    },
    Spec {
        key: "routing_local_dc",
        flag: "routing-local-dc",
        env: "AUTOPREP_ROUTING_LOCAL_DC",
        value_name: "DC",
        kind: Kind::One,
        hidden: false,
        help: "The local datacenter: its replicas are preferred and client connections are homed on its contact points only (unset: that of the first contact point that answers, decided once)",
        set: |c, v| {
            c.routing_local_dc = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "routing_remote_failover",
        flag: "routing-remote-failover",
        env: "AUTOPREP_ROUTING_REMOTE_FAILOVER",
        value_name: "BOOL",
        kind: Kind::One,
        hidden: false,
        help: "Home a client connection on a contact point of another datacenter when none of the local datacenter's answers (off: the connection is closed, as a DC-aware driver without remote failover does)",
        set: |c, v| {
            c.routing_remote_failover = v.boolean()?;
            Ok(())
        },
    },
    Spec {
        key: "server_time_zone",
        flag: "server-time-zone",
        env: "AUTOPREP_SERVER_TIME_ZONE",
        value_name: "ZONE",
        kind: Kind::One,
        hidden: false,
        help: "The server's default time zone (Z, UTC, +02:00), so that timestamps without a zone are rewritten too; unset: they pass through",
        set: |c, v| {
            c.server_time_zone = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "exclude",
        flag: "exclude",
        env: "AUTOPREP_EXCLUDE",
        value_name: "TEXT",
        kind: Kind::List,
        hidden: false,
        help: "Never rewrite a statement whose normalized text contains this (repeatable; comma-separated in the variable)",
        set: |c, v| {
            c.exclude = v.list()?;
            Ok(())
        },
    },
    Spec {
        key: "admission_threshold",
        flag: "admission-threshold",
        env: "AUTOPREP_ADMISSION_THRESHOLD",
        value_name: "N",
        kind: Kind::One,
        hidden: false,
        help: "A statement shape is prepared on its Nth sighting",
        set: |c, v| {
            c.admission_threshold = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "cache_entries",
        flag: "cache-entries",
        env: "AUTOPREP_CACHE_ENTRIES",
        value_name: "N",
        kind: Kind::One,
        hidden: false,
        help: "Most prepared statements kept in the proxy's cache",
        set: |c, v| {
            c.cache_entries = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "prepare_literals",
        flag: "prepare-literals",
        env: "AUTOPREP_PREPARE_LITERALS",
        value_name: "BOOL",
        kind: Kind::One,
        hidden: false,
        help: "Answer a client's PREPARE of a statement with literals inline from its shape, prepared once, and run its EXECUTEs as EXECUTEs of the shape (false: such PREPAREs pass through)",
        set: |c, v| {
            c.prepare_literals = v.boolean()?;
            Ok(())
        },
    },
    Spec {
        key: "literal_statements_bytes",
        flag: "literal-statements-bytes",
        env: "AUTOPREP_LITERAL_STATEMENTS_BYTES",
        value_name: "BYTES",
        kind: Kind::One,
        hidden: false,
        help: "Most bytes (approximate) the map of statements prepared with literals inline holds; the least recently used beyond it are forgotten (the server answers their EXECUTEs UNPREPARED, and the driver prepares them again)",
        set: |c, v| {
            c.literal_statements_bytes = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "control_fraction",
        flag: "control-fraction",
        env: "AUTOPREP_CONTROL_FRACTION",
        value_name: "FRACTION",
        kind: Kind::One,
        hidden: false,
        help: "The share of time (0 to 1), in random switchback windows, in which every rewritable QUERY is sent as the application's original QUERY, to measure the server CPU and response time saved (0: none; unset: 0.05 with --server-metrics-url, else 0)",
        set: |c, v| {
            c.control_fraction = Some(v.fraction()?);
            Ok(())
        },
    },
    Spec {
        key: "control_window_ms",
        flag: "control-window-ms",
        env: "AUTOPREP_CONTROL_WINDOW_MS",
        value_name: "MS",
        kind: Kind::One,
        hidden: false,
        help: "The length of a switchback window, milliseconds (100 to 3600000)",
        set: |c, v| {
            c.control_window_ms = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "server_metrics_url",
        flag: "server-metrics-url",
        env: "AUTOPREP_SERVER_METRICS_URL",
        value_name: "URL",
        kind: Kind::One,
        hidden: false,
        help: "The nodes' Prometheus metrics endpoint, {host} standing for each node's address (e.g. http://{host}:7070/metrics): their CPU gives the estimate of server CPU saved (autoprep_server_cpu_saved_seconds_total)",
        set: |c, v| {
            c.server_metrics_url = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "cache_bytes",
        flag: "cache-bytes",
        env: "AUTOPREP_CACHE_BYTES",
        value_name: "BYTES",
        kind: Kind::One,
        hidden: false,
        help: "Most bytes (approximate) the proxy's prepared cache holds",
        set: |c, v| {
            c.cache_bytes = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "max_client_connections",
        flag: "max-client-connections",
        env: "AUTOPREP_MAX_CLIENT_CONNECTIONS",
        value_name: "N",
        kind: Kind::One,
        hidden: false,
        help: "Client connections served at once (1 to 1000000); a client beyond them gets an Overloaded ERROR",
        set: |c, v| {
            c.max_client_connections = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "drain_grace_seconds",
        flag: "drain-grace-seconds",
        env: "AUTOPREP_DRAIN_GRACE_SECONDS",
        value_name: "SECONDS",
        kind: Kind::One,
        hidden: false,
        help: "After SIGTERM / SIGINT, how long open client connections keep being served before they are closed",
        set: |c, v| {
            c.drain_grace_seconds = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "handover_socket",
        flag: "handover-socket",
        env: "AUTOPREP_HANDOVER_SOCKET",
        value_name: "PATH",
        kind: Kind::One,
        hidden: false,
        help: "Unix socket for handing client connections to the next process at a drain: listened on (a stale file replaced); a draining process passes its plain-TCP client connections to whoever listens there",
        set: |c, v| {
            c.handover_socket = v.optional()?.map(std::path::PathBuf::from);
            Ok(())
        },
    },
    Spec {
        key: "worker_threads",
        flag: "worker-threads",
        env: "AUTOPREP_WORKER_THREADS",
        value_name: "N",
        kind: Kind::One,
        hidden: false,
        help: "Threads that serve client connections (0: one per CPU the process may use; 1: a single thread, the least CPU per request)",
        set: |c, v| {
            c.worker_threads = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "max_frame_bytes",
        flag: "max-frame-bytes",
        env: "AUTOPREP_MAX_FRAME_BYTES",
        value_name: "BYTES",
        kind: Kind::One,
        hidden: false,
        help: "Largest envelope body accepted from either side",
        set: |c, v| {
            c.max_frame_bytes = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "connect_timeout_ms",
        flag: "connect-timeout-ms",
        env: "AUTOPREP_CONNECT_TIMEOUT_MS",
        value_name: "MS",
        kind: Kind::One,
        hidden: false,
        help: "How long the upstream node may take to accept a connection",
        set: |c, v| {
            c.connect_timeout_ms = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "tls_cert",
        flag: "tls-cert",
        env: "AUTOPREP_TLS_CERT",
        value_name: "PATH",
        kind: Kind::One,
        hidden: false,
        help: "PEM certificate chain presented to clients (with tls_key); clients must then connect with TLS",
        set: |c, v| {
            c.tls_cert = v.optional()?.map(std::path::PathBuf::from);
            Ok(())
        },
    },
    Spec {
        key: "tls_key",
        flag: "tls-key",
        env: "AUTOPREP_TLS_KEY",
        value_name: "PATH",
        kind: Kind::One,
        hidden: false,
        help: "PEM private key of tls_cert (PKCS#8, PKCS#1 or SEC1)",
        set: |c, v| {
            c.tls_key = v.optional()?.map(std::path::PathBuf::from);
            Ok(())
        },
    },
    Spec {
        key: "tls_client_ca",
        flag: "tls-client-ca",
        env: "AUTOPREP_TLS_CLIENT_CA",
        value_name: "PATH",
        kind: Kind::One,
        hidden: false,
        help: "PEM CA certificates: clients must present a certificate one of them signed (mutual TLS)",
        set: |c, v| {
            c.tls_client_ca = v.optional()?.map(std::path::PathBuf::from);
            Ok(())
        },
    },
    Spec {
        key: "upstream_tls",
        flag: "upstream-tls",
        env: "AUTOPREP_UPSTREAM_TLS",
        value_name: "BOOL",
        kind: Kind::One,
        hidden: false,
        help: "Connect to the upstream node with TLS",
        set: |c, v| {
            c.upstream_tls = v.boolean()?;
            Ok(())
        },
    },
    Spec {
        key: "upstream_tls_ca",
        flag: "upstream-tls-ca",
        env: "AUTOPREP_UPSTREAM_TLS_CA",
        value_name: "PATH",
        kind: Kind::One,
        hidden: false,
        help: "PEM CA certificates that sign the upstream node's certificate (unset: the system's trusted roots)",
        set: |c, v| {
            c.upstream_tls_ca = v.optional()?.map(std::path::PathBuf::from);
            Ok(())
        },
    },
    Spec {
        key: "upstream_tls_cert",
        flag: "upstream-tls-cert",
        env: "AUTOPREP_UPSTREAM_TLS_CERT",
        value_name: "PATH",
        kind: Kind::One,
        hidden: false,
        help: "PEM client certificate chain presented to the upstream node (with upstream_tls_key)",
        set: |c, v| {
            c.upstream_tls_cert = v.optional()?.map(std::path::PathBuf::from);
            Ok(())
        },
    },
    Spec {
        key: "upstream_tls_key",
        flag: "upstream-tls-key",
        env: "AUTOPREP_UPSTREAM_TLS_KEY",
        value_name: "PATH",
        kind: Kind::One,
        hidden: false,
        help: "PEM private key of upstream_tls_cert",
        set: |c, v| {
            c.upstream_tls_key = v.optional()?.map(std::path::PathBuf::from);
            Ok(())
        },
    },
    Spec {
        key: "upstream_tls_server_name",
        flag: "upstream-tls-server-name",
        env: "AUTOPREP_UPSTREAM_TLS_SERVER_NAME",
        value_name: "NAME",
        kind: Kind::One,
        hidden: false,
        help: "The name the upstream node's certificate must be valid for (unset: the host part of upstream)",
        set: |c, v| {
            c.upstream_tls_server_name = v.optional()?;
            Ok(())
        },
    },
    Spec {
        key: "upstream_tls_insecure_skip_verify",
        flag: "upstream-tls-insecure-skip-verify",
        env: "AUTOPREP_UPSTREAM_TLS_INSECURE_SKIP_VERIFY",
        value_name: "BOOL",
        kind: Kind::One,
        hidden: false,
        help: "DANGEROUS, development only: accept any upstream certificate (logged as a warning)",
        set: |c, v| {
            c.upstream_tls_insecure_skip_verify = v.boolean()?;
            Ok(())
        },
    },
    Spec {
        key: "tls_reload_interval_seconds",
        flag: "tls-reload-interval-seconds",
        env: "AUTOPREP_TLS_RELOAD_INTERVAL_SECONDS",
        value_name: "SECONDS",
        kind: Kind::One,
        hidden: false,
        help: "How often the TLS certificate, key and CA files are checked for a change, 0 to 3600 (0: only on SIGHUP)",
        set: |c, v| {
            c.tls_reload_interval_seconds = v.number()?;
            Ok(())
        },
    },
    Spec {
        key: "upstream_streams",
        flag: "upstream-streams",
        env: "AUTOPREP_UPSTREAM_STREAMS",
        value_name: "N",
        kind: Kind::One,
        hidden: true,
        help: "Upstream stream ids per connection (at most 32768); fewer only to test backpressure",
        set: |c, v| {
            c.upstream_streams = v.number()?;
            Ok(())
        },
    },
];
