//! Which literals convert on ScyllaDB exactly as on Cassandra, so that the encoder's
//! Cassandra conversion is also ScyllaDB's. When the upstream is ScyllaDB, a literal that this
//! check refuses makes its statement go through as written.
//!
//! No ScyllaDB server runs where this project is tested, so the rules come from reading its
//! source (scylladb/scylladb master of 2026-08: `types/types.cc` `from_string` of each type,
//! `cql3/constants.cc`, `cql3/expr/prepare_expr.cc`, `utils/big_decimal.cc`, `duration.cc`) and
//! the expected results of its own CQL tests (`test/cqlpy/test_timestamp.py`,
//! `test_type_time.py`, `test_duration.py`, `test_type_inet.py`, `test_udt.py`,
//! `test/cql/lwt_test.result`). What is refused, and why:
//! - varint with a leading zero: ScyllaDB's big-integer parser reads `010` as octal;
//! - float and double that overflow to infinity: ScyllaDB refuses, Java gives Infinity;
//! - inet with an embedded IPv4 (`::ffff:1.2.3.4`): ScyllaDB keeps 16 bytes, Cassandra 4;
//! - timestamp strings other than `yyyy-mm-dd[( |T)hh:mm[:ss[.f{1,3}]]]` with a year
//!   1400-9999, a real calendar day, and a zone of `Z`, ` Z`, ` UTC`, ` GMT`, `+hh`, `+hhmm`
//!   or `+hh:mm` attached (ScyllaDB refuses more fraction digits, clamps nothing, and reads
//!   other zone spellings differently), or all digits;
//! - date strings other than `yyyy-mm-dd` or all digits;
//! - time as an integer or an all-digit string (ScyllaDB refuses both: scylladb#7987), or in
//!   any form but `hh:mm:ss[.f{1,9}]`;
//! - durations with `µs` (a syntax error in ScyllaDB: scylladb#8001);
//! - blobs (`0x...`): on a descending clustering column ScyllaDB appears to refuse a hex
//!   literal, and PREPARED metadata does not say which columns are descending;
//! - empty collection literals (`[]`, `{}`): ScyllaDB stores null for a non-frozen column,
//!   and PREPARED metadata does not say which columns are frozen;
//! - UDT literals naming a field twice (ScyllaDB keeps the first value, Cassandra the last).

use crate::cql::literal::Literal;
use crate::types::ColumnType;

/// `Ok` when `lit`, bound to a marker of type `ty`, is known to convert on ScyllaDB as the
/// encoder converts it; otherwise a fixed reason (safe as a metric label). Literals the encoder
/// itself refuses for `ty` may pass here: the encoder still decides.
pub fn established(lit: &Literal<'_>, ty: &ColumnType) -> Result<(), &'static str> {
    match (ty, lit) {
        (_, Literal::Null) => Ok(()),
        (_, Literal::Hex(_)) => Err("scylla: blob literal"),
        (ColumnType::Varint, Literal::Integer(t)) => {
            let digits = t.strip_prefix('-').unwrap_or(t);
            if digits.len() > 1 && digits.starts_with('0') {
                Err("scylla: varint leading zero")
            } else {
                Ok(())
            }
        }
        (ColumnType::Float, Literal::Integer(t) | Literal::Float(t)) => {
            finite(t.parse::<f32>().map(f64::from))
        }
        (ColumnType::Double, Literal::Integer(t) | Literal::Float(t)) => finite(t.parse::<f64>()),
        (ColumnType::Inet, Literal::String(s)) => {
            if s.contains(':') && s.contains('.') {
                Err("scylla: inet with embedded IPv4")
            } else {
                Ok(())
            }
        }
        (ColumnType::Timestamp, Literal::String(s)) => {
            if all_digits(s) || timestamp_form(s) {
                Ok(())
            } else {
                Err("scylla: timestamp form")
            }
        }
        (ColumnType::Date, Literal::String(s)) => {
            if all_digits(s) || date_form(s.as_bytes()).is_some_and(|rest| rest.is_empty()) {
                Ok(())
            } else {
                Err("scylla: date form")
            }
        }
        (ColumnType::Time, Literal::Integer(_)) => Err("scylla: time form"),
        (ColumnType::Time, Literal::String(s)) => {
            if time_form(s.as_bytes(), 9).is_some_and(|rest| rest.is_empty()) {
                Ok(())
            } else {
                Err("scylla: time form")
            }
        }
        (ColumnType::Duration, Literal::Duration(d)) => {
            if d.contains('µ') {
                Err("scylla: duration in µs")
            } else {
                Ok(())
            }
        }
        (ColumnType::List(e) | ColumnType::Set(e), Literal::List(items) | Literal::Set(items)) => {
            not_empty(items.len())?;
            items.iter().try_for_each(|i| established(i, e))
        }
        (ColumnType::Vector { element, .. }, Literal::List(items)) => {
            items.iter().try_for_each(|i| established(i, element))
        }
        (ColumnType::Map(k, v), Literal::Map(entries)) => {
            not_empty(entries.len())?;
            entries
                .iter()
                .try_for_each(|(a, b)| established(a, k).and_then(|()| established(b, v)))
        }
        (ColumnType::Set(_) | ColumnType::List(_), Literal::Map(e)) if e.is_empty() => {
            Err("scylla: empty collection")
        }
        (ColumnType::Tuple(types), Literal::Tuple(items)) => items
            .iter()
            .zip(types)
            .try_for_each(|(i, t)| established(i, t)),
        (ColumnType::Udt { fields, .. }, Literal::Udt(entries)) => {
            for (n, (name, value)) in entries.iter().enumerate() {
                if entries[..n].iter().any(|(other, _)| other == name) {
                    return Err("scylla: udt field twice");
                }
                if let Some((_, t)) = fields.iter().find(|(f, _)| f == name) {
                    established(value, t)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn finite<E>(v: Result<f64, E>) -> Result<(), &'static str> {
    match v {
        Ok(x) if x.is_infinite() => Err("scylla: float overflow"),
        _ => Ok(()),
    }
}

fn not_empty(n: usize) -> Result<(), &'static str> {
    if n == 0 {
        Err("scylla: empty collection")
    } else {
        Ok(())
    }
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `n` ASCII digits at the start of `s`: their value and the rest.
fn digits(s: &[u8], n: usize) -> Option<(u32, &[u8])> {
    let (head, rest) = (s.get(..n)?, s.get(n..)?);
    let mut v = 0u32;
    for &b in head {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(b - b'0');
    }
    Some((v, rest))
}

/// `yyyy-mm-dd` with a year in 1400..=9999 and a real calendar day; the rest.
fn date_form(s: &[u8]) -> Option<&[u8]> {
    let (y, s) = digits(s, 4)?;
    let s = s.strip_prefix(b"-")?;
    let (m, s) = digits(s, 2)?;
    let s = s.strip_prefix(b"-")?;
    let (d, s) = digits(s, 2)?;
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    ((1400..=9999).contains(&y) && (1..=days).contains(&d)).then_some(s)
}

/// `hh:mm:ss[.f{1,max_fraction}]` with hh ≤ 23, mm and ss ≤ 59; the rest.
fn time_form(s: &[u8], max_fraction: usize) -> Option<&[u8]> {
    let rest = hh_mm(s)?.strip_prefix(b":")?;
    let (sec, rest) = digits(rest, 2)?;
    (sec <= 59).then_some(())?;
    fraction(rest, max_fraction)
}

fn hh_mm(s: &[u8]) -> Option<&[u8]> {
    let (h, s) = digits(s, 2)?;
    let s = s.strip_prefix(b":")?;
    let (m, s) = digits(s, 2)?;
    (h <= 23 && m <= 59).then_some(s)
}

/// An optional `.f{1,max}`; the rest.
fn fraction(s: &[u8], max: usize) -> Option<&[u8]> {
    let Some(r) = s.strip_prefix(b".") else {
        return Some(s);
    };
    let n = r.iter().take_while(|b| b.is_ascii_digit()).count();
    (1..=max).contains(&n).then(|| &r[n..])
}

/// The timestamp strings whose reading ScyllaDB and Cassandra share (see the module doc).
fn timestamp_form(s: &str) -> bool {
    let Some(rest) = date_form(s.as_bytes()) else {
        return false;
    };
    let rest = match rest.first() {
        Some(b' ' | b'T') if rest.get(1).is_some_and(u8::is_ascii_digit) => {
            let t = &rest[1..];
            let Some(after_hm) = hh_mm(t) else {
                return false;
            };
            let after_s = match after_hm.strip_prefix(b":") {
                Some(r) => match digits(r, 2) {
                    Some((sec, r)) if sec <= 59 => r,
                    _ => return false,
                },
                None => after_hm,
            };
            match fraction(after_s, 3) {
                Some(r) => r,
                None => return false,
            }
        }
        _ => rest,
    };
    zone(rest)
}

/// A zone both servers read alike, or none (the encoder then decides: without a zone the
/// server's own time zone applies, which the encoder refuses unless the operator states it).
fn zone(z: &[u8]) -> bool {
    match z {
        b"" | b"Z" | b" Z" | b" UTC" | b" GMT" => true,
        [b'+' | b'-', rest @ ..] => {
            matches!(
                rest,
                [a, b] | [a, b, _, _] | [a, b, b':', _, _]
                    if a.is_ascii_digit() && b.is_ascii_digit()
            ) && rest.iter().filter(|c| **c != b':').all(u8::is_ascii_digit)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn s(v: &str) -> Literal<'_> {
        Literal::String(Cow::Borrowed(v))
    }

    #[test]
    fn the_forms_both_servers_read_alike_pass() {
        let ok = [
            (s("2024-01-02 03:04:05+0000"), ColumnType::Timestamp),
            (s("2024-01-02T03:04:05.123Z"), ColumnType::Timestamp),
            (s("2024-02-29 03:04+02:00"), ColumnType::Timestamp),
            (s("2024-01-02 UTC"), ColumnType::Timestamp),
            (s("1700000000000"), ColumnType::Timestamp),
            (s("2024-01-02"), ColumnType::Date),
            (s("12:34:56.123456789"), ColumnType::Time),
            (Literal::Integer("-12"), ColumnType::Varint),
            (Literal::Integer("0"), ColumnType::Varint),
            (Literal::Float("1.5e38"), ColumnType::Float),
            (Literal::Duration("1h30m"), ColumnType::Duration),
            (s("::1"), ColumnType::Inet),
            (s("10.0.0.1"), ColumnType::Inet),
            (
                Literal::List(vec![Literal::Integer("1")]),
                ColumnType::List(Box::new(ColumnType::Int)),
            ),
        ];
        for (lit, ty) in ok {
            assert_eq!(established(&lit, &ty), Ok(()), "{lit:?} {ty:?}");
        }
    }

    #[test]
    fn the_forms_scylla_reads_otherwise_are_refused() {
        let refused = [
            (s("2024-01-02 03:04:05.1234+0000"), ColumnType::Timestamp),
            (s("2024-02-30 03:04:05+0000"), ColumnType::Timestamp),
            (s("0999-01-02 03:04:05+0000"), ColumnType::Timestamp),
            (s("2024-01-02 24:00:00+0000"), ColumnType::Timestamp),
            (s("2024-01-02 03:04:05 +0000"), ColumnType::Timestamp),
            (s("2024-01-02 03:04:05 UT"), ColumnType::Timestamp),
            (s("2024-1-2"), ColumnType::Date),
            (Literal::Integer("5"), ColumnType::Time),
            (s("5000"), ColumnType::Time),
            (s("1:02:03"), ColumnType::Time),
            (Literal::Integer("010"), ColumnType::Varint),
            (Literal::Integer("-07"), ColumnType::Varint),
            (Literal::Float("1e39"), ColumnType::Float),
            (Literal::Float("1e309"), ColumnType::Double),
            (s("::ffff:1.2.3.4"), ColumnType::Inet),
            (Literal::Duration("5µs"), ColumnType::Duration),
            (Literal::Hex("00ff"), ColumnType::Blob),
            (
                Literal::List(vec![]),
                ColumnType::List(Box::new(ColumnType::Int)),
            ),
            (
                Literal::Map(vec![]),
                ColumnType::Set(Box::new(ColumnType::Int)),
            ),
            (
                Literal::Udt(vec![
                    (Cow::Borrowed("a"), Literal::Integer("1")),
                    (Cow::Borrowed("a"), Literal::Integer("2")),
                ]),
                ColumnType::Udt {
                    keyspace: "k".into(),
                    name: "u".into(),
                    fields: vec![("a".into(), ColumnType::Int)],
                },
            ),
            (
                Literal::Tuple(vec![s("2024-1-2")]),
                ColumnType::Tuple(vec![ColumnType::Date]),
            ),
        ];
        for (lit, ty) in refused {
            assert!(established(&lit, &ty).is_err(), "{lit:?} {ty:?}");
        }
    }
}
