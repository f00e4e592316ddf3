//! What the trace export is configured by: autoprep's own options (`tracing_*`, see CONFIG.md)
//! over the standard OpenTelemetry environment variables
//! (<https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/>):
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (setting it turns tracing on), `OTEL_EXPORTER_OTLP_PROTOCOL`
//! (`grpc` or `http/protobuf`), `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`;
//! `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` are read by the SDK's resource detectors
//! (see [`super::export`]). `OTEL_SDK_DISABLED=true` turns tracing off whatever else is set;
//! `OTEL_BSP_SCHEDULE_DELAY` (milliseconds, default 5000) is how long a span may wait for its
//! batch.

use std::str::FromStr;
use std::time::Duration;

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC (usually port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (usually port 4318, path `/v1/traces`).
    HttpProtobuf,
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            // The spec's third value: not built (it would need the JSON encoding).
            "http/json" => Err("http/json is not supported: use grpc or http/protobuf".into()),
            other => Err(format!("expected grpc or http/protobuf, got {other:?}")),
        }
    }
}

/// The head-sampling rule (errors and slow requests are traced whatever it says).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// A request with a client's `traceparent` follows the client's sampled flag.
    pub parent_based: bool,
    /// The share of other requests traced, by their trace id (the spec's
    /// `TraceIdRatioBased`).
    pub ratio: f64,
}

impl Default for Sampler {
    /// The spec's default, `parentbased_always_on`.
    fn default() -> Self {
        Sampler {
            parent_based: true,
            ratio: 1.0,
        }
    }
}

impl Sampler {
    /// `OTEL_TRACES_SAMPLER` and its `OTEL_TRACES_SAMPLER_ARG`; an unknown sampler is an error,
    /// a bad argument means ratio 1 (the spec's default argument).
    pub fn from_env(name: Option<&str>, arg: Option<&str>) -> Result<Sampler, String> {
        let ratio = || {
            arg.and_then(|a| a.trim().parse::<f64>().ok())
                .filter(|r| (0.0..=1.0).contains(r))
                .unwrap_or(1.0)
        };
        let (parent_based, ratio) = match name.map(str::trim) {
            None | Some("") | Some("parentbased_always_on") => (true, 1.0),
            Some("always_on") => (false, 1.0),
            Some("always_off") => (false, 0.0),
            Some("parentbased_always_off") => (true, 0.0),
            Some("traceidratio") => (false, ratio()),
            Some("parentbased_traceidratio") => (true, ratio()),
            Some(other) => {
                return Err(format!(
                    "OTEL_TRACES_SAMPLER: expected always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio, got {other:?}"
                ))
            }
        };
        Ok(Sampler {
            parent_based,
            ratio,
        })
    }
}

/// The trace export's settings, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// For gRPC the collector's `http://HOST:PORT`; for HTTP the whole URL of the traces path.
    pub endpoint: String,
    pub protocol: Protocol,
    pub sampler: Sampler,
    /// Requests at least this slow are always traced (`None`: none by their time).
    pub slow: Option<Duration>,
    /// The longest a span waits for its batch (`OTEL_BSP_SCHEDULE_DELAY`): each export costs
    /// the exporter a request to the collector whatever its size.
    pub batch_delay: Duration,
}

/// The spec's default `OTEL_BSP_SCHEDULE_DELAY`.
pub const BATCH_DELAY: Duration = Duration::from_secs(5);

/// An endpoint autoprep can export to: `http://HOST[:PORT][/PATH]`. TLS toward the collector
/// is not built in (a collector agent beside the sidecar is the usual shape).
pub fn check_endpoint(e: &str) -> Result<(), String> {
    let Some(rest) = e.strip_prefix("http://") else {
        return Err(if e.starts_with("https://") {
            format!("https is not supported (no TLS toward the collector): use http://, got {e:?}")
        } else {
            format!("expected http://HOST:PORT, got {e:?}")
        });
    };
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("no host in {e:?}"));
    }
    Ok(())
}

/// autoprep's own tracing options (the `tracing_*` keys of the configuration).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    pub tracing_endpoint: Option<String>,
    pub tracing_protocol: Option<String>,
    pub tracing_sample_ratio: Option<f64>,
    pub tracing_slow_ms: u64,
}

impl Settings {
    /// The settings from autoprep's options `cfg` and the OpenTelemetry variables `env` gives
    /// (`None`: tracing off). Problems name the option or variable.
    pub fn resolve(
        cfg: &Options,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Settings>, String> {
        let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let from_env = cfg.tracing_endpoint.is_none();
        let Some(base) = cfg
            .tracing_endpoint
            .clone()
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))
        else {
            return Ok(None);
        };
        let base = base.trim().to_owned();
        check_endpoint(&base).map_err(|e| {
            let name = if from_env {
                "OTEL_EXPORTER_OTLP_ENDPOINT"
            } else {
                "tracing_endpoint"
            };
            format!("{name}: {e}")
        })?;
        let protocol = match cfg
            .tracing_protocol
            .clone()
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            Some(p) => p
                .parse()
                .map_err(|e| format!("OTEL_EXPORTER_OTLP_PROTOCOL: {e}"))?,
            None => Protocol::HttpProtobuf,
        };
        let mut sampler = Sampler::from_env(
            var("OTEL_TRACES_SAMPLER").as_deref(),
            var("OTEL_TRACES_SAMPLER_ARG").as_deref(),
        )?;
        if let Some(r) = cfg.tracing_sample_ratio {
            sampler.ratio = r;
        }
        // The generic variable names the collector's base: the signal's path goes after it
        // (as the spec says for OTEL_EXPORTER_OTLP_ENDPOINT over HTTP); a URL that already
        // ends in it is taken as it is.
        let endpoint = match protocol {
            Protocol::HttpProtobuf if !base.ends_with("/v1/traces") => {
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
            _ => base,
        };
        let batch_delay = match var("OTEL_BSP_SCHEDULE_DELAY") {
            Some(ms) => Duration::from_millis(ms.trim().parse().map_err(|_| {
                format!("OTEL_BSP_SCHEDULE_DELAY: expected milliseconds, got {ms:?}")
            })?),
            None => BATCH_DELAY,
        };
        Ok(Some(Settings {
            endpoint,
            protocol,
            sampler,
            batch_delay,
            slow: (cfg.tracing_slow_ms > 0).then(|| Duration::from_millis(cfg.tracing_slow_ms)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(cfg: &Options, vars: &[(&str, &str)]) -> Result<Option<Settings>, String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::resolve(cfg, |k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    /// The configuration's defaults.
    fn defaults() -> Options {
        Options {
            tracing_slow_ms: 100,
            ..Options::default()
        }
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert_eq!(resolve(&defaults(), &[]), Ok(None));
        let on = resolve(
            &defaults(),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(on.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(on.protocol, Protocol::HttpProtobuf);
        assert_eq!(on.sampler, Sampler::default());
        assert_eq!(on.slow, Some(Duration::from_millis(100)));
        assert_eq!(on.batch_delay, BATCH_DELAY);
        let disabled = resolve(
            &defaults(),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_SDK_DISABLED", "true"),
            ],
        );
        assert_eq!(disabled, Ok(None));
    }

    #[test]
    fn options_win_over_the_variables() {
        let cfg = Options {
            tracing_endpoint: Some("http://collector:4317".into()),
            tracing_protocol: Some("grpc".into()),
            tracing_sample_ratio: Some(0.01),
            tracing_slow_ms: 0,
        };
        let s = resolve(
            &cfg,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
                ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "http://collector:4317");
        assert_eq!(s.protocol, Protocol::Grpc);
        assert_eq!(
            s.sampler,
            Sampler {
                parent_based: false,
                ratio: 0.01
            }
        );
        assert_eq!(s.slow, None);
        assert_eq!(s.batch_delay, Duration::from_millis(200));
    }

    #[test]
    fn samplers_of_the_spec() {
        let s = |n, a| Sampler::from_env(Some(n), a);
        assert_eq!(s("always_off", None).unwrap().ratio, 0.0);
        assert!(!s("always_on", None).unwrap().parent_based);
        let r = s("parentbased_traceidratio", Some("0.25")).unwrap();
        assert!(r.parent_based && r.ratio == 0.25);
        assert_eq!(
            s("traceidratio", Some("2")).unwrap().ratio,
            1.0,
            "out of range"
        );
        assert!(s("jaeger_remote", None).is_err());
    }

    #[test]
    fn bad_endpoints_and_protocols_are_named() {
        let e = resolve(
            &defaults(),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317")],
        );
        assert!(e
            .unwrap_err()
            .starts_with("OTEL_EXPORTER_OTLP_ENDPOINT: https"));
        assert!(check_endpoint("c:4317").is_err());
        assert!(check_endpoint("http://").is_err());
        assert!("http/json".parse::<Protocol>().is_err());
        assert!("grpc".parse::<Protocol>().is_ok());
    }
}
