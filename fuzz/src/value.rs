//! A checker of serialized values against their CQL type (native protocol spec section 6,
//! Cassandra 5.0's serializers): what the literal encoder produces must be a value the server
//! can deserialize as that type. Written from the spec, not from the encoder.

use autoprep_protocol::types::ColumnType;

/// Why a value is not one of its type.
pub type Invalid = String;

/// Checks one `[value]` body (no length prefix) of type `ty`.
/// vector, where an empty value is null (refused) except for text and blobs.
pub fn check(ty: &ColumnType, v: &[u8]) -> Result<(), Invalid> {
    check_depth(ty, v, 0)
}

fn check_depth(ty: &ColumnType, v: &[u8], depth: usize) -> Result<(), Invalid> {
    if depth > 80 {
        return Err("nested too deeply".into());
    }
    let fixed = |n: usize| {
        if v.is_empty() || v.len() == n {
            Ok(())
        } else {
            Err(format!("{} of {} bytes", ty.cql_name(), v.len()))
        }
    };
    match ty {
        ColumnType::Custom(_) => Err("a custom type was encoded".into()),
        ColumnType::Ascii => {
            if v.is_ascii() {
                Ok(())
            } else {
                Err("ascii with a non-ASCII byte".into())
            }
        }
        ColumnType::Varchar => std::str::from_utf8(v)
            .map(|_| ())
            .map_err(|_| "text not UTF-8".into()),
        ColumnType::Blob => Ok(()),
        ColumnType::Boolean => match v {
            [] | [0] | [1] => Ok(()),
            _ => Err(format!("boolean {v:02x?}")),
        },
        ColumnType::Tinyint => fixed(1),
        ColumnType::Smallint => fixed(2),
        ColumnType::Int | ColumnType::Float | ColumnType::Date => fixed(4),
        ColumnType::Bigint | ColumnType::Counter | ColumnType::Double | ColumnType::Timestamp => {
            fixed(8)
        }
        ColumnType::Time => {
            fixed(8)?;
            if let Ok(b) = <[u8; 8]>::try_from(v) {
                let ns = i64::from_be_bytes(b);
                if !(0..86_400_000_000_000).contains(&ns) {
                    return Err(format!("time of {ns} ns"));
                }
            }
            Ok(())
        }
        ColumnType::Uuid => fixed(16),
        ColumnType::Timeuuid => {
            fixed(16)?;
            if v.len() == 16 && v[6] >> 4 != 1 {
                return Err("timeuuid not of version 1".into());
            }
            Ok(())
        }
        ColumnType::Inet => match v.len() {
            0 | 4 | 16 => Ok(()),
            n => Err(format!("inet of {n} bytes")),
        },
        ColumnType::Varint => {
            if v.is_empty() {
                Ok(())
            } else {
                minimal_varint(v)
            }
        }
        ColumnType::Decimal => match v.len() {
            0 => Ok(()),
            1..=4 => Err("decimal without unscaled value".into()),
            _ => minimal_varint(&v[4..]),
        },
        ColumnType::Duration => {
            if v.is_empty() {
                return Ok(());
            }
            let mut rest = v;
            let months = signed_vint(&mut rest)?;
            let days = signed_vint(&mut rest)?;
            let nanos = signed_vint(&mut rest)?;
            if !rest.is_empty() {
                return Err("bytes after a duration".into());
            }
            if i32::try_from(months).is_err() || i32::try_from(days).is_err() {
                return Err("duration months or days beyond an int".into());
            }
            let all_pos = months >= 0 && days >= 0 && nanos >= 0;
            let all_neg = months <= 0 && days <= 0 && nanos <= 0;
            if !(all_pos || all_neg) {
                return Err("duration with mixed signs".into());
            }
            Ok(())
        }
        ColumnType::List(e) | ColumnType::Set(e) => {
            let mut rest = v;
            let n = count(&mut rest)?;
            let mut items = Vec::new();
            for _ in 0..n {
                let item = element(&mut rest)?.ok_or("null inside a collection")?;
                check_depth(e, item, depth + 1)?;
                items.push(item);
            }
            end(rest)?;
            if matches!(ty, ColumnType::Set(_)) {
                let mut sorted = items.clone();
                sorted.sort_unstable();
                sorted.dedup();
                if sorted.len() != items.len() {
                    return Err("a set with a repeated element".into());
                }
            }
            Ok(())
        }
        ColumnType::Map(k, val) => {
            let mut rest = v;
            let n = count(&mut rest)?;
            let mut keys = Vec::new();
            for _ in 0..n {
                let key = element(&mut rest)?.ok_or("null map key")?;
                check_depth(k, key, depth + 1)?;
                let value = element(&mut rest)?.ok_or("null map value")?;
                check_depth(val, value, depth + 1)?;
                keys.push(key);
            }
            end(rest)?;
            keys.sort_unstable();
            let before = keys.len();
            keys.dedup();
            if keys.len() != before {
                return Err("a map with a repeated key".into());
            }
            Ok(())
        }
        ColumnType::Tuple(types) => {
            let mut rest = v;
            for t in types {
                if rest.is_empty() {
                    // A shorter tuple literal stays shorter.
                    break;
                }
                if let Some(c) = element(&mut rest)? {
                    check_depth(t, c, depth + 1)?;
                }
            }
            end(rest)
        }
        ColumnType::Udt { fields, .. } => {
            let mut rest = v;
            for (_, t) in fields {
                if let Some(c) = element(&mut rest)? {
                    check_depth(t, c, depth + 1)?;
                }
            }
            end(rest)
        }
        ColumnType::Vector {
            element: e,
            dimension,
        } => {
            let mut rest = v;
            let size = e.fixed_size();
            for _ in 0..*dimension {
                let item = match size {
                    Some(n) => take(&mut rest, n)?,
                    None => {
                        let n = unsigned_vint(&mut rest)?;
                        take(&mut rest, usize::try_from(n).map_err(|_| "huge element")?)?
                    }
                };
                if item.is_empty()
                    && !matches!(
                        **e,
                        ColumnType::Ascii | ColumnType::Varchar | ColumnType::Blob
                    )
                {
                    return Err("an empty (null) vector element".into());
                }
                check_depth(e, item, depth + 1)?;
            }
            end(rest)
        }
    }
}

/// A two's-complement integer in as few bytes as it takes (`BigInteger.toByteArray`).
fn minimal_varint(v: &[u8]) -> Result<(), Invalid> {
    match v {
        [] => Err("varint of no bytes".into()),
        [0, b, ..] if *b < 0x80 => Err("varint with a redundant 0x00".into()),
        [0xff, b, ..] if *b >= 0x80 => Err("varint with a redundant 0xff".into()),
        _ => Ok(()),
    }
}

fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], Invalid> {
    if rest.len() < n {
        return Err(format!("{n} bytes wanted, {} left", rest.len()));
    }
    let (a, b) = rest.split_at(n);
    *rest = b;
    Ok(a)
}

fn int(rest: &mut &[u8]) -> Result<i32, Invalid> {
    let b = take(rest, 4)?;
    Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn count(rest: &mut &[u8]) -> Result<usize, Invalid> {
    usize::try_from(int(rest)?).map_err(|_| "negative element count".into())
}

/// `[bytes]`: `None` for a negative length (null).
fn element<'a>(rest: &mut &'a [u8]) -> Result<Option<&'a [u8]>, Invalid> {
    match usize::try_from(int(rest)?) {
        Ok(n) => take(rest, n).map(Some),
        Err(_) => Ok(None),
    }
}

fn end(rest: &[u8]) -> Result<(), Invalid> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!("{} bytes left over", rest.len()))
    }
}

/// Cassandra's unsigned vint (`VIntCoding`): leading one bits of the first byte count the
/// extra bytes.
pub fn unsigned_vint(rest: &mut &[u8]) -> Result<u64, Invalid> {
    let first = *take(rest, 1)?.first().unwrap_or(&0);
    let extra = first.leading_ones() as usize;
    let mut value = if extra >= 8 {
        0
    } else {
        u64::from(first & (0xff >> extra))
    };
    for b in take(rest, extra)? {
        value = (value << 8) | u64::from(*b);
    }
    Ok(value)
}

fn signed_vint(rest: &mut &[u8]) -> Result<i64, Invalid> {
    let u = unsigned_vint(rest)?;
    Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
}
