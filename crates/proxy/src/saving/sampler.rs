//! The sampler: a task that switches the windows at their edges and, around each control
//! episode, reads every node's CPU, autoprep's own and the request counters, then turns the
//! windows of a closed episode into a trial.
//!
//! A reading that fails, or answers later than half a window after the edge ([`answer_by`]),
//! leaves its windows unmeasured: their episode is dropped and counted, never estimated from a
//! partial picture. Each endpoint's failure is logged once when it starts and once when it ends.
//!
//! Dropping is not neutral: a node answers late when it is busiest (a flush, a compaction, a
//! collection), so the episodes kept tend to be the calmer ones. With a quarter window allowed, a
//! loaded three-node cluster dropped 2 of 9 (insert) and 5 of 12 (mixed) episodes for a missing
//! reading, and the estimate read 1.20 and 1.68 times the saving the nodes measured; with half a
//! window and the reading ahead below, none were dropped and it read 1.06 and 1.29.
//!
//! **Reading ahead.** A node takes its CPU figure somewhere between the GET and its answer; a
//! loaded node answers late (a three-node cluster sharing one core, at closed loop: 130 to 330
//! ms, where idle it takes 6 to 20 ms). Read at the edge, the figure would be taken well into the
//! next window, and a window's CPU would blur with its neighbour's: at closed loop, where a
//! control window runs a fifth of the requests of a rewritten one, a tenth of a window's
//! misalignment mixes in half as many requests of the other arm. So each endpoint's GET is sent
//! half its usual answer time (a moving average of its last answers) before the edge, so that
//! its figure is taken near the edge on average; autoprep's own counters are read at the edge
//! itself.

use super::estimate::{Dropped, Trial, WindowSample};
use super::schedule::{Schedule, MAX_EPISODE};
use super::{own_cpu, unix_ms, Switchback};
use autoprep_server_metrics::endpoint::MAX_BODY;
use autoprep_server_metrics::{Endpoint, NodeReading};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// The nodes to read: their native-transport addresses (the cluster view's, or the contact
/// points').
pub type Nodes = Box<dyn Fn() -> Vec<SocketAddr> + Send + Sync>;

/// A window with fewer rewritable QUERYs than this gives no trial: its CPU per request would
/// be the node's idle CPU over a handful of requests.
pub const MIN_REQUESTS: u64 = 20;

/// Everything read at the start of window `k`.
#[derive(Debug)]
struct Reading {
    k: u64,
    rewritten: u64,
    control: u64,
    own_cpu: f64,
    nodes: Vec<(String, NodeReading)>,
}

/// Runs until the runtime stops.
pub async fn run(sw: Arc<Switchback>, nodes: Nodes) {
    let schedule = sw.schedule().clone();
    if schedule.fraction() == 0.0 {
        // No window is ever a control one: the flag stays down and there is nothing to read.
        return;
    }
    let mut last: Option<Reading> = None;
    let mut samples: BTreeMap<u64, WindowSample> = BTreeMap::new();
    let mut failing: HashSet<String> = HashSet::new();
    // Each endpoint's usual answer time, in milliseconds (a moving average).
    let mut answer_ms: HashMap<String, f64> = HashMap::new();
    loop {
        let now = unix_ms();
        let next = schedule.index_at(now) + 1;
        let edge = schedule.start_ms(next);
        let url = sw.metrics_url.as_ref();
        // The GETs of the reading at this edge, sent ahead of it.
        let mut pending = None;
        if let (Some(url), true) = (url, schedule.read_at_start_of(next)) {
            let endpoints: Vec<Endpoint> = if url.per_node() {
                nodes().into_iter().map(|a| url.for_node(a)).collect()
            } else {
                vec![url.fixed()]
            };
            let edge_at =
                tokio::time::Instant::now() + Duration::from_millis(edge.saturating_sub(unix_ms()));
            let deadline = edge_at + answer_by(schedule.window());
            let mut tasks = tokio::task::JoinSet::new();
            for (i, e) in endpoints.iter().cloned().enumerate() {
                let lead = lead(&answer_ms, &e.name, schedule.window());
                let send_at = edge_at.checked_sub(lead).unwrap_or(edge_at);
                tasks.spawn(async move {
                    tokio::time::sleep_until(send_at).await;
                    let sent = tokio::time::Instant::now();
                    let timeout = deadline.saturating_duration_since(sent);
                    (i, e.read(timeout, MAX_BODY).await, sent.elapsed())
                });
            }
            pending = Some((endpoints, tasks));
        }
        let wait = edge.saturating_sub(unix_ms());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        sw.control_now
            .store(schedule.is_control(next), Ordering::Relaxed);
        if url.is_none() {
            continue;
        }
        let done = next - 1;
        if let Some((endpoints, tasks)) = pending {
            let reading = read(&sw, endpoints, tasks, next, &mut failing, &mut answer_ms).await;
            if let (Some(prev), Some(cur)) = (&last, &reading) {
                if prev.k == done {
                    if let Some(s) = window(prev, cur) {
                        samples.insert(done, s);
                    }
                }
            }
            last = reading;
        } else {
            last = None;
        }
        if let Some((a, b)) = schedule.episode_closed_by(done) {
            close_episode(&sw, &schedule, &samples, a, b);
        }
        samples.retain(|&k, _| k + 2 * MAX_EPISODE + 4 > next);
    }
}

/// How long after an edge the nodes' answers may come: half a window (at least 20 ms).
pub fn answer_by(window: Duration) -> Duration {
    (window / 2).max(Duration::from_millis(20))
}

/// How long before an edge to send `name`'s GET: half its usual answer time, at most half a
/// window (so that it goes out after the previous edge's answers were due: a reading never
/// overlaps the one before).
fn lead(answer_ms: &HashMap<String, f64>, name: &str, window: Duration) -> Duration {
    let half = answer_ms.get(name).copied().unwrap_or(0.0) / 2.0;
    Duration::from_secs_f64(half / 1000.0).min(answer_by(window))
}

/// One GET's answer and how long it took.
type Answer = (
    usize,
    Result<NodeReading, autoprep_server_metrics::ScrapeError>,
    Duration,
);

/// Reads autoprep's counters at the edge of window `k` (now), and takes every node's answer
/// from `tasks`, the GETs sent ahead of the edge; `None` when any failed.
async fn read(
    sw: &Switchback,
    endpoints: Vec<Endpoint>,
    mut tasks: tokio::task::JoinSet<Answer>,
    k: u64,
    failing: &mut HashSet<String>,
    answer_ms: &mut HashMap<String, f64>,
) -> Option<Reading> {
    let (rewritten, control) = sw.counters();
    let own = own_cpu::seconds();
    let mut readings: Vec<Option<NodeReading>> = vec![None; endpoints.len()];
    let mut ok = true;
    let mut errors = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let Ok((i, result, took)) = done else {
            ok = false;
            continue;
        };
        let name = &endpoints[i].name;
        // A late answer counts too (its full time is not known: at least the timeout).
        let ms = took.as_secs_f64() * 1000.0;
        answer_ms
            .entry(name.clone())
            .and_modify(|m| *m += (ms - *m) / 4.0)
            .or_insert(ms);
        match result {
            Ok(r) => {
                if failing.remove(name) {
                    info!(endpoint = %name, "server metrics: the endpoint answers again");
                }
                readings[i] = Some(r);
            }
            Err(e) => {
                ok = false;
                errors.push(e.kind());
                if failing.insert(name.clone()) {
                    warn!(endpoint = %name, error = %e, "server metrics: reading failed; the estimate of server CPU saved is not updated from this node until it answers (autoprep_server_metrics_errors_total)");
                }
            }
        }
    }
    {
        let mut st = sw.lock();
        st.endpoints = endpoints.len();
        st.failing = endpoints
            .iter()
            .filter(|e| failing.contains(&e.name))
            .count();
        for kind in errors {
            *st.errors.entry(kind).or_default() += 1;
        }
        if ok && !endpoints.is_empty() {
            st.readings += 1;
        }
    }
    if !ok || endpoints.is_empty() {
        return None;
    }
    Some(Reading {
        k,
        rewritten,
        control,
        own_cpu: own.unwrap_or(0.0),
        nodes: endpoints
            .into_iter()
            .map(|e| e.name)
            .zip(readings.into_iter().flatten())
            .collect(),
    })
}

/// The window between two readings; `None` when the nodes differ or a node restarted.
fn window(prev: &Reading, cur: &Reading) -> Option<WindowSample> {
    if prev.nodes.len() != cur.nodes.len() {
        return None;
    }
    let mut server_cpu = 0.0;
    for ((pn, pr), (cn, cr)) in prev.nodes.iter().zip(&cur.nodes) {
        if pn != cn {
            return None;
        }
        server_cpu += cr.since(pr).ok()?.cpu_seconds;
    }
    Some(WindowSample {
        server_cpu,
        own_cpu: (cur.own_cpu - prev.own_cpu).max(0.0),
        rewritten: cur.rewritten.saturating_sub(prev.rewritten),
        control: cur.control.saturating_sub(prev.control),
    })
}

/// Turns episode `a..=b` and its baselines into a trial, or counts why not.
fn close_episode(
    sw: &Switchback,
    schedule: &Schedule,
    samples: &BTreeMap<u64, WindowSample>,
    a: u64,
    b: u64,
) {
    let control: Option<Vec<WindowSample>> = (a..=b).map(|k| samples.get(&k).copied()).collect();
    let Some(control) = control else {
        sw.dropped(Dropped::MissingReading);
        return;
    };
    let Some(washout) = samples.get(&(b + 1)).copied() else {
        sw.dropped(Dropped::MissingReading);
        return;
    };
    let mut wanted = 0;
    let mut baseline = Vec::new();
    for k in [a.checked_sub(1), Some(b + 2)].into_iter().flatten() {
        if schedule.role(k).baseline {
            wanted += 1;
            baseline.extend(samples.get(&k).copied());
        }
    }
    if baseline.is_empty() {
        sw.dropped(if wanted > 0 {
            Dropped::MissingReading
        } else {
            Dropped::NoBaseline
        });
        return;
    }
    match Trial::of(
        schedule.start_ms(a),
        &control,
        &[washout],
        &baseline,
        MIN_REQUESTS,
    ) {
        Ok(t) => sw.lock().estimator.push(t),
        Err(why) => sw.dropped(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoprep_server_metrics::UrlTemplate;

    fn reading(k: u64, cpu: f64, rewritten: u64, control: u64) -> Reading {
        let text = format!("cassandra_process_cpu_seconds_total {cpu}\n");
        let e = autoprep_server_metrics::Exposition::parse(&text).unwrap();
        Reading {
            k,
            rewritten,
            control,
            own_cpu: k as f64 * 0.01,
            nodes: vec![("n1".into(), NodeReading::from_exposition(&e).unwrap())],
        }
    }

    #[test]
    fn a_window_is_the_change_between_two_readings() {
        let w = window(&reading(1, 10.0, 100, 5), &reading(2, 10.5, 900, 5)).unwrap();
        assert!((w.server_cpu - 0.5).abs() < 1e-12);
        assert_eq!((w.rewritten, w.control), (800, 0));
        assert!((w.own_cpu - 0.01).abs() < 1e-12);
        // A node that restarted in between gives no window.
        assert_eq!(
            window(&reading(1, 10.0, 0, 0), &reading(2, 3.0, 0, 0)),
            None
        );
        let mut other = reading(2, 11.0, 0, 0);
        other.nodes[0].0 = "n2".into();
        assert_eq!(window(&reading(1, 10.0, 0, 0), &other), None);
    }

    /// A metrics endpoint on a fresh port answering every GET with `body()`; its port.
    async fn serve(body: impl Fn() -> String + Send + Sync + 'static) -> u16 {
        serve_slowly(Duration::ZERO, body).await
    }

    /// The same, as a loaded node answers: `body()` is taken half of `delay` after the GET
    /// arrived, and the answer sent after `delay`.
    async fn serve_slowly(
        delay: Duration,
        body: impl Fn() -> String + Send + Sync + 'static,
    ) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let body = Arc::new(body);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    tokio::time::sleep(delay / 2).await;
                    let answer = format!("HTTP/1.1 200 OK\r\n\r\n{}", body());
                    tokio::time::sleep(delay / 2).await;
                    let _ = s.write_all(answer.as_bytes()).await;
                });
            }
        });
        port
    }

    /// The sampler against a real endpoint: a fraction of 1/3 and short windows, a fake node
    /// whose CPU grows by 300 µs per control request and 200 µs per rewritten one, and a client
    /// that keeps both counters moving as the windows say. The estimate finds 100 µs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sampler_finds_the_saving_of_a_simulated_node() {
        simulated_node(Duration::ZERO, Duration::from_millis(100)).await;
    }

    /// The same node answering in 280 ms, later than half a window (200 ms) allows after the
    /// edge: its GETs are sent ahead of the edges, and the estimate is as right. (Windows of
    /// 400 ms, so that timer jitter on a loaded test machine stays small beside them.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_endpoint_is_read_ahead_of_the_edge() {
        simulated_node(Duration::from_millis(280), Duration::from_millis(400)).await;
    }

    async fn simulated_node(delay: Duration, window: Duration) {
        use std::sync::atomic::AtomicU64;
        let cpu_us = Arc::new(AtomicU64::new(1_000_000));
        let served = cpu_us.clone();
        let port = serve_slowly(delay, move || {
            let cpu = served.load(Ordering::Relaxed) as f64 / 1e6;
            format!("cassandra_process_cpu_seconds_total {cpu}\n")
        })
        .await;
        let sw = Arc::new(Switchback::with_schedule(
            Schedule::new(1.0 / 3.0, window, 5),
            Some(UrlTemplate::parse(&format!("http://{{host}}:{port}/metrics")).unwrap()),
        ));
        let nodes: Nodes = Box::new(|| vec!["127.0.0.1:9042".parse().unwrap()]);
        tokio::spawn(run(sw.clone(), nodes));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = {
            let (sw, stop) = (sw.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if sw.control_now() {
                        sw.count_control();
                        cpu_us.fetch_add(300, Ordering::Relaxed);
                    } else {
                        sw.count_rewritten();
                        cpu_us.fetch_add(200, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_micros(250)).await;
                }
            })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let r = sw.report();
            if r.estimate.is_some_and(|e| e.trials >= 8) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "no estimate: {r:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let _ = client.await;
        let r = sw.report();
        let e = r.estimate.unwrap_or_else(|| panic!("no estimate: {r:?}"));
        // Requests straddling a window edge blur the arms a little: within a fifth.
        assert!((e.saved - 100e-6).abs() < 20e-6, "{e:?} {r:?}");
        assert!(r.readings > 0, "{r:?}");
        if delay.is_zero() {
            assert!(r.errors.is_empty(), "{r:?}");
        }
    }

    /// An endpoint that answers garbage: counted and no estimate, never a figure.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_garbled_endpoint_gives_no_figure() {
        let port = serve(|| "<html>\n".to_owned()).await;
        let sw = Arc::new(Switchback::with_schedule(
            Schedule::new(0.5, Duration::from_millis(50), 5),
            Some(UrlTemplate::parse(&format!("http://127.0.0.1:{port}/metrics")).unwrap()),
        ));
        let nodes: Nodes = Box::new(Vec::new);
        tokio::spawn(run(sw.clone(), nodes));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while sw.report().errors.is_empty() {
            assert!(tokio::time::Instant::now() < deadline);
            for _ in 0..100 {
                sw.count_rewritten();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = sw.report();
        assert!(
            r.errors.get("not an exposition").copied().unwrap_or(0) > 0,
            "{r:?}"
        );
        assert!(r.estimate.is_none());
        assert_eq!(r.saved(), None);
        assert_eq!(r.failing, 1);
    }
}
