//! Readers and writers for the notation of the native protocol spec, section 3:
//! `[int]`, `[long]`, `[short]`, `[string]`, `[long string]`, `[bytes]`, `[short bytes]`,
//! `[value]`, `[string map]`, `[string multimap]`, `[bytes map]`, `[inet]`, `[consistency]`.
//!
//! Readers borrow: they take `&mut &'a [u8]`, advance it, and return slices of the input.
//! They never allocate and never panic on short or hostile input.

use crate::error::DecodeError;
use bytes::BufMut;

fn take<'a>(buf: &mut &'a [u8], n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
    if buf.len() < n {
        return Err(DecodeError::TooFewBytes {
            what,
            expected: n,
            received: buf.len(),
        });
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Ok(head)
}

/// Reads `n` raw bytes.
pub fn read_raw<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    take(buf, n, "raw bytes")
}

/// Reads a `[byte]`.
pub fn read_u8(buf: &mut &[u8]) -> Result<u8, DecodeError> {
    Ok(take(buf, 1, "byte")?[0])
}

/// Reads a `[short]` (unsigned 16-bit, big-endian).
pub fn read_short(buf: &mut &[u8]) -> Result<u16, DecodeError> {
    let b = take(buf, 2, "short")?;
    Ok(u16::from_be_bytes([b[0], b[1]]))
}

/// Reads an `[int]` (signed 32-bit, big-endian).
pub fn read_int(buf: &mut &[u8]) -> Result<i32, DecodeError> {
    let b = take(buf, 4, "int")?;
    Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Reads a `[long]` (signed 64-bit, big-endian).
pub fn read_long(buf: &mut &[u8]) -> Result<i64, DecodeError> {
    let b = take(buf, 8, "long")?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(i64::from_be_bytes(a))
}

fn non_negative(len: i32, what: &'static str) -> Result<usize, DecodeError> {
    usize::try_from(len).map_err(|_| DecodeError::NegativeLength { what, length: len })
}

fn utf8<'a>(b: &'a [u8], what: &'static str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(b).map_err(|_| DecodeError::InvalidUtf8 { what })
}

/// Reads a `[string]`: a `[short]` length then UTF-8 bytes.
pub fn read_string<'a>(buf: &mut &'a [u8]) -> Result<&'a str, DecodeError> {
    let n = read_short(buf)? as usize;
    utf8(take(buf, n, "string")?, "string")
}

/// Reads a `[long string]`: an `[int]` length then UTF-8 bytes.
pub fn read_long_string<'a>(buf: &mut &'a [u8]) -> Result<&'a str, DecodeError> {
    utf8(read_long_string_bytes(buf)?, "long string")
}

/// Reads a `[long string]` without checking UTF-8 (the caller decides what bad UTF-8 means).
pub fn read_long_string_bytes<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let n = non_negative(read_int(buf)?, "long string")?;
    take(buf, n, "long string")
}

/// Reads `[bytes]`: an `[int]` length then bytes; a negative length is `None` (null).
pub fn read_bytes<'a>(buf: &mut &'a [u8]) -> Result<Option<&'a [u8]>, DecodeError> {
    let n = read_int(buf)?;
    if n < 0 {
        return Ok(None);
    }
    take(buf, n as usize, "bytes").map(Some)
}

/// Reads `[short bytes]`: a `[short]` length then bytes.
pub fn read_short_bytes<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let n = read_short(buf)? as usize;
    take(buf, n, "short bytes")
}

/// A `[value]`: bytes, null (-1) or, from protocol v4, unset (-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// A present value (possibly empty).
    Bytes(&'a [u8]),
    /// Length -1.
    Null,
    /// Length -2.
    Unset,
}

/// Reads a `[value]`.
pub fn read_value<'a>(buf: &mut &'a [u8]) -> Result<Value<'a>, DecodeError> {
    match read_int(buf)? {
        -1 => Ok(Value::Null),
        -2 => Ok(Value::Unset),
        n if n < 0 => Err(DecodeError::NegativeLength {
            what: "value",
            length: n,
        }),
        n => take(buf, n as usize, "value").map(Value::Bytes),
    }
}

/// Reads a `[string map]`, calling `f` for each entry (no allocation).
pub fn read_string_map<'a>(
    buf: &mut &'a [u8],
    mut f: impl FnMut(&'a str, &'a str),
) -> Result<(), DecodeError> {
    let n = read_short(buf)?;
    for _ in 0..n {
        let k = read_string(buf)?;
        let v = read_string(buf)?;
        f(k, v);
    }
    Ok(())
}

/// Reads a `[string multimap]`, calling `f` for each key with its `[string list]` still unread.
pub fn read_string_multimap<'a>(
    buf: &mut &'a [u8],
    mut f: impl FnMut(&'a str, &mut StringList<'a>),
) -> Result<(), DecodeError> {
    let n = read_short(buf)?;
    for _ in 0..n {
        let k = read_string(buf)?;
        let mut list = StringList::read(buf)?;
        f(k, &mut list);
        // Drain whatever the callback did not read so the outer cursor stays valid.
        for item in list.by_ref() {
            item?;
        }
    }
    Ok(())
}

/// A lazily read `[string list]`.
#[derive(Debug, Clone)]
pub struct StringList<'a> {
    rest: &'a [u8],
    remaining: u16,
}

impl<'a> StringList<'a> {
    /// Reads the list header and borrows the list body; `buf` is advanced past the whole list.
    pub fn read(buf: &mut &'a [u8]) -> Result<Self, DecodeError> {
        let n = read_short(buf)?;
        let start = *buf;
        for _ in 0..n {
            read_string(buf)?;
        }
        let used = start.len() - buf.len();
        Ok(StringList {
            rest: &start[..used],
            remaining: n,
        })
    }
}

impl<'a> Iterator for StringList<'a> {
    type Item = Result<&'a str, DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        Some(read_string(&mut self.rest))
    }
}

/// Reads a `[bytes map]` (custom payload), calling `f` for each entry.
pub fn read_bytes_map<'a>(
    buf: &mut &'a [u8],
    mut f: impl FnMut(&'a str, Option<&'a [u8]>),
) -> Result<(), DecodeError> {
    let n = read_short(buf)?;
    for _ in 0..n {
        let k = read_string(buf)?;
        let v = read_bytes(buf)?;
        f(k, v);
    }
    Ok(())
}

/// Reads an `[inet]`: one byte of address length (4 or 16), the address, then an `[int]` port.
pub fn read_inet(buf: &mut &[u8]) -> Result<std::net::SocketAddr, DecodeError> {
    let n = read_u8(buf)?;
    let ip: std::net::IpAddr = match n {
        4 => {
            let b = take(buf, 4, "inet")?;
            std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).into()
        }
        16 => {
            let b = take(buf, 16, "inet")?;
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            std::net::Ipv6Addr::from(a).into()
        }
        other => {
            return Err(DecodeError::UnknownValue {
                what: "inet address length",
                value: other.into(),
            })
        }
    };
    let port = read_int(buf)?;
    let port = u16::try_from(port).map_err(|_| DecodeError::Malformed {
        what: "inet",
        reason: "port out of range",
    })?;
    Ok(std::net::SocketAddr::new(ip, port))
}

/// Writes a `[short]`.
pub fn write_short(out: &mut impl BufMut, v: u16) {
    out.put_u16(v);
}

/// Writes an `[int]`.
pub fn write_int(out: &mut impl BufMut, v: i32) {
    out.put_i32(v);
}

/// Writes a `[long]`.
pub fn write_long(out: &mut impl BufMut, v: i64) {
    out.put_i64(v);
}

/// Length of a slice as a protocol `[short]`, or an error when it does not fit.
fn short_len(len: usize, what: &'static str) -> Result<u16, EncodeLenError> {
    u16::try_from(len).map_err(|_| EncodeLenError { what, len })
}

fn int_len(len: usize, what: &'static str) -> Result<i32, EncodeLenError> {
    i32::try_from(len).map_err(|_| EncodeLenError { what, len })
}

/// A structure was too long for its length field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} of {len} bytes does not fit its length field")]
pub struct EncodeLenError {
    /// What was being written.
    pub what: &'static str,
    /// Its length.
    pub len: usize,
}

/// Writes a `[string]`.
pub fn write_string(out: &mut impl BufMut, s: &str) -> Result<(), EncodeLenError> {
    out.put_u16(short_len(s.len(), "string")?);
    out.put_slice(s.as_bytes());
    Ok(())
}

/// Writes a `[long string]` from raw bytes.
pub fn write_long_string(out: &mut impl BufMut, s: &[u8]) -> Result<(), EncodeLenError> {
    out.put_i32(int_len(s.len(), "long string")?);
    out.put_slice(s);
    Ok(())
}

/// Writes `[short bytes]`.
pub fn write_short_bytes(out: &mut impl BufMut, b: &[u8]) -> Result<(), EncodeLenError> {
    out.put_u16(short_len(b.len(), "short bytes")?);
    out.put_slice(b);
    Ok(())
}

/// Writes `[bytes]`; `None` is null.
pub fn write_bytes(out: &mut impl BufMut, b: Option<&[u8]>) -> Result<(), EncodeLenError> {
    match b {
        None => out.put_i32(-1),
        Some(b) => {
            out.put_i32(int_len(b.len(), "bytes")?);
            out.put_slice(b);
        }
    }
    Ok(())
}

/// Writes a `[value]`.
pub fn write_value(out: &mut impl BufMut, v: Value<'_>) -> Result<(), EncodeLenError> {
    match v {
        Value::Bytes(b) => write_bytes(out, Some(b)),
        Value::Null => {
            out.put_i32(-1);
            Ok(())
        }
        Value::Unset => {
            out.put_i32(-2);
            Ok(())
        }
    }
}

/// Writes a `[string map]`.
pub fn write_string_map<'s>(
    out: &mut impl BufMut,
    entries: &[(&'s str, &'s str)],
) -> Result<(), EncodeLenError> {
    out.put_u16(short_len(entries.len(), "string map")?);
    for (k, v) in entries {
        write_string(out, k)?;
        write_string(out, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_input_is_an_error_not_a_panic() {
        let mut b: &[u8] = &[0, 5, b'a'];
        assert!(matches!(
            read_string(&mut b),
            Err(DecodeError::TooFewBytes { .. })
        ));
        let mut b: &[u8] = &[0xff, 0xff, 0xff, 0xf0];
        assert!(matches!(
            read_long_string(&mut b),
            Err(DecodeError::NegativeLength { .. })
        ));
    }

    #[test]
    fn value_null_and_unset() {
        let mut b: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe];
        assert_eq!(read_value(&mut b).unwrap(), Value::Null);
        assert_eq!(read_value(&mut b).unwrap(), Value::Unset);
    }

    #[test]
    fn multimap_reads_every_list() {
        let mut out = Vec::new();
        out.put_u16(2);
        write_string(&mut out, "A").unwrap();
        out.put_u16(2);
        write_string(&mut out, "x").unwrap();
        write_string(&mut out, "y").unwrap();
        write_string(&mut out, "B").unwrap();
        out.put_u16(0);
        let mut seen = Vec::new();
        let mut b = &out[..];
        read_string_multimap(&mut b, |k, l| {
            // read only the first element; the rest must be skipped correctly
            seen.push((k, l.next().map(|r| r.unwrap())));
        })
        .unwrap();
        assert!(b.is_empty());
        assert_eq!(seen, vec![("A", Some("x")), ("B", None)]);
    }

    proptest! {
        #[test]
        fn string_round_trip(s in ".{0,300}") {
            let mut out = Vec::new();
            write_string(&mut out, &s).unwrap();
            let mut b = &out[..];
            prop_assert_eq!(read_string(&mut b).unwrap(), s.as_str());
            prop_assert!(b.is_empty());
        }

        #[test]
        fn bytes_round_trip(v in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300))) {
            let mut out = Vec::new();
            write_bytes(&mut out, v.as_deref()).unwrap();
            let mut b = &out[..];
            prop_assert_eq!(read_bytes(&mut b).unwrap(), v.as_deref());
        }

        #[test]
        fn readers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut b = &data[..];
            let _ = read_string(&mut b);
            let mut b = &data[..];
            let _ = read_value(&mut b);
            let mut b = &data[..];
            let _ = read_string_multimap(&mut b, |_, _| {});
            let mut b = &data[..];
            let _ = read_inet(&mut b);
        }
    }
}
