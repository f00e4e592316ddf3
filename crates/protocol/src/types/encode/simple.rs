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
    crate::uuid::parse(t.as_bytes()).ok_or_else(|| unsupported(ty, "malformed uuid token"))
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
