//! The common scalar conversions written straight into the output: text, `int`, `bigint`,
//! `counter`, `double`, `boolean`, `uuid`, and timestamps in the usual layout.
//!
//! The general path converts into an [`super::Encoded`] and then copies it behind its length
//! prefix; this one writes the prefix and the bytes with one `put_slice`. Each case calls the
//! same conversion as the general path, so the bytes and the errors are the same (the golden
//! vectors and property tests of `tests.rs` go through it); any other pair, and any timestamp
//! outside the usual layout, returns `None` for the general path.

use super::{number, simple, temporal, EncodeError, EncodeOptions};
use crate::cql::literal::Literal;
use crate::types::ColumnType;
use bytes::BufMut;

/// Encodes `lit` as a `[value]` of `ty` when the pair is a common scalar one.
#[inline]
pub(super) fn encode(
    lit: &Literal<'_>,
    ty: &ColumnType,
    opts: &EncodeOptions,
    out: &mut impl BufMut,
) -> Option<Result<(), EncodeError>> {
    // Length prefix and body, at most 4 + 16 bytes.
    let mut buf = [0u8; 20];
    let n = match (ty, lit) {
        (ColumnType::Varchar, Literal::String(s)) => return text(s.as_bytes(), out),
        (ColumnType::Ascii, Literal::String(s)) if s.is_ascii() => return text(s.as_bytes(), out),
        (ColumnType::Int, Literal::Integer(t)) => {
            match number::parse_int_in(t, ty, i32::MIN.into(), i32::MAX.into()) {
                Ok(v) => framed(&mut buf, (v as i32).to_be_bytes()),
                Err(e) => return Some(Err(e)),
            }
        }
        (ColumnType::Bigint | ColumnType::Counter, Literal::Integer(t)) => {
            match number::parse_int_in(t, ty, i64::MIN, i64::MAX) {
                Ok(v) => framed(&mut buf, v.to_be_bytes()),
                Err(e) => return Some(Err(e)),
            }
        }
        (ColumnType::Double, Literal::Float(t)) => match number::double_value(t, ty) {
            Ok(v) => framed(&mut buf, number::f64_bits(v).to_be_bytes()),
            Err(e) => return Some(Err(e)),
        },
        (ColumnType::Boolean, Literal::Boolean(b)) => framed(&mut buf, [u8::from(*b)]),
        (ColumnType::Uuid, Literal::Uuid(t)) => match simple::parse_uuid(t, ty) {
            Ok(u) => framed(&mut buf, u),
            Err(e) => return Some(Err(e)),
        },
        (ColumnType::Timestamp, Literal::String(s)) => {
            framed(&mut buf, temporal::common_timestamp(s, opts)?.to_be_bytes())
        }
        _ => return None,
    };
    out.put_slice(&buf[..n]);
    Some(Ok(()))
}

/// Writes the `[int]` length of `body` then `body` into `buf`; the bytes written.
#[inline(always)]
fn framed<const N: usize>(buf: &mut [u8; 20], body: [u8; N]) -> usize {
    buf[..4].copy_from_slice(&(N as i32).to_be_bytes());
    buf[4..4 + N].copy_from_slice(&body);
    4 + N
}

/// Text and ascii: the bytes as they are.
#[inline]
fn text(bytes: &[u8], out: &mut impl BufMut) -> Option<Result<(), EncodeError>> {
    // Too long for a `[value]`: the general path says so.
    let len = i32::try_from(bytes.len()).ok()?;
    out.put_i32(len);
    out.put_slice(bytes);
    Some(Ok(()))
}
