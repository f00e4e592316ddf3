//! Murmur3Partitioner tokens: MurmurHash3 x64_128 exactly as Cassandra computes it.
//!
//! Sources (Apache Cassandra, `src/java/org/apache/cassandra/`):
//! - `utils/MurmurHash.java`, `hash3_x64_128(ByteBuffer key, int offset, int length, long seed,
//!   long[] result)`: Austin Appleby's MurmurHash3_x64_128 with one deviation, kept by every
//!   Cassandra version for on-disk compatibility: the tail bytes (the last `length % 16`) are
//!   read as `(long) key.get(i)`, i.e. as *signed* Java bytes, so a tail byte >= 0x80 is
//!   sign-extended before it is shifted and XORed in. The 16-byte blocks are read unsigned
//!   (`& 0xff`), as in the reference.
//! - `dht/Murmur3Partitioner.java`, `getToken(ByteBuffer)`: seed 0, the token is the first
//!   64-bit half (`hash[0]`); an empty key is `MINIMUM` (`Long.MIN_VALUE`), and `normalize` maps a
//!   hash of `Long.MIN_VALUE` to `Long.MAX_VALUE` so that no key shares the minimum token.
//!
//! ScyllaDB (`dht/murmur3_partitioner.cc`) reproduces the same quirk, so its tokens agree.

use crate::token::Token;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// MurmurHash3 x64_128 of `key` as `MurmurHash.hash3_x64_128` computes it (signed tail bytes),
/// returned as Cassandra's `long[2]`: `[h1, h2]`.
pub fn hash3_x64_128(key: &[u8], seed: i64) -> [i64; 2] {
    // All arithmetic is on u64 with wrapping operations: Java's long arithmetic wraps, and the
    // bit patterns are what matters.
    let mut h1 = seed as u64;
    let mut h2 = seed as u64;

    let mut blocks = key.chunks_exact(16);
    for block in &mut blocks {
        let (lo, hi) = block.split_at(8);
        h1 ^= mix_k1(le_u64(lo));
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(le_u64(hi));
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }

    // The tail, up to 15 bytes: bytes 0..8 go into k1, bytes 8..15 into k2, byte i shifted left
    // by 8 * (i % 8). XOR is order-independent, so a loop gives the same result as Java's
    // fall-through switch.
    let tail = blocks.remainder();
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    for (i, &b) in tail.iter().enumerate() {
        // Cassandra's quirk: `(long) key.get(i)` sign-extends the byte.
        let signed = i64::from(b as i8) as u64;
        if i < 8 {
            k1 ^= signed << (8 * i);
        } else {
            k2 ^= signed << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        h2 ^= mix_k2(k2);
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(k1);
    }

    // Java XORs in the `int` length widened to long; a key is far below 2^31 bytes, so the
    // widening never sign-extends.
    let len = key.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    [h1 as i64, h2 as i64]
}

/// The Murmur3Partitioner token of a partition key: the routing key bytes (see
/// [`crate::partition_key`]) exactly as the server serializes them.
pub fn token(partition_key: &[u8]) -> Token {
    if partition_key.is_empty() {
        return Token::MIN;
    }
    let [h1, _] = hash3_x64_128(partition_key, 0);
    // Murmur3Partitioner.normalize: the minimum is reserved.
    if h1 == i64::MIN {
        Token::MAX
    } else {
        Token(h1)
    }
}

/// Little-endian u64 of exactly eight bytes (callers pass halves of a 16-byte chunk).
#[inline]
fn le_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_le_bytes(w)
}

#[inline]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

#[inline]
fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tok(key: &[u8]) -> i64 {
        token(key).0
    }

    /// datastax/python-driver, tests/unit/test_metadata.py, `TokensTest.test_murmur3_tokens`
    /// (the same five vectors appear in the Ruby and Elixir drivers' specs).
    #[test]
    fn python_driver_vectors() {
        assert_eq!(tok(b"123"), -7468325962851647638);
        assert_eq!(
            tok(&b"\x00\xff\x10\xfa\x99".repeat(10)),
            5837342703291459765
        );
        assert_eq!(tok(&[0xfe; 8]), -8927430733708461935);
        assert_eq!(tok(&[0x10; 8]), 1446172840243228796);
        assert_eq!(tok(b"9223372036854775807"), 7162290910810015547);
    }

    /// datastax/csharp-driver, src/Cassandra.Tests/TokenTests.cs, `MurmurHashTest` ("inputs and
    /// result values from Cassandra"). Several tails carry bytes >= 0x80: they pin the
    /// sign-extension quirk.
    #[test]
    fn csharp_driver_vectors() {
        let seq = |from: u8| (from..from + 16).collect::<Vec<u8>>();
        let cases: Vec<(Vec<u8>, i64)> = vec![
            (seq(1), -5563837382979743776),
            (seq(2), -1513403162740402161),
            (seq(3), -495360443712684655),
            (seq(4), 1734091135765407943),
            (seq(5), -3199412112042527988),
            (seq(6), -6316563938475080831),
            (seq(7), 8228893370679682632),
            (vec![0; 16], 5457549051747178710),
            (vec![255; 16], -2824192546314762522),
            (vec![254; 16], -833317529301936754),
            (
                [&[0, 1, 2, 3][..], &[255; 12][..]].concat(),
                6463632673159404390,
            ),
            (vec![254; 17], -1672437813826982685),
            (vec![254; 4], 4566408979886474012),
            (vec![0; 4], -3485513579396041028),
            (vec![0, 1, 127, 127], 6573459401642635627),
            (vec![0, 255, 255, 255], 123573637386978882),
            (vec![255, 1, 2, 3], -2839127690952877842),
            (vec![226, 231], -8582699461035929883),
            (vec![226, 231, 226, 231, 226, 231, 1], 2222373981930033306),
        ];
        for (key, want) in cases {
            assert_eq!(tok(&key), want, "key {key:02x?}");
        }
    }

    #[test]
    fn empty_key_is_the_minimum() {
        assert_eq!(token(&[]), Token::MIN);
    }

    /// A literal transcription of the Java method (signed longs, the fall-through switch
    /// unrolled), to cross-check the loop-based tail above on every length.
    fn java_transcription(key: &[u8]) -> [i64; 2] {
        let c1 = C1 as i64;
        let c2 = C2 as i64;
        let get = |i: usize| i64::from(key[i] as i8);
        let block = |i: usize| {
            (0..8).fold(0i64, |acc, j| {
                acc.wrapping_add((get(i * 8 + j) & 0xff) << (8 * j))
            })
        };
        let rotl = |v: i64, n: u32| ((v as u64).rotate_left(n)) as i64;
        let mut h1 = 0i64;
        let mut h2 = 0i64;
        let nblocks = key.len() / 16;
        for i in 0..nblocks {
            let mut k1 = block(i * 2);
            let mut k2 = block(i * 2 + 1);
            k1 = k1.wrapping_mul(c1);
            k1 = rotl(k1, 31);
            k1 = k1.wrapping_mul(c2);
            h1 ^= k1;
            h1 = rotl(h1, 27);
            h1 = h1.wrapping_add(h2);
            h1 = h1.wrapping_mul(5).wrapping_add(0x52dce729);
            k2 = k2.wrapping_mul(c2);
            k2 = rotl(k2, 33);
            k2 = k2.wrapping_mul(c1);
            h2 ^= k2;
            h2 = rotl(h2, 31);
            h2 = h2.wrapping_add(h1);
            h2 = h2.wrapping_mul(5).wrapping_add(0x38495ab5);
        }
        let off = nblocks * 16;
        let rem = key.len() & 15;
        let mut k1 = 0i64;
        let mut k2 = 0i64;
        if rem >= 9 {
            for i in (8..rem).rev() {
                k2 ^= get(off + i) << (8 * (i - 8));
            }
            k2 = k2.wrapping_mul(c2);
            k2 = rotl(k2, 33);
            k2 = k2.wrapping_mul(c1);
            h2 ^= k2;
        }
        if rem >= 1 {
            for i in (0..rem.min(8)).rev() {
                k1 ^= get(off + i) << (8 * i);
            }
            k1 = k1.wrapping_mul(c1);
            k1 = rotl(k1, 31);
            k1 = k1.wrapping_mul(c2);
            h1 ^= k1;
        }
        let len = key.len() as i64;
        h1 ^= len;
        h2 ^= len;
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        h1 = fmix(h1 as u64) as i64;
        h2 = fmix(h2 as u64) as i64;
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        [h1, h2]
    }

    #[test]
    fn every_tail_length_matches_the_transcription() {
        for len in 0..=48 {
            let key: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(37) ^ 0x9c)
                .collect();
            assert_eq!(
                hash3_x64_128(&key, 0),
                java_transcription(&key),
                "len {len}"
            );
        }
    }

    proptest! {
        #[test]
        fn matches_the_transcription(key in proptest::collection::vec(any::<u8>(), 0..100)) {
            prop_assert_eq!(hash3_x64_128(&key, 0), java_transcription(&key));
        }

        #[test]
        fn a_key_never_gets_the_minimum(key in proptest::collection::vec(any::<u8>(), 1..64)) {
            prop_assert_ne!(token(&key), Token::MIN);
        }
    }
}
