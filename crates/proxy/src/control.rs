//! The control group: a small share of each shape's rewritable executions is sent as the
//! application's original QUERY, so that the server's response time with and without the
//! rewrite can be compared shape by shape, on the user's own cluster and traffic.
//!
//! The choice is deterministic per shape: every `period`th execution of a shape (counted by
//! `/shapes`) whose statement the cache has ready, `period` being `1 / control_fraction`
//! rounded. A control execution is the client's own request, forwarded as it came (as any
//! pass-through is): the client sees exactly what it would directly.
//!
//! The estimate of server time saved, per shape, is the difference of the mean response times
//! (control − rewritten, as the proxy sees them: from sending the request to its answer) times
//! the rewritten executions; its 95 % confidence interval is Welch's (normal approximation).
//! It is an estimate of time on the request path, which the server's parse of an unprepared
//! statement is part of, not a measurement of server CPU.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The pass-through reason of a control execution.
pub const REASON: &str = "control";

/// Fewer samples than this in either group give no estimate for a shape.
pub const MIN_SAMPLES: u64 = 5;

/// Every how many executions of a shape one is a control one; `None`: no control group.
pub fn period(fraction: f64) -> Option<u64> {
    if fraction.is_nan() || fraction <= 0.0 {
        return None;
    }
    Some((1.0 / fraction.min(1.0)).round().max(1.0) as u64)
}

/// Whether the `execution`th execution (from 1) of a shape is a control one.
pub fn chosen(execution: u64, period: Option<u64>) -> bool {
    period.is_some_and(|p| execution > 0 && execution.is_multiple_of(p))
}

/// Which group a request's response time belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Group {
    /// Neither (the first sightings, pass-throughs for other reasons, other requests).
    #[default]
    Other,
    /// A QUERY sent as an EXECUTE of its shape.
    Rewritten,
    /// A QUERY of a ready shape sent as it was, for comparison.
    Control,
}

/// Count, sum and sum of squares of durations (in microseconds), without a lock.
#[derive(Debug, Default)]
pub struct Moments {
    n: AtomicU64,
    sum_us: AtomicU64,
    sum_sq_us: AtomicU64,
}

/// A point-in-time copy of [`Moments`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    pub samples: u64,
    /// Mean, in seconds.
    pub mean: f64,
    /// Sample variance, in seconds squared.
    pub variance: f64,
}

impl Moments {
    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.n.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.sum_sq_us
            .fetch_add(us.saturating_mul(us), Ordering::Relaxed);
    }

    /// The count, mean and variance so far.
    pub fn summary(&self) -> Summary {
        let n = self.n.load(Ordering::Relaxed);
        if n == 0 {
            return Summary::default();
        }
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let sum_sq = self.sum_sq_us.load(Ordering::Relaxed) as f64 / 1e12;
        let mean = sum / n as f64;
        let variance = if n > 1 {
            ((sum_sq - sum * mean) / (n - 1) as f64).max(0.0)
        } else {
            0.0
        };
        Summary {
            samples: n,
            mean,
            variance,
        }
    }
}

/// The difference of means (control − rewritten, seconds) and the half-width of its 95 %
/// confidence interval, when both groups have [`MIN_SAMPLES`].
pub fn difference(control: Summary, rewritten: Summary) -> Option<(f64, f64)> {
    if control.samples < MIN_SAMPLES || rewritten.samples < MIN_SAMPLES {
        return None;
    }
    let se = (control.variance / control.samples as f64
        + rewritten.variance / rewritten.samples as f64)
        .sqrt();
    Some((control.mean - rewritten.mean, 1.96 * se))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_is_deterministic_and_keeps_the_fraction() {
        assert_eq!(period(0.0), None);
        assert_eq!(period(-1.0), None);
        assert_eq!(period(f64::NAN), None);
        assert_eq!(period(0.01), Some(100));
        assert_eq!(period(0.3), Some(3));
        assert_eq!(period(1.0), Some(1));
        assert_eq!(period(7.0), Some(1));
        let p = period(0.01);
        let picks: Vec<u64> = (1..=1000).filter(|&n| chosen(n, p)).collect();
        assert_eq!(picks, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
        // Executions count from 1: 0 (no count) is never chosen, 1 is at a fraction of 1.
        assert!(!chosen(0, Some(1)));
        assert!(chosen(1, Some(1)));
        assert!(!chosen(100, None));
    }

    #[test]
    fn moments_give_means_variances_and_an_interval() {
        let m = Moments::default();
        for ms in [10, 12, 14] {
            m.observe(Duration::from_millis(ms));
        }
        let s = m.summary();
        assert_eq!(s.samples, 3);
        assert!((s.mean - 0.012).abs() < 1e-9);
        assert!((s.variance - 4e-6).abs() < 1e-9);
        let c = Summary {
            samples: 10,
            mean: 0.003,
            variance: 1e-6,
        };
        let r = Summary {
            samples: 1000,
            mean: 0.002,
            variance: 1e-6,
        };
        let (d, ci) = difference(c, r).unwrap();
        assert!((d - 0.001).abs() < 1e-12);
        assert!((ci - 1.96 * (1e-7f64 + 1e-9).sqrt()).abs() < 1e-12);
        assert_eq!(difference(Summary { samples: 4, ..c }, r), None);
    }
}
