//! Monotonic time stamps: nanoseconds since the process first read the clock. How long a
//! request took is then one subtraction of two integers, where two `Instant`s cost a
//! `timespec` subtraction and a 128-bit conversion for every request; a reader converts the
//! clock once per read.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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

    /// The stamp `nanos` after the epoch (tests).
    #[cfg(test)]
    pub fn from_nanos(nanos: u64) -> Stamp {
        Stamp(nanos)
    }
}

/// The wall clock as one reading of both clocks places it: stamps taken on the data path
/// become Unix times where they are reported (a span's start and end, by the exporter), so
/// that the data path reads no wall clock. Stamps before a reading are placed as far before
/// it as the monotonic clock says, whatever the wall clock did meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    unix_nanos: u64,
    at: Stamp,
}

impl WallClock {
    /// Both clocks, now.
    pub fn now() -> WallClock {
        let at = Stamp::now();
        let unix_nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        WallClock { unix_nanos, at }
    }

    /// The clock that read `unix_nanos` at stamp `at` (tests).
    #[cfg(test)]
    pub fn at(unix_nanos: u64, at: Stamp) -> WallClock {
        WallClock { unix_nanos, at }
    }

    /// Nanoseconds since the Unix epoch at stamp `s`.
    pub fn unix_nanos(&self, s: Stamp) -> u64 {
        if s >= self.at {
            self.unix_nanos.saturating_add(s.0 - self.at.0)
        } else {
            self.unix_nanos.saturating_sub(self.at.0 - s.0)
        }
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

    #[test]
    fn places_stamps_on_the_wall_clock_of_one_reading() {
        let clock = WallClock::at(1_000_000, Stamp::from_nanos(500));
        assert_eq!(clock.unix_nanos(Stamp::from_nanos(500)), 1_000_000);
        assert_eq!(clock.unix_nanos(Stamp::from_nanos(700)), 1_000_200);
        assert_eq!(clock.unix_nanos(Stamp::from_nanos(100)), 999_600);
        assert_eq!(
            WallClock::at(5, Stamp::from_nanos(500)).unix_nanos(Stamp::default()),
            0
        );
        let now = WallClock::now();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let placed = now.unix_nanos(Stamp::now());
        assert!(placed.abs_diff(wall) < 1_000_000_000, "{placed} {wall}");
    }
}
