//! Monotonic time stamps: nanoseconds since the process first read the clock. How long a
//! request took is then one subtraction of two integers, where two `Instant`s cost a
//! `timespec` subtraction and a 128-bit conversion for every request; a reader converts the
//! clock once per read.

use std::sync::OnceLock;
use std::time::Instant;

/// A point in time, in nanoseconds since the process's first reading of the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Stamp(u64);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Stamp {
    /// Now.
    pub fn now() -> Stamp {
        Stamp::of(Instant::now())
    }

    /// The stamp of `t` (an instant before the epoch is the epoch).
    pub fn of(t: Instant) -> Stamp {
        // u64 nanoseconds cover 584 years of uptime.
        Stamp(t.saturating_duration_since(epoch()).as_nanos() as u64)
    }

    /// Nanoseconds from `earlier` to this stamp (0 if `earlier` is later).
    pub fn nanos_since(self, earlier: Stamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn measures_what_instants_measure() {
        let a = Instant::now();
        let b = a + Duration::from_micros(1234);
        assert_eq!(Stamp::of(b).nanos_since(Stamp::of(a)), 1_234_000);
        assert_eq!(Stamp::of(a).nanos_since(Stamp::of(b)), 0);
        assert!(Stamp::now() >= Stamp::of(a));
    }
}
