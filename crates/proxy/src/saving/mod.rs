//! The estimate of server CPU saved: how much CPU the cluster did not spend because autoprep
//! rewrote the application's QUERYs, measured on the user's own cluster at its own load.
//!
//! Method (switchback windows, see [`schedule`]): for short random windows of time (a few %)
//! every rewritable QUERY goes to the server as the application sent it. The nodes' CPU is
//! read from their metrics endpoints (`--server-metrics-url`) at the edges of those windows
//! and of the rewritten windows around them ([`sampler`]); the CPU per rewritable QUERY in the
//! two arms gives the saving per rewritten QUERY, with a 95 % interval over the episodes
//! ([`estimate`]). Times the QUERYs rewritten, it is the CPU the cluster did not spend.
//! Beside it: autoprep's own CPU ([`own_cpu`]) and the net of the two.
//!
//! The request path reads one flag (`control_now`) and bumps one of two counters; everything
//! else runs on the sampler's task, which a missing, slow or garbled endpoint can delay but
//! never the requests.

pub mod estimate;
pub mod own_cpu;
pub mod sampler;
pub mod schedule;

use autoprep_server_metrics::UrlTemplate;
use estimate::{Dropped, Estimate, Estimator};
use schedule::Schedule;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The switchback state every session shares.
#[derive(Debug)]
pub struct Switchback {
    schedule: Schedule,
    /// Whether the current window is a control one: the only thing the request path reads.
    control_now: AtomicBool,
    /// Rewritable QUERYs sent as EXECUTE, and sent as they came in control windows.
    rewritten: AtomicU64,
    control: AtomicU64,
    /// The nodes' metrics endpoints; `None`: no CPU estimate (the windows still switch, for
    /// the response-time comparison).
    metrics_url: Option<UrlTemplate>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    estimator: Estimator,
    /// Failed readings by kind (`autoprep_server_metrics_errors_total{reason}`).
    errors: BTreeMap<&'static str, u64>,
    /// Endpoints read, and of those failing at their last reading.
    endpoints: usize,
    failing: usize,
    /// Readings that succeeded.
    readings: u64,
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What `/metrics`, `/shapes` and `/saving` show of the estimate.
#[derive(Debug, Clone)]
pub struct Report {
    pub fraction: f64,
    pub window: Duration,
    /// Whether server metrics are read at all.
    pub estimating: bool,
    pub estimate: Option<Estimate>,
    pub rewritten: u64,
    pub control: u64,
    /// Episodes used, and dropped by reason ([`Dropped::ALL`] order).
    pub trials_used: u64,
    pub trials_dropped: [u64; 3],
    pub errors: BTreeMap<&'static str, u64>,
    pub endpoints: usize,
    pub failing: usize,
    pub readings: u64,
    /// autoprep's own CPU seconds since it started.
    pub own_cpu: Option<f64>,
}

impl Report {
    /// Server CPU seconds saved so far, and the bounds of its 95 % interval: the estimate per
    /// rewritten QUERY times the QUERYs rewritten. 0 (within 0) while nothing was rewritten.
    pub fn saved(&self) -> Option<(f64, f64, f64)> {
        let n = self.rewritten as f64;
        if self.rewritten == 0 {
            return Some((0.0, 0.0, 0.0));
        }
        let e = self.estimate?;
        Some((
            e.saved * n,
            (e.saved - e.half_width) * n,
            (e.saved + e.half_width) * n,
        ))
    }

    /// Server CPU saved less autoprep's own CPU, seconds.
    pub fn net(&self) -> Option<f64> {
        Some(self.saved()?.0 - self.own_cpu?)
    }
}

impl Switchback {
    /// From the configuration's `control_fraction`, `control_window_ms` and
    /// `server_metrics_url` (values, not the configuration: `config` must not depend on this
    /// module's dependents).
    pub fn new(
        fraction: f64,
        window_ms: u64,
        server_metrics_url: Option<&str>,
    ) -> anyhow::Result<Switchback> {
        let metrics_url = match server_metrics_url {
            Some(u) => Some(
                UrlTemplate::parse(u).map_err(|e| anyhow::anyhow!("--server-metrics-url: {e}"))?,
            ),
            None => None,
        };
        Ok(Switchback::with_schedule(
            Schedule::new(
                fraction,
                Duration::from_millis(window_ms),
                Schedule::random_seed(),
            ),
            metrics_url,
        ))
    }

    /// With a given schedule (tests).
    pub fn with_schedule(schedule: Schedule, metrics_url: Option<UrlTemplate>) -> Switchback {
        let now = schedule.is_control(schedule.index_at(unix_ms()));
        Switchback {
            schedule,
            control_now: AtomicBool::new(now),
            rewritten: AtomicU64::new(0),
            control: AtomicU64::new(0),
            metrics_url,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether a ready shape's QUERY goes as it came now (a control window).
    #[inline]
    pub fn control_now(&self) -> bool {
        self.control_now.load(Ordering::Relaxed)
    }

    /// Counts a rewritable QUERY sent as EXECUTE.
    #[inline]
    pub fn count_rewritten(&self) {
        self.rewritten.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a rewritable QUERY sent as it came in a control window.
    #[inline]
    pub fn count_control(&self) {
        self.control.fetch_add(1, Ordering::Relaxed);
    }

    /// The windows.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current figures.
    pub fn report(&self) -> Report {
        let st = self.lock();
        let (trials_used, trials_dropped) = st.estimator.outcomes();
        Report {
            fraction: self.schedule.fraction(),
            window: self.schedule.window(),
            estimating: self.metrics_url.is_some(),
            estimate: st.estimator.estimate(),
            rewritten: self.rewritten.load(Ordering::Relaxed),
            control: self.control.load(Ordering::Relaxed),
            trials_used,
            trials_dropped,
            errors: st.errors.clone(),
            endpoints: st.endpoints,
            failing: st.failing,
            readings: st.readings,
            own_cpu: own_cpu::seconds(),
        }
    }

    /// The trials kept, oldest first, for `/saving`.
    pub fn trials(&self) -> Vec<estimate::Trial> {
        self.lock().estimator.trials().copied().collect()
    }

    fn counters(&self) -> (u64, u64) {
        (
            self.rewritten.load(Ordering::Relaxed),
            self.control.load(Ordering::Relaxed),
        )
    }

    fn dropped(&self, why: Dropped) {
        self.lock().estimator.drop_episode(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_rewritten_is_nothing_saved_within_nothing() {
        let sw = Switchback::with_schedule(
            Schedule::new(0.05, Duration::from_secs(1), 1),
            Some(UrlTemplate::parse("http://{host}:7070").unwrap()),
        );
        let r = sw.report();
        assert!(r.estimating);
        assert_eq!(r.saved(), Some((0.0, 0.0, 0.0)));
        sw.count_rewritten();
        // Rewritten but not yet measured: no figure rather than a guess.
        assert_eq!(sw.report().saved(), None);
    }

    #[test]
    fn a_fraction_of_one_is_always_control() {
        let sw = Switchback::with_schedule(Schedule::new(1.0, Duration::from_secs(1), 1), None);
        assert!(sw.control_now());
        let sw = Switchback::with_schedule(Schedule::new(0.0, Duration::from_secs(1), 1), None);
        assert!(!sw.control_now());
        assert!(!sw.report().estimating);
    }
}
