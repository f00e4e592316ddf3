//! Response-time percentiles: a lock-free log-linear histogram of durations in nanoseconds.
//!
//! # Buckets and error
//! Values below 16 ns have a bucket each. From 16 ns on, every power of two `[2^k, 2^(k+1))`
//! is cut into 16 equal buckets of width `2^(k-4)`. A percentile is reported as the middle of
//! the bucket that holds it (never above the largest value recorded), so for a true
//! (nearest-rank) percentile `v` in `[16 ns, 2^38 ns)` the reported `p` satisfies
//! `|p - v| <= v / 32`: the half-width `2^(k-5)` over the smallest value of the power of two,
//! `2^k`. That is [`RELATIVE_ERROR`], 3.125 %. Below 16 ns a percentile is exact (to the half
//! nanosecond of the middle). Values of `2^38` ns (about 4.6 minutes) and more share the last
//! bucket: their percentiles are only known to be at least that (the maximum stays exact).
//!
//! # Cost
//! Recording is three relaxed atomic adds and one `fetch_max`; the bucket index is a
//! leading-zero count and two shifts. The histogram holds [`BUCKETS`] counters of 8 bytes
//! (4,480 bytes), allocated for a shape on its first answer (see [`crate::shapes`]), so at
//! most [`crate::shapes::MAX_SHAPES`] of them exist.
//!
//! Design justification: the `hdrhistogram` crate records through `&mut self`, so each shape
//! would need a lock (or a per-thread copy merged at read time) on the data path, where every
//! other per-shape statistic is a relaxed atomic; the log-linear layout here is HDR's with one
//! significant binary digit group of 4 bits, written over atomics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two (2^4).
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Powers of two covered above the exact buckets: `[16 ns, 2^38 ns)`.
const TOP_BIT: u32 = 38;
/// Buckets in one histogram.
pub const BUCKETS: usize = SUB + (TOP_BIT - SUB_BITS) as usize * SUB;
/// The largest relative error of a reported percentile (see the module doc): 1/32.
pub const RELATIVE_ERROR: f64 = 1.0 / 32.0;

/// The bucket of `ns`.
pub fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let k = 63 - ns.leading_zeros();
    if k >= TOP_BIT {
        return BUCKETS - 1;
    }
    let sub = ((ns >> (k - SUB_BITS)) as usize) & (SUB - 1);
    SUB + (k - SUB_BITS) as usize * SUB + sub
}

/// The lower bound and width of bucket `i`, in nanoseconds.
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, 1);
    }
    let group = ((i - SUB) / SUB) as u32;
    let sub = ((i - SUB) % SUB) as u64;
    let k = group + SUB_BITS;
    let width = 1u64 << (k - SUB_BITS);
    ((1u64 << k) + sub * width, width)
}

/// A histogram of durations, recorded without a lock.
#[derive(Debug)]
pub struct Histogram {
    counts: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
    max_nanos: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

/// What `/shapes` shows of a histogram: percentiles and the maximum, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    /// Exact.
    pub max: f64,
    /// The bound of each percentile's error relative to the true value ([`RELATIVE_ERROR`]).
    pub relative_error: f64,
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
            max_nanos: AtomicU64::new(0),
        }
    }

    /// Records one duration of `ns` nanoseconds.
    pub fn record(&self, ns: u64) {
        if let Some(c) = self.counts.get(bucket_of(ns)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_nanos.fetch_add(ns, Ordering::Relaxed);
        self.max_nanos.fetch_max(ns, Ordering::Relaxed);
    }

    /// A copy of the counts, for reading percentiles from one consistent-enough view.
    pub fn snapshot(&self) -> Snapshot {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        Snapshot {
            total: counts.iter().sum(),
            counts,
            sum_nanos: self.sum_nanos.load(Ordering::Relaxed),
            max_nanos: self.max_nanos.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Per bucket (see [`bucket_bounds`]); empty for an empty snapshot made by `Default`.
    pub counts: Vec<u64>,
    pub total: u64,
    pub sum_nanos: u64,
    pub max_nanos: u64,
}

impl Snapshot {
    /// Adds `other`'s counts to these (for the `other` series of `/metrics`).
    pub fn merge(&mut self, other: &Snapshot) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.sum_nanos = self.sum_nanos.saturating_add(other.sum_nanos);
        self.max_nanos = self.max_nanos.max(other.max_nanos);
    }

    /// The `q` quantile (0 < q <= 1) in nanoseconds, by nearest rank: the middle of the bucket
    /// holding the `ceil(q * total)`-th smallest value, at most the maximum. `None` when empty.
    pub fn quantile_nanos(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bucket_bounds(i);
                let mid = if width == 1 {
                    lo as f64
                } else {
                    lo as f64 + width as f64 / 2.0
                };
                return Some(mid.min(self.max_nanos as f64));
            }
        }
        Some(self.max_nanos as f64)
    }

    /// p50, p90, p99, p99.9 and the maximum in seconds; `None` when empty.
    pub fn percentiles(&self) -> Option<Percentiles> {
        let s = |q| self.quantile_nanos(q).map(|ns| ns / 1e9);
        Some(Percentiles {
            p50: s(0.5)?,
            p90: s(0.9)?,
            p99: s(0.99)?,
            p99_9: s(0.999)?,
            max: self.max_nanos as f64 / 1e9,
            relative_error: RELATIVE_ERROR,
        })
    }

    /// How many values lie at or below `bound` nanoseconds, each bucket counted whole on the
    /// side of `bound` its middle lies (for Prometheus `le` buckets, within the error above).
    pub fn count_at_most(&self, bound: u64) -> u64 {
        self.counts
            .iter()
            .enumerate()
            .take_while(|(i, _)| {
                let (lo, width) = bucket_bounds(*i);
                lo.saturating_add(width / 2) <= bound
            })
            .map(|(_, c)| c)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_range() {
        let mut next = 0;
        for i in 0..BUCKETS {
            let (lo, width) = bucket_bounds(i);
            assert_eq!(
                lo,
                next,
                "bucket {i} starts where {} ended",
                i.wrapping_sub(1)
            );
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(lo + width - 1), i);
            if lo >= 16 {
                // 16 buckets per power of two.
                assert_eq!(width * 16, 1u64 << (63 - lo.leading_zeros()));
            }
            next = lo + width;
        }
        assert_eq!(next, 1u64 << TOP_BIT);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(BUCKETS, 560);
    }

    #[test]
    fn empty_has_no_percentiles() {
        assert_eq!(Histogram::new().snapshot().percentiles(), None);
    }

    #[test]
    fn small_values_are_exact() {
        let h = Histogram::new();
        for v in [3, 3, 7, 15] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.quantile_nanos(0.5), Some(3.0));
        assert_eq!(s.quantile_nanos(1.0), Some(15.0));
        assert_eq!(s.sum_nanos, 28);
    }

    #[test]
    fn merge_and_le_counts() {
        let (a, b) = (Histogram::new(), Histogram::new());
        a.record(40_000);
        b.record(60_000);
        b.record(3_000_000);
        let mut s = a.snapshot();
        s.merge(&b.snapshot());
        assert_eq!(s.total, 3);
        assert_eq!(s.count_at_most(50_000), 1);
        assert_eq!(s.count_at_most(100_000), 2);
        assert_eq!(s.count_at_most(10_000_000), 3);
        assert_eq!(s.max_nanos, 3_000_000);
    }

    /// The exact nearest-rank percentile of `sorted`.
    fn exact(sorted: &[u64], q: f64) -> f64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64
    }

    proptest! {
        /// Random latencies, recorded both in the histogram and in an exact list: every
        /// percentile within the stated relative error of the exact one, the maximum exact.
        #[test]
        fn percentiles_within_the_stated_error(
            values in prop::collection::vec(
                prop_oneof![
                    0u64..16,
                    16u64..10_000,
                    10_000u64..50_000_000,
                    50_000_000u64..(1u64 << TOP_BIT),
                ],
                1..2000,
            )
        ) {
            let h = Histogram::new();
            for v in &values {
                h.record(*v);
            }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let s = h.snapshot();
            for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                let want = exact(&sorted, q);
                let got = s.quantile_nanos(q).unwrap();
                prop_assert!(
                    (got - want).abs() <= want * RELATIVE_ERROR,
                    "q {} got {} want {}", q, got, want
                );
            }
            prop_assert_eq!(s.max_nanos, *sorted.last().unwrap());
            prop_assert_eq!(s.total, values.len() as u64);
        }
    }
}
