//! The admin server against the real server: `/metrics`, `/live`, `/ready` and `/shapes` after
//! literal statements went through the proxy; no literal value in what it shows; `/ready` 503
//! when the upstream is down.

use autoprep::config::Config;
use autoprep_tests::{proxy_ctx, upstream, Client, Response};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One HTTP/1.1 request over a fresh connection: (status, body).
fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, body.to_owned())
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(addr, "GET", path)
}

/// The value of the sample whose line starts with `series ` in a `/metrics` body.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
        .parse()
        .unwrap()
}

/// Literal values the statements below carry; none may show in the admin output. The numbers
/// could turn up by chance inside a counter's value or a fingerprint, so they are looked for in
/// the text parts only (shape texts, reasons, metric names and labels).
const SECRETS: [&str; 3] = ["sekrit-value", "0x00001234", "2026-05-06"];
const SECRET_NUMBERS: [&str; 2] = ["4242", "98765"];

#[test]
fn admin_endpoints_show_the_savings_without_literals() {
    let direct_addr = upstream();
    let mut direct = Client::connect(&direct_addr).unwrap();
    for q in [
        "CREATE KEYSPACE IF NOT EXISTS autoprep_admin WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TABLE IF NOT EXISTS autoprep_admin.kv (k int PRIMARY KEY, v text, at date)",
        "CREATE TABLE IF NOT EXISTS autoprep_admin.kc (k int, c int, v text, PRIMARY KEY (k, c))",
    ] {
        direct.query(q).unwrap().ok().unwrap();
    }
    let mut cfg = Config::for_upstream(&direct_addr);
    cfg.admission_threshold = 1;
    cfg.admin = Some("127.0.0.1:0".into());
    let (addr, ctx) = proxy_ctx(cfg);
    let admin = *ctx.admin_addr.get().expect("admin server started");

    assert_eq!(get(admin, "/live"), (200, "live\n".into()));

    let mut c = Client::connect(&addr.to_string()).unwrap();
    c.query("USE autoprep_admin").unwrap().ok().unwrap();
    for i in 0..20 {
        let q = format!(
            "INSERT INTO kv (k, v, at) VALUES ({}, 'sekrit-value-{i}', '2026-05-06')",
            4242 + i
        );
        assert_eq!(c.query(&q).unwrap(), Response::Void, "{q}");
        let q = format!("SELECT v FROM kv WHERE k = {}", 4242 + i);
        c.query(&q).unwrap().rows().unwrap();
        // The function argument stays inline in the shape's canonical text.
        let q = format!(
            "SELECT v FROM kc WHERE k = blobAsInt(0x00001234) AND c = {}",
            98765 + i
        );
        c.query(&q).unwrap().rows().unwrap();
    }

    let (status, metrics) = get(admin, "/metrics");
    assert_eq!(status, 200);
    assert!(sample(&metrics, "autoprep_requests_total{opcode=\"QUERY\"}") >= 61.0);
    assert!(sample(&metrics, "autoprep_requests_total{opcode=\"STARTUP\"}") >= 1.0);
    assert!(
        sample(
            &metrics,
            "autoprep_queries_total{outcome=\"rewritten\",reason=\"\"}"
        ) >= 50.0,
        "{metrics}"
    );
    assert!(sample(&metrics, "autoprep_prepares_total{result=\"ok\"}") >= 3.0);
    assert_eq!(sample(&metrics, "autoprep_client_connections"), 1.0);
    assert!(sample(&metrics, "autoprep_cache_entries") >= 3.0);
    assert!(sample(&metrics, "autoprep_received_bytes_total") > 1000.0);
    assert!(sample(&metrics, "autoprep_sent_bytes_total") > 1000.0);
    assert!(sample(&metrics, "autoprep_request_duration_seconds_count") >= 62.0);
    assert!(sample(&metrics, "autoprep_request_duration_seconds_sum") > 0.0);

    let (status, body) = get(admin, "/shapes");
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let shapes = json["shapes"].as_array().unwrap();
    let find = |text: &str| {
        shapes
            .iter()
            .find(|s| s["text"] == text)
            .unwrap_or_else(|| panic!("no shape {text:?} in {body}"))
    };
    let insert = find("INSERT INTO kv (k, v, at) VALUES (?, ?, ?)");
    assert_eq!(insert["keyspace"], "autoprep_admin");
    assert_eq!(insert["executions"], 20);
    assert!(insert["rewritten"].as_u64().unwrap() >= 18, "{insert}");
    assert_eq!(
        insert["rewritten"].as_u64().unwrap()
            + insert["passthrough"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>(),
        20
    );
    assert_eq!(insert["prepare_failures"], 0);
    assert_eq!(insert["latency_samples"], 20);
    assert!(insert["mean_latency_seconds"].as_f64().unwrap() > 0.0);
    let inline = find("SELECT v FROM kc WHERE k = blobAsInt(<literal>) AND c = ?");
    assert_eq!(inline["executions"], 20);
    find("SELECT v FROM kv WHERE k = ?");
    assert_eq!(
        json["tracked"].as_u64().unwrap() as usize,
        ctx.rewriter.shapes.len()
    );
    let (_, one) = get(admin, "/shapes?limit=1");
    let one: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(one["shapes"].as_array().unwrap().len(), 1);

    for secret in SECRETS {
        assert!(!body.contains(secret), "{secret} in /shapes:\n{body}");
        assert!(
            !metrics.contains(secret),
            "{secret} in /metrics:\n{metrics}"
        );
    }
    let mut texts: Vec<String> = Vec::new();
    for s in shapes {
        texts.push(s["text"].as_str().unwrap().to_owned());
        texts.push(s["keyspace"].to_string());
        texts.extend(s["passthrough"].as_object().unwrap().keys().cloned());
    }
    texts.extend(
        metrics
            .lines()
            .filter_map(|l| l.rsplit_once(' ').map(|(series, _)| series.to_owned())),
    );
    for secret in SECRET_NUMBERS {
        for t in &texts {
            assert!(!t.contains(secret), "{secret} in {t:?}");
        }
    }

    assert_eq!(get(admin, "/ready"), (200, "ready\n".into()));
    assert_eq!(get(admin, "/nope").0, 404);
    assert_eq!(http(admin, "POST", "/metrics").0, 405);
    assert_eq!(http(admin, "HEAD", "/live").0, 200);

    ctx.lifecycle.start_drain();
    assert_eq!(get(admin, "/ready"), (503, "not ready: draining\n".into()));
    assert_eq!(get(admin, "/live").0, 200);
}

#[test]
fn not_ready_while_the_upstream_is_down() {
    let mut cfg = Config::for_upstream(&closed_port());
    cfg.admin = Some("127.0.0.1:0".into());
    let (_, ctx) = proxy_ctx(cfg);
    let admin = *ctx.admin_addr.get().unwrap();
    let (status, body) = get(admin, "/ready");
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("not ready: upstream 127.0.0.1:"), "{body}");
    assert_eq!(get(admin, "/live").0, 200);
    let (status, metrics) = get(admin, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(sample(&metrics, "autoprep_client_connections"), 0.0);
}

#[test]
fn ready_when_any_contact_point_answers() {
    let closed = closed_port();
    for upstreams in [
        format!("{closed},{}", upstream()),
        format!("{},{closed}", upstream()),
    ] {
        let mut cfg = Config::for_upstream(&upstreams);
        cfg.admin = Some("127.0.0.1:0".into());
        let (_, ctx) = proxy_ctx(cfg);
        let admin = *ctx.admin_addr.get().unwrap();
        assert_eq!(get(admin, "/ready"), (200, "ready\n".into()), "{upstreams}");
    }
    // None answers: every contact point is named.
    let other = closed_port();
    let mut cfg = Config::for_upstream(&format!("{closed},{other}"));
    cfg.admin = Some("127.0.0.1:0".into());
    let (_, ctx) = proxy_ctx(cfg);
    let (status, body) = get(*ctx.admin_addr.get().unwrap(), "/ready");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains(&closed) && body.contains(&other), "{body}");
}

/// An address nothing listens on.
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[test]
fn answers_while_the_data_path_runtime_is_stuck() {
    // A data-path runtime of one worker, which a task then keeps busy.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut cfg = Config::for_upstream(&upstream());
    cfg.admin = Some("127.0.0.1:0".into());
    let (_, ctx) = rt.block_on(autoprep::server::spawn(cfg)).unwrap();
    let admin = *ctx.admin_addr.get().unwrap();
    // Let the listener task run once (it marks the proxy as listening), then block the worker.
    std::thread::sleep(Duration::from_millis(100));
    let (stuck_tx, stuck_rx) = std::sync::mpsc::channel::<()>();
    rt.spawn(async move {
        let _ = stuck_rx.recv_timeout(Duration::from_secs(20));
    });
    std::thread::sleep(Duration::from_millis(100));
    let started = std::time::Instant::now();
    assert_eq!(get(admin, "/live").0, 200);
    assert_eq!(get(admin, "/metrics").0, 200);
    assert_eq!(get(admin, "/ready"), (200, "ready\n".into()));
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(stuck_tx);
    rt.shutdown_timeout(Duration::from_secs(1));
}
