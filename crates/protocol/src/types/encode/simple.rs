//! `ascii`, `text`, `blob`, `boolean`, `uuid`, `timeuuid` and `inet`.
//!
//! Text is copied as UTF-8 (ascii must be pure ASCII); blobs take hex pairs; UUIDs the
//! 8-4-4-4-12 form (timeuuid must be version 1); inet takes IP literals only, since the server
//! resolves host names through its own DNS (`InetAddress.getByName`).

use super::{kind_mismatch, rejected, unsupported, EncodeError, Encoded};
use crate::cql::literal::Literal;
use crate::types::ColumnType;
use std::net::{Ipv4Addr, Ipv6Addr};

pub(super) fn encode<'l>(
    lit: &'l Literal<'_>,
    ty: &ColumnType,
) -> Result<Encoded<'l>, EncodeError> {
    match (ty, lit) {
        (ColumnType::Varchar, Literal::String(s)) => Ok(Encoded::Borrowed(s.as_bytes())),
        (ColumnType::Ascii, Literal::String(s)) => {
            if s.is_ascii() {
                Ok(Encoded::Borrowed(s.as_bytes()))
            } else {
                Err(rejected(ty, "non-ASCII character"))
            }
        }
        // Constants.Literal: HEX is only assignable to blob (and custom types, refused earlier).
        (ColumnType::Blob, Literal::Hex(h)) => {
            let b = h.as_bytes();
            if b.len() & 1 == 1 {
                return Err(rejected(ty, "odd number of hex digits"));
            }
            if !b.iter().all(u8::is_ascii_hexdigit) {
                return Err(unsupported(ty, "malformed blob token"));
            }
            Ok(Encoded::Hex(b))
        }
        (ColumnType::Boolean, Literal::Boolean(b)) => Ok(Encoded::fixed([u8::from(*b)])),
        (ColumnType::Uuid, Literal::Uuid(t)) => Ok(Encoded::fixed(parse_uuid(t, ty)?)),
        (ColumnType::Timeuuid, Literal::Uuid(t)) => {
            let u = parse_uuid(t, ty)?;
            if u[6] >> 4 != 1 {
                return Err(rejected(ty, "timeuuid must be a version 1 UUID"));
            }
            Ok(Encoded::fixed(u))
        }
        (ColumnType::Inet, Literal::String(s)) => inet(s, ty),
        _ => Err(kind_mismatch(ty, lit)),
    }
}

/// Parses the 8-4-4-4-12 hex form (either case) into 16 bytes.
pub(crate) fn parse_uuid(t: &str, ty: &ColumnType) -> Result<[u8; 16], EncodeError> {
    let malformed = || unsupported(ty, "malformed uuid token");
    let b = t.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return Err(malformed());
    }
    // The 32 hex digits as four runs of eight (the middle groups are four and four).
    let le = |at: usize, n: usize| -> u64 {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&b[at..at + n]);
        u64::from_le_bytes(w)
    };
    let runs = [
        le(0, 8),
        le(9, 4) | le(14, 4) << 32,
        le(19, 4) | le(24, 4) << 32,
        le(28, 8),
    ];
    let mut out = [0u8; 16];
    for (o, run) in out.chunks_exact_mut(4).zip(runs) {
        o.copy_from_slice(&hex8(run).ok_or_else(malformed)?);
    }
    Ok(out)
}

/// Eight ASCII hex digits (first digit in the low byte) to four bytes, or `None` if one is not
/// a hex digit (SIMD within a register).
fn hex8(x: u64) -> Option<[u8; 4]> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte below 0x80 set where lo <= byte <= hi (no carries between
    // bytes: each sum stays below 0x100).
    let in_range = |v: u64, lo: u8, hi: u8| {
        v.wrapping_add(ONES * u64::from(0x80 - lo)) & !v.wrapping_add(ONES * u64::from(0x7F - hi))
    };
    let low7 = x & !HIGH;
    // Setting bit 5 maps `A..=F` onto `a..=f` and no other byte into that range.
    let hex = in_range(low7, b'0', b'9') | in_range(low7 | (ONES * 0x20), b'a', b'f');
    if hex & !x & HIGH != HIGH {
        return None;
    }
    // A digit's value is its low nibble; a letter's is its low nibble plus 9 (bit 6 set).
    let nibbles = (x & (ONES * 0x0F)) + 9 * ((x >> 6) & ONES);
    // Byte i becomes nibble i << 4 | nibble i+1; keep the even bytes and close the gaps.
    let pairs = ((nibbles << 4) | (nibbles >> 8)) & 0x00FF_00FF_00FF_00FF;
    let pairs = (pairs | (pairs >> 8)) & 0x0000_FFFF_0000_FFFF;
    let pairs = (pairs | (pairs >> 16)) & 0xFFFF_FFFF;
    Some((pairs as u32).to_le_bytes())
}

/// `InetAddressType.fromString`: `''` is an empty value; IP literals convert to 4 or 16 bytes
/// (IPv4-mapped IPv6 becomes 4 bytes, as Java does); anything else is a host name that the
/// server would resolve.
fn inet<'l>(s: &str, ty: &ColumnType) -> Result<Encoded<'l>, EncodeError> {
    if s.is_empty() {
        return Ok(Encoded::inline(&[]));
    }
    if s.contains(':') {
        if s.contains(['%', '[', ']']) {
            // Scope ids need the server's interfaces; brackets are rare enough to pass through.
            return Err(unsupported(ty, "scoped or bracketed IPv6 literal"));
        }
        return match s.parse::<Ipv6Addr>() {
            Ok(a) => match a.to_ipv4_mapped() {
                Some(v4) => Ok(Encoded::fixed(v4.octets())),
                None => Ok(Encoded::fixed(a.octets())),
            },
            // Java accepts a few forms Rust does not (leading zeros in an embedded IPv4).
            Err(_) => Err(unsupported(ty, "IPv6 literal form")),
        };
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // Rust accepts only the canonical dotted quad; Java also takes `1.2.3`, `127.1` and
        // leading zeros, with rules that vary across JDK updates: pass those through.
        return match s.parse::<Ipv4Addr>() {
            Ok(a) => Ok(Encoded::fixed(a.octets())),
            Err(_) => Err(unsupported(ty, "non-canonical IPv4 literal")),
        };
    }
    Err(EncodeError::NeedsServerContext {
        what: "DNS resolver",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(lit: Literal<'_>, ty: ColumnType) -> Result<String, EncodeError> {
        let mut v = Vec::new();
        encode(&lit, &ty)?.write(&mut v);
        Ok(hex::encode(v))
    }

    #[test]
    fn text_ascii_blob() {
        assert_eq!(
            enc(Literal::String("it's".into()), ColumnType::Varchar).unwrap(),
            "69742773"
        );
        assert_eq!(
            enc(Literal::String("".into()), ColumnType::Ascii).unwrap(),
            ""
        );
        assert_eq!(
            enc(Literal::String("é".into()), ColumnType::Varchar).unwrap(),
            "c3a9"
        );
        assert!(enc(Literal::String("é".into()), ColumnType::Ascii)
            .unwrap_err()
            .server_rejects());
        assert_eq!(enc(Literal::Hex(""), ColumnType::Blob).unwrap(), "");
        assert_eq!(enc(Literal::Hex("CAfe"), ColumnType::Blob).unwrap(), "cafe");
        assert!(enc(Literal::Hex("ABC"), ColumnType::Blob)
            .unwrap_err()
            .server_rejects());
        assert!(enc(Literal::String("00".into()), ColumnType::Blob)
            .unwrap_err()
            .server_rejects());
    }

    /// ASCII hex digit values; 0x80 marks a non-digit.
    const HEX: [u8; 256] = {
        let mut t = [0x80u8; 256];
        let mut i = 0;
        while i < 10 {
            t[b'0' as usize + i] = i as u8;
            i += 1;
        }
        let mut i = 0;
        while i < 6 {
            t[b'a' as usize + i] = 10 + i as u8;
            t[b'A' as usize + i] = 10 + i as u8;
            i += 1;
        }
        t
    };

    /// The byte-table decoding, as reference for [`hex8`].
    fn hex8_reference(digits: [u8; 8]) -> Option<[u8; 4]> {
        let mut out = [0u8; 4];
        for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let (hi, lo) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
            if (hi | lo) & 0x80 != 0 {
                return None;
            }
            *o = (hi << 4) | lo;
        }
        Some(out)
    }

    #[test]
    fn hex8_matches_the_byte_table_for_every_byte_in_every_place() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut digits = *b"09afAF5c";
                digits[at] = b;
                assert_eq!(
                    hex8(u64::from_le_bytes(digits)),
                    hex8_reference(digits),
                    "{b:#x} at {at}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn hex8_matches_the_byte_table(digits in proptest::array::uniform8(proptest::prelude::any::<u8>())) {
            proptest::prop_assert_eq!(hex8(u64::from_le_bytes(digits)), hex8_reference(digits));
        }
    }

    #[test]
    fn uuids() {
        assert_eq!(
            enc(
                Literal::Uuid("6BA7B810-9DAD-11D1-80B4-00C04FD430C8"),
                ColumnType::Timeuuid
            )
            .unwrap(),
            "6ba7b8109dad11d180b400c04fd430c8"
        );
        assert!(enc(
            Literal::Uuid("00000000-0000-4000-8000-000000000000"),
            ColumnType::Timeuuid
        )
        .unwrap_err()
        .server_rejects());
        assert!(enc(
            Literal::String("6ba7b810-9dad-11d1-80b4-00c04fd430c8".into()),
            ColumnType::Uuid
        )
        .unwrap_err()
        .server_rejects());
        assert!(enc(
            Literal::Uuid("6ba7b810-9dad-11d1-80b4-00c04fd430cg"),
            ColumnType::Uuid
        )
        .is_err());
    }

    #[test]
    fn inet_forms() {
        let ok = |s: &str| enc(Literal::String(s.to_owned().into()), ColumnType::Inet).unwrap();
        assert_eq!(ok("1.2.3.4"), "01020304");
        assert_eq!(ok("::ffff:1.2.3.4"), "01020304");
        assert_eq!(ok("::1.2.3.4"), "00000000000000000000000001020304");
        assert_eq!(ok("::1"), "00000000000000000000000000000001");
        assert_eq!(ok(""), "");
        let err =
            |s: &str| enc(Literal::String(s.to_owned().into()), ColumnType::Inet).unwrap_err();
        assert_eq!(
            err("localhost"),
            EncodeError::NeedsServerContext {
                what: "DNS resolver"
            }
        );
        assert!(matches!(err("1.2.3"), EncodeError::Unsupported { .. }));
        assert!(matches!(err("01.2.3.4"), EncodeError::Unsupported { .. }));
        assert!(matches!(
            err("fe80::1%eth0"),
            EncodeError::Unsupported { .. }
        ));
    }
}
