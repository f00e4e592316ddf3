//! Switchback windows: wall-clock time cut into windows of `--control-window-ms`, of which a
//! share (`--control-fraction`) are *control* windows, in which every rewritable QUERY goes to
//! the server as the application sent it.
//!
//! Which windows are control ones is a function of the window's index (Unix time divided by
//! the window length) and a seed: the sampler knows in advance which windows it must measure,
//! and reads the nodes' metrics only around control windows. The seed is drawn per process,
//! so that each sidecar's switching is independent of every other's: a node's CPU then moves
//! with this sidecar's arm alone, and its own requests divide it (a fleet switched together
//! would show each sidecar the whole fleet's saving over its own requests).
//!
//! A control *episode* is a run of consecutive control windows `a..=b`. It is compared with
//! the *baseline* windows around it: `a − 1` (before) and `b + 2` (after). Window `b + 1` is
//! the *washout*: the server still works off the control requests there (answers in flight,
//! the parse's garbage collected by the next GC), so it is measured too and its CPU above the
//! baseline is counted to the episode.

use std::time::Duration;

/// What a window is for the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    /// Rewritable QUERYs go as they came.
    pub control: bool,
    /// A rewritten window next to an episode (before it or after its washout): compared with it.
    pub baseline: bool,
    /// The window right after an episode.
    pub washout: bool,
}

impl Role {
    /// Whether the window's CPU is measured.
    pub fn measured(self) -> bool {
        self.control || self.baseline || self.washout
    }
}

/// The windows and which of them are control ones.
#[derive(Debug, Clone)]
pub struct Schedule {
    window_ms: u64,
    /// Control when the window's hash is below this; `u64::MAX` with a fraction of 1.
    threshold: u64,
    always: bool,
    fraction: f64,
    seed: u64,
}

/// SplitMix64's finalizer: a window index and the seed to a uniform 64-bit draw.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Schedule {
    /// Windows of `window` (at least 1 ms), `fraction` of them (0 to 1) control ones.
    pub fn new(fraction: f64, window: Duration, seed: u64) -> Schedule {
        let fraction = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, 1.0)
        };
        Schedule {
            window_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1),
            threshold: (fraction * u64::MAX as f64) as u64,
            always: fraction >= 1.0,
            fraction,
            seed,
        }
    }

    /// A seed of this process's own (the standard library's per-process random hash keys).
    pub fn random_seed() -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5eed);
        h.finish()
    }

    /// The share of windows that are control ones.
    pub fn fraction(&self) -> f64 {
        self.fraction
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }

    /// The index of the window holding `unix_ms`.
    pub fn index_at(&self, unix_ms: u64) -> u64 {
        unix_ms / self.window_ms
    }

    /// When window `k` starts, in Unix milliseconds.
    pub fn start_ms(&self, k: u64) -> u64 {
        k.saturating_mul(self.window_ms)
    }

    /// Whether window `k` is a control one.
    pub fn is_control(&self, k: u64) -> bool {
        self.always || (self.threshold > 0 && mix(self.seed ^ mix(k)) < self.threshold)
    }

    /// What window `k` is for the estimate.
    pub fn role(&self, k: u64) -> Role {
        let c = |i: u64| self.is_control(i);
        if c(k) {
            return Role {
                control: true,
                baseline: false,
                washout: false,
            };
        }
        let prev = k.checked_sub(1).is_some_and(c);
        let prev2 = k.checked_sub(2).is_some_and(c);
        // Before an episode, or after its washout; never a washout itself.
        let baseline = !prev && (c(k + 1) || prev2);
        Role {
            control: false,
            baseline,
            washout: prev,
        }
    }

    /// Whether the nodes must be read when window `k` starts (it or the window before it is
    /// measured).
    pub fn read_at_start_of(&self, k: u64) -> bool {
        self.role(k).measured() || k.checked_sub(1).is_some_and(|p| self.role(p).measured())
    }

    /// The episode that window `done` (just finished) closes, as `(a, b)`: `done` is the
    /// second window after the last control window `b`.
    pub fn episode_closed_by(&self, done: u64) -> Option<(u64, u64)> {
        let b = done.checked_sub(2)?;
        if !self.is_control(b) || self.is_control(b + 1) {
            return None;
        }
        let mut a = b;
        while a > 0 && self.is_control(a - 1) && b - a < MAX_EPISODE {
            a -= 1;
        }
        Some((a, b))
    }
}

/// Longest episode looked back over (at a fraction near 1 episodes never end).
pub const MAX_EPISODE: u64 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fraction_of_windows_is_kept_and_the_choice_is_reproducible() {
        let s = Schedule::new(0.05, Duration::from_secs(1), 42);
        let n = 200_000u64;
        let control = (0..n).filter(|&k| s.is_control(k)).count() as f64 / n as f64;
        assert!((control - 0.05).abs() < 0.003, "{control}");
        let again = Schedule::new(0.05, Duration::from_secs(1), 42);
        assert!((0..1000).all(|k| s.is_control(k) == again.is_control(k)));
        let other = Schedule::new(0.05, Duration::from_secs(1), 43);
        assert!((0..10_000).any(|k| s.is_control(k) != other.is_control(k)));
        assert!(!(0..1000).any(|k| Schedule::new(0.0, Duration::from_secs(1), 1).is_control(k)));
        assert!((0..1000).all(|k| Schedule::new(1.0, Duration::from_secs(1), 1).is_control(k)));
    }

    #[test]
    fn windows_follow_the_clock() {
        let s = Schedule::new(0.1, Duration::from_millis(1500), 7);
        assert_eq!(s.index_at(0), 0);
        assert_eq!(s.index_at(1499), 0);
        assert_eq!(s.index_at(1500), 1);
        assert_eq!(s.start_ms(3), 4500);
        assert_eq!(s.window(), Duration::from_millis(1500));
    }

    /// Around every episode: the window before it and the second after it are baselines, the
    /// one right after it a washout; every measured window's edges are read.
    #[test]
    fn roles_around_episodes() {
        let s = Schedule::new(0.2, Duration::from_secs(1), 9);
        let mut episodes = 0;
        for done in 3..20_000u64 {
            let Some((a, b)) = s.episode_closed_by(done) else {
                continue;
            };
            episodes += 1;
            assert!((a..=b).all(|k| s.role(k).control));
            assert!(s.role(b + 1).washout && !s.role(b + 1).baseline);
            assert_eq!(s.role(b + 2).baseline, !s.is_control(b + 2));
            if a > 1 && !s.is_control(a - 2) {
                assert!(s.role(a - 1).baseline);
            }
            for k in (a.saturating_sub(1))..=(b + 2) {
                if s.role(k).measured() {
                    assert!(s.read_at_start_of(k) && s.read_at_start_of(k + 1));
                }
            }
        }
        assert!(episodes > 2000, "{episodes}");
        // A window that is neither measured nor next to one is never read.
        let quiet = (10..20_000u64).filter(|&k| !s.read_at_start_of(k)).count();
        assert!(quiet > 0);
    }
}
