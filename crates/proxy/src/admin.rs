//! The admin server: HTTP/1.1 on its own port (`--admin`, `AUTOPREP_ADMIN`).
//!
//! - `GET /live`: 200 while the process runs.
//! - `GET /ready`: 200 once the data listener accepts connections and an upstream node answers
//!   OPTIONS with SUPPORTED (probed at most once a second, with a timeout); 503 with the reason
//!   otherwise, and from the moment the proxy starts draining.
//! - `GET /metrics`: the Prometheus text format (see [`crate::metrics`]).
//! - `GET /shapes[?limit=N]`: JSON of the most executed statement shapes (see
//!   [`crate::shapes`]); never a literal value.
//! - `GET /log`: the log filter in force, the configured one, and when a temporary one
//!   reverts (JSON). `PUT /log[?for=SECONDS]` with an `EnvFilter` string as the body puts that
//!   filter in force (for that long, then the configured one again); `DELETE /log` puts the
//!   configured one back at once. See [`crate::log_filter`].
//!
//! Design justification: the server runs on a thread of its own with a single-threaded tokio
//! runtime. Health checks and scrapes must answer while the data path is saturated, and a
//! runtime whose workers are all busy forwarding would queue them behind the traffic; a second
//! runtime on its own OS thread is scheduled by the kernel like any other thread.

use crate::context::Context;
use crate::log_filter::LogFilter;
use crate::metrics::{Metrics, TlsExpiry};
use crate::upstream::UpstreamTls;
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

/// How long a readiness probe result is reused.
const PROBE_TTL: Duration = Duration::from_secs(1);

/// How long the upstream gets to accept the probe's connection and answer OPTIONS. Below the
/// one-second default timeout of a Kubernetes probe, so that a slow upstream reads as "not
/// ready" rather than as a probe failure.
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);

/// Admin connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Shapes in `/shapes` unless `?limit=` says otherwise.
const DEFAULT_SHAPES: usize = 100;

/// Largest body `PUT /log` reads (a filter is a line of directives).
const MAX_FILTER_BYTES: usize = 4096;

const TEXT: &str = "text/plain; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
const JSON: &str = "application/json";

/// Binds `addr` and serves the admin endpoints on a thread of its own until the process ends.
/// Returns the bound address (also stored in `ctx.admin_addr`). `log` is the process's
/// reloadable log filter (`/log`); without one, `/log` answers 501.
pub fn spawn(addr: &str, ctx: Arc<Context>, log: Option<LogFilter>) -> anyhow::Result<SocketAddr> {
    // Bound here, on the caller's thread, so that a bad address fails the start.
    let std_listener = std::net::TcpListener::bind(addr)
        .map_err(|e| anyhow::anyhow!("--admin: bind {addr}: {e}"))?;
    std_listener.set_nonblocking(true)?;
    let local = std_listener.local_addr()?;
    let _ = ctx.admin_addr.set(local);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("autoprep-admin".into())
        .spawn(move || {
            rt.block_on(async move {
                match TcpListener::from_std(std_listener) {
                    Ok(listener) => serve(listener, ctx, log).await,
                    Err(e) => warn!(error = %e, "admin listener unusable"),
                }
            })
        })?;
    info!(admin = %local, "admin server listening");
    Ok(local)
}

/// Accepts admin connections forever.
async fn serve(listener: TcpListener, ctx: Arc<Context>, log: Option<LogFilter>) {
    let state = Arc::new(State {
        ctx,
        log,
        readiness: Mutex::new(None),
    });
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            debug!(%peer, "too many admin connections; closed");
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(req, &state).await) }
            });
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(sock), svc)
                .await;
            if let Err(e) = served {
                debug!(%peer, error = %e, "admin connection ended");
            }
            drop(permit);
        });
    }
}

/// The admin server's own state.
struct State {
    ctx: Arc<Context>,
    log: Option<LogFilter>,
    /// The last upstream probe: when, and its result.
    readiness: Mutex<Option<(Instant, Result<(), String>)>>,
}

async fn handle(req: Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    if req.uri().path() == "/log" {
        return log(req, state.log.as_ref()).await;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "method not allowed\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let ctx = &state.ctx;
    match req.uri().path() {
        "/live" => reply(StatusCode::OK, TEXT, "live\n"),
        "/ready" => match ready(state).await {
            Ok(()) => reply(StatusCode::OK, TEXT, "ready\n"),
            Err(why) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                format!("not ready: {why}\n"),
            ),
        },
        "/metrics" => reply(StatusCode::OK, PROMETHEUS_TEXT, metrics_text(ctx)),
        "/shapes" => {
            let limit = query_param(req.uri().query(), "limit")
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_SHAPES);
            reply(StatusCode::OK, JSON, shapes_json(ctx, limit))
        }
        "/saving" => reply(StatusCode::OK, JSON, saving_json(ctx)),
        "/cluster" => reply(StatusCode::OK, JSON, cluster_json(ctx)),
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: try /live, /ready, /metrics, /shapes, /saving, /cluster, /log\n",
        ),
    }
}

fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The body of `/metrics`.
pub fn metrics_text(ctx: &Context) -> String {
    let mut out = String::with_capacity(8 * 1024);
    ctx.metrics.encode(
        &ctx.rewriter.cache.stats(),
        ctx.rewriter.shapes.len(),
        &mut out,
    );
    ctx.metrics
        .encode_literals(ctx.rewriter.literals.stats(), &mut out);
    ctx.metrics.encode_control(
        ctx.cfg.control_fraction(),
        ctx.rewriter.shapes.response_time_saved(),
        &mut out,
    );
    Metrics::encode_saving(&ctx.rewriter.switchback.report(), &mut out);
    Metrics::encode_local_dc(ctx.cluster.local_dc(), &mut out);
    // Per-shape percentiles (top 10 shapes and `other`) and the trace export's counts.
    let (top, other) = ctx.rewriter.shapes.latency_series(10);
    Metrics::encode_shape_latency(&top, &other, &mut out);
    Metrics::encode_tracing(ctx.tracing.counts(), &mut out);
    let expiry = TlsExpiry {
        client: ctx
            .client_tls
            .as_ref()
            .and_then(|t| t.reloadable().not_after()),
        upstream: ctx
            .upstream_tls
            .as_ref()
            .and_then(|t| t.reloadable().not_after()),
    };
    ctx.metrics.encode_tls(expiry, &mut out);
    out
}

/// `/log`: GET reports the filter, PUT sets one (`?for=SECONDS`: until then), DELETE reverts.
async fn log(req: Request<Incoming>, filter: Option<&LogFilter>) -> Response<Full<Bytes>> {
    let Some(filter) = filter else {
        return reply(
            StatusCode::NOT_IMPLEMENTED,
            TEXT,
            "this process has no reloadable log filter\n",
        );
    };
    let result = match *req.method() {
        Method::GET | Method::HEAD => Ok(filter.status()),
        Method::DELETE => filter.revert().map_err(|e| e.to_string()),
        Method::PUT => {
            let for_ = match query_param(req.uri().query(), "for") {
                None => None,
                Some(v) => match v.parse::<u64>() {
                    Ok(n) => Some(Duration::from_secs(n)),
                    Err(_) => {
                        return reply(
                            StatusCode::BAD_REQUEST,
                            TEXT,
                            format!("for: expected whole seconds, got {v:?}\n"),
                        )
                    }
                },
            };
            match Limited::new(req.into_body(), MAX_FILTER_BYTES)
                .collect()
                .await
            {
                Err(e) => Err(format!("cannot read the filter: {e}")),
                Ok(body) => match std::str::from_utf8(&body.to_bytes()) {
                    Err(_) => Err("the filter is not UTF-8".into()),
                    Ok(text) => filter.set(text, for_).map_err(|e| e.to_string()),
                },
            }
        }
        _ => {
            let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "method not allowed\n");
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD, PUT, DELETE"));
            return r;
        }
    };
    match result {
        Ok(status) => {
            let mut s = serde_json::to_string(&status).unwrap_or_else(|_| "{}".into());
            s.push('\n');
            reply(StatusCode::OK, JSON, s)
        }
        Err(e) => reply(StatusCode::BAD_REQUEST, TEXT, format!("{e}\n")),
    }
}

#[derive(Serialize)]
struct ShapesBody {
    /// Shapes tracked now (at most [`crate::shapes::MAX_SHAPES`]).
    tracked: usize,
    /// Shapes forgotten to stay within that bound.
    evicted: u64,
    /// The most executed first.
    shapes: Vec<crate::shapes::ShapeSnapshot>,
}

/// The body of `/shapes`.
pub fn shapes_json(ctx: &Context, limit: usize) -> String {
    let all = ctx.rewriter.shapes.top(usize::MAX);
    let mut shapes: Vec<_> = all.iter().take(limit).cloned().collect();
    let report = ctx.rewriter.switchback.report();
    crate::shapes::apportion(&mut shapes, &all, report.saved(), report.own_cpu);
    let body = ShapesBody {
        tracked: ctx.rewriter.shapes.len(),
        evicted: ctx.rewriter.shapes.evicted(),
        shapes,
    };
    let mut s = serde_json::to_string_pretty(&body).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// `/cluster`: the local datacenter and how it was decided, the nodes of the cluster view,
/// and where each contact point lies for homing client connections.
pub fn cluster_json(ctx: &Context) -> String {
    use crate::contact_points::Place;
    let cluster = &ctx.cluster;
    let view = cluster.current();
    let local = cluster.local_dc();
    let nodes: Vec<_> = view.as_ref().map_or(Vec::new(), |v| {
        v.nodes()
            .iter()
            .map(|n| {
                serde_json::json!({
                    "address": n.addr.to_string(),
                    "datacenter": n.datacenter,
                    "local": local.is_some_and(|l| l.name == n.datacenter),
                })
            })
            .collect()
    });
    let points = &ctx.upstreams;
    let contact_points: Vec<_> = (0..points.len())
        .map(|i| {
            let resolved = points.resolved(i);
            let place = match resolved.map(|a| cluster.place(a, ctx.cfg.routing_remote_failover)) {
                Some(Place::Local) => "local",
                None | Some(Place::Unknown) => "unknown",
                Some(Place::Remote) => "remote (failover)",
                Some(Place::Excluded) => "remote (not used)",
            };
            serde_json::json!({
                "contact_point": points.addr(i),
                "address": resolved.map(|a| a.to_string()),
                "place": place,
            })
        })
        .collect();
    let body = serde_json::json!({
        "routing": cluster.enabled(),
        "local_datacenter": local.map(|l| serde_json::json!({
            "name": l.name,
            "source": if l.configured { "--routing-local-dc" } else { "the first contact point that answered" },
        })),
        "remote_failover": ctx.cfg.routing_remote_failover,
        "nodes": nodes,
        "contact_points": contact_points,
    });
    let mut s = serde_json::to_string_pretty(&body).unwrap_or_default();
    s.push('\n');
    s
}

/// The body of `/saving`: the estimate of server CPU saved, how it stands, and its trials.
pub fn saving_json(ctx: &Context) -> String {
    let sw = &ctx.rewriter.switchback;
    let r = sw.report();
    let est = r.estimate;
    let f = |v: Option<f64>| v.filter(|x| x.is_finite());
    let body = serde_json::json!({
        "method": "switchback windows: the nodes' CPU per rewritable QUERY in control windows (sent as they came) against the rewritten windows around them",
        "control_fraction": r.fraction,
        "window_seconds": r.window.as_secs_f64(),
        "server_metrics": r.estimating,
        "endpoints": r.endpoints,
        "endpoints_failing": r.failing,
        "readings": r.readings,
        "errors": r.errors,
        "rewritten": r.rewritten,
        "control": r.control,
        "trials_used": r.trials_used,
        "trials_dropped": crate::saving::estimate::Dropped::ALL
            .iter()
            .zip(r.trials_dropped)
            .map(|(d, n)| (d.label(), n))
            .collect::<std::collections::BTreeMap<_, _>>(),
        "saved_seconds": f(r.saved().map(|s| s.0)),
        "saved_interval_seconds": r.saved().map(|s| [s.1, s.2]),
        "saved_per_rewritten_seconds": f(est.map(|e| e.saved)),
        "saved_per_rewritten_half_width_seconds": f(est.map(|e| e.half_width)),
        "server_cpu_per_request_seconds": est.map(|e| serde_json::json!({"control": e.server_control, "rewritten": e.server_rewritten})),
        "own_cpu_per_request_seconds": est.map(|e| serde_json::json!({"control": e.own_control, "rewritten": e.own_rewritten})),
        "own_cpu_seconds": f(r.own_cpu),
        "net_saved_seconds": f(r.net()),
        "seconds_to_precision_10pct": f(est.and_then(|e| e.seconds_to_tenth)),
        "trials": sw.trials().iter().rev().take(200).map(|t| serde_json::json!({
            "at_unix_ms": t.at_unix_ms,
            "saved_per_request_seconds": t.saved(),
            "server_control": t.server_control,
            "server_rewritten": t.server_rewritten,
            "own_control": t.own_control,
            "own_rewritten": t.own_rewritten,
            "control_requests": t.control_requests,
            "baseline_requests": t.baseline_requests,
        })).collect::<Vec<_>>(),
    });
    let mut s = serde_json::to_string_pretty(&body).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// Ready: listening, not draining, and the upstream answers (a cached probe).
async fn ready(state: &State) -> Result<(), String> {
    let ctx = &state.ctx;
    if ctx.lifecycle.is_draining() {
        return Err("draining".into());
    }
    if !ctx.listening.load(Ordering::Relaxed) {
        return Err("the CQL listener is not accepting connections".into());
    }
    let cached = state
        .readiness
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .filter(|(at, _)| at.elapsed() < PROBE_TTL)
        .map(|(_, r)| r.clone());
    if let Some(r) = cached {
        return r;
    }
    // Ready when any contact point answers: a new client connection goes to one that does.
    // All are asked at once, so a node that does not answer cannot hold the probe up past
    // one timeout; the first answer ends it (the others are dropped with the set).
    let mut probes = tokio::task::JoinSet::new();
    for upstream in ctx.upstreams.addrs() {
        let (upstream, tls) = (upstream.to_owned(), ctx.upstream_tls.clone());
        probes.spawn(async move {
            match tokio::time::timeout(PROBE_TIMEOUT, probe(&upstream, tls.as_ref())).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("upstream {upstream}: {e}")),
                Err(_) => Err(format!(
                    "upstream {upstream}: no answer to OPTIONS within {} ms",
                    PROBE_TIMEOUT.as_millis()
                )),
            }
        });
    }
    let mut failures = Vec::new();
    while let Some(done) = probes.join_next().await {
        match done {
            Ok(Ok(())) => {
                failures.clear();
                break;
            }
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("probe failed: {e}")),
        }
    }
    let result = if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    };
    *state.readiness.lock().unwrap_or_else(|p| p.into_inner()) =
        Some((Instant::now(), result.clone()));
    result
}

/// Connects to the upstream node (over TLS when `tls` is set) and asks OPTIONS (protocol v4,
/// which every supported server speaks); SUPPORTED means it answers CQL.
pub async fn probe(upstream: &str, tls: Option<&UpstreamTls>) -> Result<(), String> {
    let mut sock = crate::upstream::connect_to(upstream, tls, PROBE_TIMEOUT)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let options = Envelope::new(
        Header {
            version: ProtocolVersion::V4,
            direction: Direction::Request,
            flags: Flags(0),
            stream: StreamId(0),
            opcode: Opcode::OPTIONS,
            length: 0,
        },
        &[],
    )
    .into_frame();
    let sent = async {
        sock.write_all(&options).await?;
        sock.flush().await
    };
    sent.await.map_err(|e| format!("send OPTIONS: {e}"))?;
    // SUPPORTED is a few hundred bytes; anything far larger is not a CQL answer to OPTIONS.
    let decoder = EnvelopeDecoder::new(Direction::Response, 64 * 1024);
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(env)) if env.header().opcode == Opcode::SUPPORTED => return Ok(()),
            Ok(Some(env)) => {
                return Err(format!(
                    "answered OPTIONS with {}",
                    env.header().opcode.name()
                ))
            }
            Ok(None) => {}
            Err(e) => return Err(format!("not a CQL answer: {e}")),
        }
        match sock.read_buf(&mut buf).await {
            Ok(0) => return Err("closed the connection".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params() {
        assert_eq!(query_param(Some("limit=5"), "limit"), Some("5"));
        assert_eq!(query_param(Some("a=1&limit=7"), "limit"), Some("7"));
        assert_eq!(query_param(Some("limitx=7"), "limit"), None);
        assert_eq!(query_param(None, "limit"), None);
    }

    #[tokio::test]
    async fn probe_of_a_closed_port_fails() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        assert!(probe(&addr, None).await.unwrap_err().starts_with("connect"));
    }

    #[tokio::test]
    async fn probe_of_a_non_cql_server_fails() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        });
        assert!(probe(&addr, None).await.is_err());
    }
}
