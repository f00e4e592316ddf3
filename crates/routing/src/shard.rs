//! ScyllaDB shards: which CPU shard of a node owns a token, and which local port makes a
//! connection to the shard-aware port land on a given shard.
//!
//! A ScyllaDB node announces `SCYLLA_NR_SHARDS`, `SCYLLA_SHARDING_IGNORE_MSB`,
//! `SCYLLA_SHARDING_ALGORITHM=biased-token-round-robin` and `SCYLLA_SHARD_AWARE_PORT` in its
//! SUPPORTED message (scylladb `docs/dev/protocol-extensions.md`, "Intranode sharding").
//!
//! - Shard of a token (scylladb `dht/token-sharding.cc`, `zero_based_shard_of`): bias the token
//!   to unsigned (`token + 2^63`), drop the `ignore_msb` most significant bits by shifting left,
//!   and take the high 64 bits of the 128-bit product with the shard count.
//! - Shard of a connection to the shard-aware port: the client's source port modulo the shard
//!   count. A client picks a free local port `p` with `p % nr_shards == shard` (the drivers draw
//!   from the ephemeral range 49152..=65535 and try the next candidate when a bind fails).

use crate::token::Token;
use std::ops::Range;

/// The shard (0-based, `< nr_shards`) owning `token` on a node with `nr_shards` shards that
/// ignores the `ignore_msb` most significant token bits. 0 when `nr_shards` is 0; an
/// `ignore_msb` of 64 or more ignores every bit (shard 0).
pub fn shard_of(token: Token, nr_shards: u16, ignore_msb: u8) -> u16 {
    // token + 2^63 as u64 is the same as flipping the sign bit of the two's complement form.
    let biased = (token.0 as u64) ^ (1 << 63);
    let shifted = biased.checked_shl(u32::from(ignore_msb)).unwrap_or(0);
    let shard = (u128::from(shifted) * u128::from(nr_shards)) >> 64;
    // shifted < 2^64, so shard < nr_shards <= u16::MAX.
    u16::try_from(shard).unwrap_or(0)
}

/// The shard a connection from local port `port` lands on at the shard-aware port; `None` when
/// `nr_shards` is 0.
pub fn shard_of_port(port: u16, nr_shards: u16) -> Option<u16> {
    port.checked_rem(nr_shards)
}

/// The first source port for `shard`: the smallest `p` in `range` with `p >= start` and
/// `p % nr_shards == shard`, or, when there is none at or after `start`, the smallest in
/// `range`. `None` when the range holds no port of that shard (or `shard >= nr_shards`).
pub fn source_port(shard: u16, nr_shards: u16, start: u16, range: Range<u16>) -> Option<u16> {
    source_ports(shard, nr_shards, start, range).next()
}

/// Every source port in `range` that lands on `shard`, each once: ascending from `start`, then
/// wrapping to the start of the range. Try them in turn until a bind succeeds.
pub fn source_ports(
    shard: u16,
    nr_shards: u16,
    start: u16,
    range: Range<u16>,
) -> impl Iterator<Item = u16> {
    let (lo, hi) = (u32::from(range.start), u32::from(range.end));
    let n = u32::from(nr_shards);
    let s = u32::from(shard);
    let valid = s < n && lo < hi;
    // `clamp` panics on a reversed range (`lo > hi`), which holds no port anyway.
    let start = u32::from(start).clamp(lo, hi.max(lo));
    // The smallest port >= from that is congruent to the shard.
    let aligned = move |from: u32| from + (s + n - from % n.max(1)) % n.max(1);
    let (first, second) = if valid {
        (aligned(start)..hi, aligned(lo)..start)
    } else {
        (0..0, 0..0)
    };
    let step = usize::try_from(n.max(1)).unwrap_or(1);
    first
        .step_by(step)
        .chain(second.step_by(step))
        .filter_map(|p| u16::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::murmur3::token;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// scylladb/scylla-rust-driver, scylla/src/routing/sharding.rs, `test_shard_of` ("Test values
    /// taken from the gocql driver"): 4 shards, ignore_msb 12.
    #[test]
    fn rust_driver_vectors() {
        assert_eq!(shard_of(Token(-9219783007514621794), 4, 12), 3);
        assert_eq!(shard_of(Token(9222582454147032830), 4, 12), 3);
    }

    /// scylladb/python-driver, tests/unit/test_shard_aware.py,
    /// `test_parsing_and_calculating_shard_id`: 12 shards, ignore_msb 12, tokens of the keys.
    #[test]
    fn python_driver_vectors() {
        for (key, want) in [
            (&b"a"[..], 4),
            (b"b", 6),
            (b"c", 6),
            (b"e", 4),
            (b"100000", 2),
        ] {
            assert_eq!(shard_of(token(key), 12, 12), want, "key {key:?}");
        }
    }

    #[test]
    fn edge_cases() {
        assert_eq!(shard_of(Token::MIN, 8, 0), 0);
        assert_eq!(shard_of(Token::MAX, 8, 0), 7);
        assert_eq!(shard_of(Token(0), 8, 0), 4);
        assert_eq!(shard_of(Token(123), 0, 12), 0);
        assert_eq!(shard_of(Token(123), 1, 12), 0);
        assert_eq!(shard_of(Token(-1), 7, 64), 0);
        assert_eq!(shard_of(Token(-1), 7, 255), 0);
        assert_eq!(shard_of_port(49157, 4), Some(1));
        assert_eq!(shard_of_port(49157, 0), None);
    }

    #[test]
    fn source_port_choice() {
        let eph = 49152..65535;
        assert_eq!(source_port(0, 4, 49152, eph.clone()), Some(49152));
        assert_eq!(source_port(1, 4, 49152, eph.clone()), Some(49153));
        assert_eq!(source_port(3, 4, 50001, eph.clone()), Some(50003));
        assert_eq!(source_port(1, 4, 50001, eph.clone()), Some(50001));
        // Past the last candidate: wrap to the first of the range.
        assert_eq!(source_port(0, 4, 65533, eph.clone()), Some(49152));
        // A start outside the range is clamped.
        assert_eq!(source_port(2, 4, 1000, eph.clone()), Some(49154));
        assert_eq!(source_port(2, 4, 65535, 100..200), Some(102));
        // The top port is excluded (the range is half-open) and u16::MAX is reachable.
        assert_eq!(source_port(3, 4, 65535, 65532..65535), None);
        assert_eq!(source_port(3, 4, 65530, 65532..u16::MAX), None);
        assert_eq!(source_port(2, 4, 0, 65534..u16::MAX), Some(65534));
        // Nothing to find.
        assert_eq!(source_port(4, 4, 50000, eph.clone()), None);
        assert_eq!(source_port(0, 0, 50000, eph.clone()), None);
        assert_eq!(source_port(0, 4, 50000, 60000..60000), None);
        assert_eq!(source_port(3, 8, 0, 10..11), None);
    }

    /// The property scylladb/scylla-rust-driver's `test_iter_source_ports_for_shard` checks with
    /// 4 shards over the ephemeral range and over 21371..=42424: every port of the shard is
    /// produced exactly once and maps back to the shard. (Ranges here are half-open.)
    #[test]
    fn every_port_of_the_shard_once() {
        for range in [49152u16..65535, 21371..42425] {
            for nr in [1u16, 3, 4, 12] {
                for shard in 0..nr {
                    let start = range.start + (range.end - range.start) / 3;
                    let got: Vec<u16> = source_ports(shard, nr, start, range.clone()).collect();
                    let set: BTreeSet<u16> = got.iter().copied().collect();
                    assert_eq!(set.len(), got.len());
                    let want: BTreeSet<u16> = range.clone().filter(|p| p % nr == shard).collect();
                    assert_eq!(set, want);
                    assert!(got.iter().all(|p| shard_of_port(*p, nr) == Some(shard)));
                    assert!(got[0] >= start);
                }
            }
        }
    }

    /// Found by the `routing` fuzz target: a reversed range made `clamp` panic.
    #[test]
    #[allow(clippy::reversed_empty_ranges)] // the reversed range is the input under test
    fn a_reversed_range_has_no_port() {
        assert_eq!(source_port(0, 4, 5, 12..0), None);
        assert_eq!(source_ports(1, 4, 70, 12..0).count(), 0);
        assert_eq!(source_ports(1, 4, 3, 12..12).count(), 0);
    }

    proptest! {
        #[test]
        fn shard_is_in_range(t in any::<i64>(), nr in 1..=u16::MAX, msb in 0..70u8) {
            prop_assert!(shard_of(Token(t), nr, msb) < nr);
        }

        #[test]
        fn first_port_is_the_smallest_candidate(
            nr in 1..64u16, shard in 0..64u16, start in any::<u16>(), lo in any::<u16>(), len in 0..3000u16
        ) {
            let hi = lo.saturating_add(len);
            let got = source_port(shard, nr, start, lo..hi);
            let after = (start.max(lo)..hi).find(|p| p % nr == shard);
            let want = if shard >= nr { None } else { after.or_else(|| (lo..hi).find(|p| p % nr == shard)) };
            prop_assert_eq!(got, want);
        }
    }
}
