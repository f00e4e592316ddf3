//! The response-time comparison of the control group: the QUERYs of ready shapes sent as they
//! came in control windows (see [`crate::saving`], which chooses the windows and measures the
//! server CPU saved) against those sent as EXECUTE, shape by shape. A control execution is the
//! client's own request, forwarded as it came (as any pass-through is): the client sees
//! exactly what it would directly.
//!
//! Per shape, the difference of the mean response times (control − rewritten, as the proxy
//! sees them: from sending the request to its answer), with Welch's 95 % interval (normal
//! approximation). It is latency, of which the server's parse of an unprepared statement is a
//! part, queueing another: never read it as server CPU (that is `saving`'s figure).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The pass-through reason of a control execution.
pub const REASON: &str = "control";

/// Fewer samples than this in either group give no estimate for a shape.
pub const MIN_SAMPLES: u64 = 5;

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
