//! `list`, `set`, `map`, tuples, UDTs and vectors (`Lists`, `Sets`, `Maps`, `Tuples`,
//! `UserTypes`, `Vectors` in Cassandra).
//!
//! Collections: `[int n]` then each element as `[int len][bytes]` (protocol v3+); `null` inside a
//! collection is rejected by the server. Sets and maps are written in the order of the element
//! type's comparator, as the server's `TreeSet`/`TreeMap` would; duplicates that are byte-equal
//! collapse, while duplicates that differ (a map key given two values, `1.0` and `1.00` in a set
//! of decimals) are refused: the server keeps whichever its `HashMap` iterates first.
//! Element types whose ordering is not reproduced (decimal, nested collections, tuples, UDTs)
//! are refused inside sets and as map keys.
//!
//! Tuples: the given elements only (a shorter tuple literal stays shorter), `null` as length -1.
//! UDTs: every field in type order, missing ones null, the last duplicate field wins; a tuple
//! literal for a UDT fails when the server executes the statement, so it is refused. Vectors: exactly `dimension` non-null elements,
//! concatenated for fixed-size element types, each prefixed by an unsigned vint length
//! otherwise.

use super::{
    encode_value, kind_mismatch, rejected, unsupported, vint, EncodeError, EncodeOptions, Encoded,
};
use crate::cql::literal::Literal;
use crate::types::ColumnType;
use std::cmp::Ordering;

pub(super) fn encode<'l>(
    lit: &'l Literal<'_>,
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Encoded<'l>, EncodeError> {
    let body = match (ty, lit) {
        (ColumnType::List(elem), Literal::List(items)) => {
            encode_list_items(items, elem, opts, depth)?
        }
        (ColumnType::Set(elem), Literal::Set(items)) => set(items, elem, ty, opts, depth)?,
        // `{}` is an empty set literal to the server, and it is accepted for a map; the lexer
        // may report it either way.
        (ColumnType::Set(_), Literal::Map(e)) if e.is_empty() => 0i32.to_be_bytes().to_vec(),
        (ColumnType::Map(_, _), Literal::Set(e)) if e.is_empty() => 0i32.to_be_bytes().to_vec(),
        (ColumnType::Map(k, v), Literal::Map(entries)) => map(entries, k, v, ty, opts, depth)?,
        (ColumnType::Tuple(types), Literal::Tuple(items)) => {
            positional(items, types, ty, opts, depth)?
        }
        // Tuples.Literal accepts a UDT receiver, but executing the statement then fails in
        // the server (ClassCastException of Tuples.Value to UserTypes.Value, seen on 5.0.6).
        (ColumnType::Udt { .. }, Literal::Tuple(_)) => {
            return Err(rejected(ty, "tuple literal for a user type"))
        }
        (ColumnType::Udt { fields, .. }, Literal::Udt(entries)) => {
            udt(entries, fields, ty, opts, depth)?
        }
        (ColumnType::Vector { element, dimension }, Literal::List(items)) => {
            vector(items, element, *dimension, ty, opts, depth)?
        }
        _ => return Err(kind_mismatch(ty, lit)),
    };
    Ok(Encoded::Owned(body))
}

/// `[int n]` then each item as `[int len][bytes]`; `null` items are rejected.
pub(super) fn encode_list_items(
    items: &[Literal<'_>],
    elem: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(4 + items.len() * 12);
    put_count(&mut out, items.len(), elem)?;
    for item in items {
        let e = element(item, elem, opts, depth)?;
        put_len(&mut out, e.len(), elem)?;
        e.write_vec(&mut out);
    }
    Ok(out)
}

/// A non-null collection element.
fn element<'l>(
    item: &'l Literal<'_>,
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Encoded<'l>, EncodeError> {
    encode_value(item, ty, opts, depth + 1)?.ok_or_else(|| rejected(ty, "null inside a collection"))
}

fn put_count(out: &mut Vec<u8>, n: usize, ty: &ColumnType) -> Result<(), EncodeError> {
    let n = i32::try_from(n).map_err(|_| unsupported(ty, "too many elements"))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

fn put_len(out: &mut Vec<u8>, n: usize, ty: &ColumnType) -> Result<(), EncodeError> {
    let n = i32::try_from(n).map_err(|_| unsupported(ty, "element too large"))?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

/// Encodes items into one buffer, remembering where each one lies.
fn encode_all(
    items: &[&Literal<'_>],
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
    buf: &mut Vec<u8>,
) -> Result<Vec<(usize, usize)>, EncodeError> {
    let mut ranges = Vec::with_capacity(items.len());
    for item in items {
        let e = element(item, ty, opts, depth)?;
        let start = buf.len();
        e.write_vec(buf);
        ranges.push((start, buf.len()));
    }
    Ok(ranges)
}

fn set(
    items: &[Literal<'_>],
    elem: &ColumnType,
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Vec<u8>, EncodeError> {
    if matches!(elem, ColumnType::Duration) {
        return Err(rejected(ty, "durations are not allowed inside sets"));
    }
    let refs: Vec<&Literal<'_>> = items.iter().collect();
    let mut buf = Vec::new();
    let mut ranges = encode_all(&refs, elem, opts, depth, &mut buf)?;
    if ranges.len() > 1 {
        let cmp = comparator(elem).ok_or_else(|| unsupported(ty, "element ordering"))?;
        ranges.sort_by(|a, b| cmp(&buf[a.0..a.1], &buf[b.0..b.1]));
        let mut kept: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        for r in ranges {
            if let Some(last) = kept.last() {
                let (a, b) = (&buf[last.0..last.1], &buf[r.0..r.1]);
                if cmp(a, b) == Ordering::Equal {
                    if a == b {
                        continue;
                    }
                    return Err(unsupported(ty, "equal elements with different bytes"));
                }
            }
            kept.push(r);
        }
        ranges = kept;
    }
    let mut out = Vec::with_capacity(4 + buf.len() + 4 * ranges.len());
    put_count(&mut out, ranges.len(), ty)?;
    for (s, e) in ranges {
        put_len(&mut out, e - s, elem)?;
        out.extend_from_slice(&buf[s..e]);
    }
    Ok(out)
}

fn map(
    entries: &[(Literal<'_>, Literal<'_>)],
    kt: &ColumnType,
    vt: &ColumnType,
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Vec<u8>, EncodeError> {
    let keys: Vec<&Literal<'_>> = entries.iter().map(|(k, _)| k).collect();
    let values: Vec<&Literal<'_>> = entries.iter().map(|(_, v)| v).collect();
    let mut kbuf = Vec::new();
    let mut vbuf = Vec::new();
    let kr = encode_all(&keys, kt, opts, depth, &mut kbuf)?;
    let vr = encode_all(&values, vt, opts, depth, &mut vbuf)?;
    let mut pairs: Vec<((usize, usize), (usize, usize))> = kr.into_iter().zip(vr).collect();
    if pairs.len() > 1 {
        let cmp = comparator(kt).ok_or_else(|| unsupported(ty, "key ordering"))?;
        pairs.sort_by(|a, b| cmp(&kbuf[a.0 .0..a.0 .1], &kbuf[b.0 .0..b.0 .1]));
        let mut kept: Vec<((usize, usize), (usize, usize))> = Vec::with_capacity(pairs.len());
        for p in pairs {
            if let Some(last) = kept.last() {
                let (ka, kb) = (&kbuf[last.0 .0..last.0 .1], &kbuf[p.0 .0..p.0 .1]);
                if cmp(ka, kb) == Ordering::Equal {
                    let (va, vb) = (&vbuf[last.1 .0..last.1 .1], &vbuf[p.1 .0..p.1 .1]);
                    if ka == kb && va == vb {
                        continue;
                    }
                    return Err(unsupported(ty, "duplicate map keys"));
                }
            }
            kept.push(p);
        }
        pairs = kept;
    }
    let mut out = Vec::with_capacity(4 + kbuf.len() + vbuf.len() + 8 * pairs.len());
    put_count(&mut out, pairs.len(), ty)?;
    for ((ks, ke), (vs, ve)) in pairs {
        put_len(&mut out, ke - ks, kt)?;
        out.extend_from_slice(&kbuf[ks..ke]);
        put_len(&mut out, ve - vs, vt)?;
        out.extend_from_slice(&vbuf[vs..ve]);
    }
    Ok(out)
}

/// Tuple components: only the given items are written.
fn positional(
    items: &[Literal<'_>],
    types: &[ColumnType],
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Vec<u8>, EncodeError> {
    if items.len() > types.len() {
        return Err(rejected(ty, "too many tuple elements"));
    }
    let mut out = Vec::with_capacity(items.len() * 12);
    for (item, t) in items.iter().zip(types) {
        put_component(&mut out, encode_value(item, t, opts, depth + 1)?, t)?;
    }
    Ok(out)
}

fn put_component(
    out: &mut Vec<u8>,
    v: Option<Encoded<'_>>,
    ty: &ColumnType,
) -> Result<(), EncodeError> {
    match v {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(e) => {
            put_len(out, e.len(), ty)?;
            e.write_vec(out);
        }
    }
    Ok(())
}

fn udt(
    entries: &[(std::borrow::Cow<'_, str>, Literal<'_>)],
    fields: &[(String, ColumnType)],
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Vec<u8>, EncodeError> {
    if entries
        .iter()
        .any(|(name, _)| !fields.iter().any(|(f, _)| f == name))
    {
        return Err(rejected(ty, "unknown field"));
    }
    let mut out = Vec::with_capacity(fields.len() * 12);
    for (name, fty) in fields {
        // The parser keeps the last value given for a field.
        let v = match entries.iter().rev().find(|(n, _)| n == name) {
            Some((_, lit)) => encode_value(lit, fty, opts, depth + 1)?,
            None => None,
        };
        put_component(&mut out, v, fty)?;
    }
    Ok(out)
}

fn vector(
    items: &[Literal<'_>],
    elem: &ColumnType,
    dimension: u32,
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Vec<u8>, EncodeError> {
    if u32::try_from(items.len()).ok() != Some(dimension) {
        return Err(rejected(ty, "wrong number of vector elements"));
    }
    let fixed = elem.fixed_size();
    let mut out = Vec::with_capacity(items.len() * fixed.unwrap_or(8));
    for item in items {
        let e = encode_value(item, elem, opts, depth + 1)?
            .ok_or_else(|| rejected(ty, "null inside a vector"))?;
        // Vectors.DelayedValue rejects what the element type calls null: an empty value,
        // except for text and blobs, where empty is a real value.
        if e.len() == 0
            && !matches!(
                elem,
                ColumnType::Ascii | ColumnType::Varchar | ColumnType::Blob
            )
        {
            return Err(rejected(ty, "null inside a vector"));
        }
        match fixed {
            Some(size) if e.len() == size => {}
            Some(_) => return Err(unsupported(ty, "element size")),
            None => {
                let mut b = [0u8; 9];
                let n = vint::write_unsigned(e.len() as u64, &mut b);
                out.extend_from_slice(&b[..n]);
            }
        }
        e.write_vec(&mut out);
    }
    Ok(out)
}

type Cmp = fn(&[u8], &[u8]) -> Ordering;

/// The server's comparator for set elements and map keys, where reproduced. Every one of them
/// sorts an empty value first.
fn comparator(ty: &ColumnType) -> Option<Cmp> {
    Some(match ty {
        ColumnType::Tinyint
        | ColumnType::Smallint
        | ColumnType::Int
        | ColumnType::Bigint
        | ColumnType::Counter
        | ColumnType::Timestamp => signed_cmp,
        ColumnType::Varint => varint_cmp,
        ColumnType::Float => float_cmp,
        ColumnType::Double => double_cmp,
        ColumnType::Boolean => bool_cmp,
        ColumnType::Uuid => uuid_cmp,
        ColumnType::Timeuuid => timeuuid_cmp,
        // AbstractType's default: unsigned lexicographic bytes (date and time are stored so
        // that byte order is chronological).
        ColumnType::Ascii
        | ColumnType::Varchar
        | ColumnType::Blob
        | ColumnType::Inet
        | ColumnType::Date
        | ColumnType::Time => <[u8]>::cmp,
        _ => return None,
    })
}

/// Orders empty values first; `None` when both are non-empty.
fn empty_first(a: &[u8], b: &[u8]) -> Option<Ordering> {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => Some(Ordering::Equal),
        (true, false) => Some(Ordering::Less),
        (false, true) => Some(Ordering::Greater),
        (false, false) => None,
    }
}

/// Same-width big-endian two's complement: signed first byte, then unsigned bytes.
fn signed_cmp(a: &[u8], b: &[u8]) -> Ordering {
    empty_first(a, b).unwrap_or_else(|| {
        (a[0] as i8)
            .cmp(&(b[0] as i8))
            .then_with(|| a[1..].cmp(&b[1..]))
    })
}

/// `IntegerType.compareIntegers` on minimal two's complement values.
fn varint_cmp(a: &[u8], b: &[u8]) -> Ordering {
    empty_first(a, b).unwrap_or_else(|| {
        let (na, nb) = (a[0] & 0x80 != 0, b[0] & 0x80 != 0);
        match (na, nb) {
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            // Longer means larger magnitude: larger if positive, smaller if negative.
            _ if a.len() != b.len() => {
                let o = a.len().cmp(&b.len());
                if na {
                    o.reverse()
                } else {
                    o
                }
            }
            _ => a.cmp(b),
        }
    })
}

/// `Float.compare`: -0.0 before 0.0, NaN (canonical) last.
fn float_cmp(a: &[u8], b: &[u8]) -> Ordering {
    empty_first(a, b).unwrap_or_else(|| {
        let f = |x: &[u8]| f32::from_be_bytes(x.try_into().unwrap_or([0; 4]));
        f(a).total_cmp(&f(b))
    })
}

/// `Double.compare`.
fn double_cmp(a: &[u8], b: &[u8]) -> Ordering {
    empty_first(a, b).unwrap_or_else(|| {
        let f = |x: &[u8]| f64::from_be_bytes(x.try_into().unwrap_or([0; 8]));
        f(a).total_cmp(&f(b))
    })
}

fn bool_cmp(a: &[u8], b: &[u8]) -> Ordering {
    empty_first(a, b).unwrap_or_else(|| (a[0] != 0).cmp(&(b[0] != 0)))
}

fn long_at(x: &[u8], i: usize) -> u64 {
    x.get(i..i + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// `TimeUUIDType.reorderTimestampBytes`: time_hi, time_mid, time_low order.
fn reorder_timestamp(msb: u64) -> u64 {
    (msb << 48) | ((msb << 16) & 0xFFFF_0000_0000) | (msb >> 32)
}

/// `UUIDType.compareCustom`: version first; version 1 by timestamp; then unsigned bytes.
fn uuid_cmp(a: &[u8], b: &[u8]) -> Ordering {
    empty_first(a, b).unwrap_or_else(|| {
        let (ma, mb) = (long_at(a, 0), long_at(b, 0));
        let (va, vb) = ((ma >> 12) & 0xF, (mb >> 12) & 0xF);
        va.cmp(&vb)
            .then_with(|| {
                if va == 1 {
                    reorder_timestamp(ma).cmp(&reorder_timestamp(mb))
                } else {
                    ma.cmp(&mb)
                }
            })
            .then_with(|| long_at(a, 8).cmp(&long_at(b, 8)))
    })
}

/// `TimeUUIDType.compareCustom`: timestamp, then the low bytes compared signed byte by byte.
fn timeuuid_cmp(a: &[u8], b: &[u8]) -> Ordering {
    empty_first(a, b).unwrap_or_else(|| {
        let (ma, mb) = (long_at(a, 0), long_at(b, 0));
        reorder_timestamp(ma)
            .cmp(&reorder_timestamp(mb))
            .then_with(|| {
                let flip = |x: u64| (x ^ 0x0080_8080_8080_8080) as i64;
                flip(long_at(a, 8)).cmp(&flip(long_at(b, 8)))
            })
    })
}
