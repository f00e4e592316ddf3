//! The statistics of the switchback comparison, free of I/O: windows measured around each
//! control episode become a *trial* (the server's CPU per rewritable QUERY in the episode
//! against its baseline windows), and the trials an estimate with a 95 % interval.
//!
//! The unit of the interval is the trial, not the request: requests of one window share its
//! CPU reading, so their errors are one error (clustered). The CPU per request of each arm
//! is a ratio of sums over the trial's windows; the estimate is the mean of the trials'
//! differences and its interval Student's t over the trials. Each trial compares windows a few
//! seconds apart, so slow changes of the node's other load (other clients, compaction cycles,
//! a daily pattern) cancel out of it.

use std::collections::VecDeque;

/// What one window measured: the CPU the nodes spent, autoprep's own, and the rewritable
/// QUERYs sent (as EXECUTEs, and as they came in control windows).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowSample {
    /// CPU seconds of every node read.
    pub server_cpu: f64,
    /// autoprep's own CPU seconds.
    pub own_cpu: f64,
    pub rewritten: u64,
    pub control: u64,
}

impl WindowSample {
    /// The rewritable QUERYs the window sent.
    pub fn requests(&self) -> u64 {
        self.rewritten + self.control
    }

    fn add(self, o: WindowSample) -> WindowSample {
        WindowSample {
            server_cpu: self.server_cpu + o.server_cpu,
            own_cpu: self.own_cpu + o.own_cpu,
            rewritten: self.rewritten + o.rewritten,
            control: self.control + o.control,
        }
    }

    fn sum(windows: &[WindowSample]) -> WindowSample {
        windows
            .iter()
            .fold(WindowSample::default(), |a, w| a.add(*w))
    }
}

/// One control episode against its baselines, per rewritable QUERY.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    /// When the episode started, Unix milliseconds.
    pub at_unix_ms: u64,
    /// Server CPU seconds per request in the control windows, and in the baselines.
    pub server_control: f64,
    pub server_rewritten: f64,
    /// autoprep's own CPU seconds per request, likewise.
    pub own_control: f64,
    pub own_rewritten: f64,
    /// Requests in the control windows and in the baselines.
    pub control_requests: u64,
    pub baseline_requests: u64,
}

impl Trial {
    /// Server CPU saved per rewritten request in this trial.
    pub fn saved(&self) -> f64 {
        self.server_control - self.server_rewritten
    }

    /// Compares `control` windows, with the `washout` window after them, with `baseline`
    /// windows; `None` when any has fewer than `min_requests` requests in some window (the
    /// ratio would be noise) or there is no baseline.
    ///
    /// The episode's effect is the CPU of its control and washout windows above what the
    /// baseline's CPU per request gives for their requests, over the control requests: work
    /// the control requests leave to the washout (their garbage) is theirs.
    pub fn of(
        at_unix_ms: u64,
        control: &[WindowSample],
        washout: &[WindowSample],
        baseline: &[WindowSample],
        min_requests: u64,
    ) -> Result<Trial, Dropped> {
        if baseline.is_empty() || control.is_empty() {
            return Err(Dropped::NoBaseline);
        }
        if control
            .iter()
            .chain(washout)
            .chain(baseline)
            .any(|w| w.requests() < min_requests)
        {
            return Err(Dropped::LittleTraffic);
        }
        let (c, w, b) = (
            WindowSample::sum(control),
            WindowSample::sum(washout),
            WindowSample::sum(baseline),
        );
        let (nc, nw, nb) = (
            c.requests() as f64,
            w.requests() as f64,
            b.requests() as f64,
        );
        let (server_base, own_base) = (b.server_cpu / nb, b.own_cpu / nb);
        Ok(Trial {
            at_unix_ms,
            server_control: (c.server_cpu + w.server_cpu - server_base * nw) / nc,
            server_rewritten: server_base,
            own_control: (c.own_cpu + w.own_cpu - own_base * nw) / nc,
            own_rewritten: own_base,
            control_requests: c.requests(),
            baseline_requests: b.requests(),
        })
    }
}

/// Why an episode gave no trial (`autoprep_server_cpu_trials_total{outcome}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// A window had too few rewritable requests.
    LittleTraffic,
    /// A reading of some window was missing (a node's endpoint failed, or answered late).
    MissingReading,
    /// No baseline window could be read (another episode was too close).
    NoBaseline,
}

impl Dropped {
    /// Every reason, in label order.
    pub const ALL: [Dropped; 3] = [
        Dropped::LittleTraffic,
        Dropped::MissingReading,
        Dropped::NoBaseline,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Dropped::LittleTraffic => "too little traffic",
            Dropped::MissingReading => "reading missing",
            Dropped::NoBaseline => "no baseline",
        }
    }
}

/// The estimate from the trials so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub trials: usize,
    /// Server CPU seconds saved per rewritten request, and the half-width of its 95 % interval.
    pub saved: f64,
    pub half_width: f64,
    /// Mean server CPU seconds per request in control windows and in baselines.
    pub server_control: f64,
    pub server_rewritten: f64,
    /// Mean autoprep CPU seconds per request in control windows and in baselines.
    pub own_control: f64,
    pub own_rewritten: f64,
    /// How much longer the traffic must run, at the trials' pace so far, until the interval
    /// is within ±10 % of the estimate (0 once it is; `None` while the estimate is 0).
    pub seconds_to_tenth: Option<f64>,
}

/// The trials kept: the most recent [`Estimator::CAPACITY`].
#[derive(Debug, Default)]
pub struct Estimator {
    trials: VecDeque<Trial>,
    dropped: [u64; 3],
    used: u64,
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        31..=60 => 2.042 - (df - 30) as f64 * (2.042 - 2.000) / 30.0,
        61..=120 => 2.000 - (df - 60) as f64 * (2.000 - 1.980) / 60.0,
        _ => 1.960,
    }
}

impl Estimator {
    /// Trials kept (about a day at the default window and fraction).
    pub const CAPACITY: usize = 4096;
    /// Fewer trials than this give no estimate.
    pub const MIN_TRIALS: usize = 3;

    /// Adds a trial, forgetting the oldest beyond the capacity.
    pub fn push(&mut self, t: Trial) {
        if self.trials.len() == Self::CAPACITY {
            self.trials.pop_front();
        }
        self.trials.push_back(t);
        self.used += 1;
    }

    /// Counts an episode that gave no trial.
    pub fn drop_episode(&mut self, why: Dropped) {
        self.dropped[why as usize] += 1;
    }

    /// Episodes used, and dropped by reason (in [`Dropped::ALL`] order).
    pub fn outcomes(&self) -> (u64, [u64; 3]) {
        (self.used, self.dropped)
    }

    /// The trials kept, oldest first.
    pub fn trials(&self) -> impl Iterator<Item = &Trial> {
        self.trials.iter()
    }

    /// The estimate, once there are [`Estimator::MIN_TRIALS`] trials.
    pub fn estimate(&self) -> Option<Estimate> {
        let n = self.trials.len();
        if n < Self::MIN_TRIALS {
            return None;
        }
        let nf = n as f64;
        let mean = |f: fn(&Trial) -> f64| self.trials.iter().map(f).sum::<f64>() / nf;
        let saved = mean(Trial::saved);
        let var = self
            .trials
            .iter()
            .map(|t| (t.saved() - saved).powi(2))
            .sum::<f64>()
            / (nf - 1.0);
        let half_width = t975(n - 1) * (var / nf).sqrt();
        let seconds_to_tenth = (saved != 0.0).then(|| {
            let target = 0.1 * saved.abs();
            if half_width <= target {
                return 0.0;
            }
            let first = self.trials.front().map_or(0, |t| t.at_unix_ms);
            let last = self.trials.back().map_or(0, |t| t.at_unix_ms);
            let per_trial = (last.saturating_sub(first)) as f64 / 1000.0 / (nf - 1.0);
            let needed = nf * (half_width / target).powi(2);
            (needed - nf) * per_trial
        });
        Some(Estimate {
            trials: n,
            saved,
            half_width,
            server_control: mean(|t| t.server_control),
            server_rewritten: mean(|t| t.server_rewritten),
            own_control: mean(|t| t.own_control),
            own_rewritten: mean(|t| t.own_rewritten),
            seconds_to_tenth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(server_cpu: f64, rewritten: u64, control: u64) -> WindowSample {
        WindowSample {
            server_cpu,
            own_cpu: 0.01 * (rewritten + control) as f64 / 1000.0,
            rewritten,
            control,
        }
    }

    #[test]
    fn a_trial_is_cpu_per_request_of_each_arm() {
        // 1000 requests a window: 0.17 s of CPU in the control window, 0.14 s around it.
        let t = Trial::of(
            5,
            &[w(0.17, 0, 1000)],
            &[],
            &[w(0.14, 1000, 0), w(0.15, 1000, 0)],
            50,
        )
        .unwrap();
        assert!((t.server_control - 170e-6).abs() < 1e-12);
        assert!((t.server_rewritten - 145e-6).abs() < 1e-12);
        assert!((t.saved() - 25e-6).abs() < 1e-12);
        assert_eq!((t.control_requests, t.baseline_requests), (1000, 2000));
        // A washout 0.02 s above the baseline's 145 us per request: 20 us more per control
        // request.
        let t = Trial::of(
            5,
            &[w(0.17, 0, 1000)],
            &[w(0.165, 1000, 0)],
            &[w(0.14, 1000, 0), w(0.15, 1000, 0)],
            50,
        )
        .unwrap();
        assert!((t.saved() - 45e-6).abs() < 1e-12, "{t:?}");
        assert_eq!(
            Trial::of(5, &[w(0.17, 0, 10)], &[], &[w(0.14, 1000, 0)], 50),
            Err(Dropped::LittleTraffic)
        );
        assert_eq!(
            Trial::of(5, &[w(0.17, 0, 1000)], &[], &[], 50),
            Err(Dropped::NoBaseline)
        );
    }

    #[test]
    fn the_interval_narrows_with_trials_and_covers_the_truth() {
        // A saving of 25 µs per request under noise of ±20 µs per trial (deterministic
        // pseudo-random): the estimate converges, and its interval holds the truth.
        let mut e = Estimator::default();
        assert_eq!(e.estimate(), None);
        let mut x = 12345u64;
        let mut widths = Vec::new();
        for i in 0..400u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 40e-6;
            e.push(Trial {
                at_unix_ms: i * 20_000,
                server_control: 170e-6 + noise,
                server_rewritten: 145e-6,
                own_control: 2e-6,
                own_rewritten: 5e-6,
                control_requests: 1000,
                baseline_requests: 2000,
            });
            if let Some(est) = e.estimate() {
                widths.push(est.half_width);
            }
        }
        let est = e.estimate().unwrap();
        assert_eq!(est.trials, 400);
        assert!((est.saved - 25e-6).abs() < est.half_width, "{est:?}");
        assert!(est.half_width < 2e-6, "{est:?}");
        assert!(widths.last() < widths.first());
        assert!((est.own_rewritten - 5e-6).abs() < 1e-12);
        // Within ±10 % already, or a finite wait.
        assert!(est
            .seconds_to_tenth
            .is_some_and(|s| s.is_finite() && s >= 0.0));
        assert_eq!(e.outcomes().0, 400);
    }

    #[test]
    fn the_time_to_a_tenth_follows_the_trials_pace() {
        let mut e = Estimator::default();
        for (i, d) in [10e-6, 30e-6, 20e-6, 25e-6, 15e-6].iter().enumerate() {
            e.push(Trial {
                at_unix_ms: i as u64 * 10_000,
                server_control: 100e-6 + d,
                server_rewritten: 100e-6,
                own_control: 0.0,
                own_rewritten: 0.0,
                control_requests: 100,
                baseline_requests: 200,
            });
        }
        let est = e.estimate().unwrap();
        assert!((est.saved - 20e-6).abs() < 1e-12);
        // sd 7.9 µs, n 5: half-width 2.776 * 7.9/sqrt(5) = 9.8 µs; ±2 µs needs 5 * (9.8/2)^2
        // = 120 trials, 115 more at 10 s each.
        let s = est.seconds_to_tenth.unwrap();
        assert!((s - 1150.0).abs() < 60.0, "{s}");
    }

    #[test]
    fn old_trials_are_forgotten_and_drops_counted() {
        let mut e = Estimator::default();
        let t = Trial::of(0, &[w(0.2, 0, 100)], &[], &[w(0.1, 100, 0)], 1).unwrap();
        for _ in 0..Estimator::CAPACITY + 10 {
            e.push(t);
        }
        assert_eq!(e.trials().count(), Estimator::CAPACITY);
        e.drop_episode(Dropped::MissingReading);
        e.drop_episode(Dropped::MissingReading);
        assert_eq!(e.outcomes(), (Estimator::CAPACITY as u64 + 10, [0, 2, 0]));
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(1000), 1.96);
    }
}
