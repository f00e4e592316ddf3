//! QUERY (spec section 4.1.4) and the query parameters it shares with EXECUTE.
//!
//! Layout: `[long string]` query, then `[consistency]`, flags (a byte before v5, an `[int]`
//! from v5), then the fields the flags announce, in flag order.

use crate::envelope::{Header, ProtocolVersion};
use crate::error::DecodeError;
use crate::message::RequestBody;
use crate::primitives::{
    read_int, read_long, read_long_string_bytes, read_short, read_string, read_u8, read_value,
    write_long_string, write_string, EncodeLenError, Value,
};
use bytes::BufMut;

/// Query flags (spec section 4.1.4).
pub mod flags {
    pub const VALUES: u32 = 0x01;
    pub const SKIP_METADATA: u32 = 0x02;
    pub const PAGE_SIZE: u32 = 0x04;
    pub const PAGING_STATE: u32 = 0x08;
    pub const SERIAL_CONSISTENCY: u32 = 0x10;
    pub const DEFAULT_TIMESTAMP: u32 = 0x20;
    pub const NAMES_FOR_VALUES: u32 = 0x40;
    /// v5 only.
    pub const KEYSPACE: u32 = 0x80;
    /// v5 only.
    pub const NOW_IN_SECONDS: u32 = 0x100;
}

/// The bound values of a request, kept raw and read on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Values<'a> {
    /// How many values there are.
    pub count: u16,
    /// True when each value is preceded by a `[string]` name.
    pub named: bool,
    /// The encoded values (without the leading count).
    pub raw: &'a [u8],
}

impl<'a> Values<'a> {
    fn read(buf: &mut &'a [u8], named: bool) -> Result<Self, DecodeError> {
        let count = read_short(buf)?;
        let start = *buf;
        for _ in 0..count {
            if named {
                read_string(buf)?;
            }
            read_value(buf)?;
        }
        Ok(Values {
            count,
            named,
            raw: &start[..start.len() - buf.len()],
        })
    }

    /// Iterates over `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = Result<(Option<&'a str>, Value<'a>), DecodeError>> {
        let mut rest = self.raw;
        let named = self.named;
        (0..self.count).map(move |_| {
            let name = if named {
                Some(read_string(&mut rest)?)
            } else {
                None
            };
            Ok((name, read_value(&mut rest)?))
        })
    }
}

/// The parameters of a QUERY or EXECUTE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueryParams<'a> {
    /// `[consistency]`.
    pub consistency: u16,
    /// The flags as sent; the optional fields below agree with them.
    pub flags: u32,
    pub values: Option<Values<'a>>,
    pub page_size: Option<i32>,
    pub paging_state: Option<&'a [u8]>,
    pub serial_consistency: Option<u16>,
    pub default_timestamp: Option<i64>,
    /// v5 only.
    pub keyspace: Option<&'a str>,
    /// v5 only.
    pub now_in_seconds: Option<i32>,
}

impl<'a> QueryParams<'a> {
    /// Reads query parameters.
    pub fn read(buf: &mut &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let consistency = read_short(buf)?;
        let flags = if version >= ProtocolVersion::V5 {
            read_int(buf)? as u32
        } else {
            u32::from(read_u8(buf)?)
        };
        let has = |f: u32| flags & f != 0;
        let values = if has(flags::VALUES) {
            Some(Values::read(buf, has(flags::NAMES_FOR_VALUES))?)
        } else {
            None
        };
        let page_size = has(flags::PAGE_SIZE).then(|| read_int(buf)).transpose()?;
        let paging_state = if has(flags::PAGING_STATE) {
            crate::primitives::read_bytes(buf)?
        } else {
            None
        };
        let serial_consistency = has(flags::SERIAL_CONSISTENCY)
            .then(|| read_short(buf))
            .transpose()?;
        let default_timestamp = has(flags::DEFAULT_TIMESTAMP)
            .then(|| read_long(buf))
            .transpose()?;
        let v5 = version >= ProtocolVersion::V5;
        let keyspace = (v5 && has(flags::KEYSPACE))
            .then(|| read_string(buf))
            .transpose()?;
        let now_in_seconds = (v5 && has(flags::NOW_IN_SECONDS))
            .then(|| read_int(buf))
            .transpose()?;
        Ok(QueryParams {
            consistency,
            flags,
            values,
            page_size,
            paging_state,
            serial_consistency,
            default_timestamp,
            keyspace,
            now_in_seconds,
        })
    }

    /// Writes the parameters. The flags written are derived from the fields present plus
    /// `SKIP_METADATA` and `NAMES_FOR_VALUES` as recorded in `self.flags`/`values`.
    pub fn write(
        &self,
        version: ProtocolVersion,
        out: &mut impl BufMut,
    ) -> Result<(), EncodeLenError> {
        let mut f = self.flags & flags::SKIP_METADATA;
        if let Some(v) = &self.values {
            f |= flags::VALUES;
            if v.named {
                f |= flags::NAMES_FOR_VALUES;
            }
        }
        let v5 = version >= ProtocolVersion::V5;
        let set = |cond: bool, bit: u32| if cond { bit } else { 0 };
        f |= set(self.page_size.is_some(), flags::PAGE_SIZE)
            | set(self.paging_state.is_some(), flags::PAGING_STATE)
            | set(self.serial_consistency.is_some(), flags::SERIAL_CONSISTENCY)
            | set(self.default_timestamp.is_some(), flags::DEFAULT_TIMESTAMP)
            | set(v5 && self.keyspace.is_some(), flags::KEYSPACE)
            | set(v5 && self.now_in_seconds.is_some(), flags::NOW_IN_SECONDS);
        out.put_u16(self.consistency);
        if v5 {
            out.put_u32(f);
        } else {
            // Before v5 only the low byte exists; v5-only bits are never set here.
            out.put_u8(f as u8);
        }
        if let Some(v) = &self.values {
            out.put_u16(v.count);
            out.put_slice(v.raw);
        }
        if let Some(p) = self.page_size {
            out.put_i32(p);
        }
        if let Some(p) = self.paging_state {
            crate::primitives::write_bytes(out, Some(p))?;
        }
        if let Some(s) = self.serial_consistency {
            out.put_u16(s);
        }
        if let Some(t) = self.default_timestamp {
            out.put_i64(t);
        }
        if v5 {
            if let Some(k) = self.keyspace {
                write_string(out, k)?;
            }
            if let Some(n) = self.now_in_seconds {
                out.put_i32(n);
            }
        }
        Ok(())
    }
}

/// A QUERY body.
#[derive(Debug, Clone, Copy)]
pub struct QueryView<'a> {
    /// The statement text, not yet checked for UTF-8.
    pub query: &'a [u8],
    pub params: QueryParams<'a>,
}

impl<'a> QueryView<'a> {
    /// Reads a QUERY message (body prefix already split off).
    pub fn parse(mut body: &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let query = read_long_string_bytes(&mut body)?;
        let params = QueryParams::read(&mut body, version)?;
        Ok(QueryView { query, params })
    }
}

/// A whole QUERY request: the body's prefix and the QUERY message, parsed once for everyone
/// on the request path who looks at it.
#[derive(Debug, Clone, Copy)]
pub struct QueryRequest<'a> {
    pub body: RequestBody<'a>,
    pub query: QueryView<'a>,
}

impl<'a> QueryRequest<'a> {
    /// Reads a QUERY request's (uncompressed) body.
    pub fn parse(header: &Header, body: &'a [u8]) -> Result<Self, DecodeError> {
        let body = RequestBody::parse(header, body)?;
        let query = QueryView::parse(body.message, header.version)?;
        Ok(QueryRequest { body, query })
    }
}

/// Writes a QUERY message body.
pub fn encode_query(
    version: ProtocolVersion,
    query: &[u8],
    params: &QueryParams<'_>,
    out: &mut impl BufMut,
) -> Result<(), EncodeLenError> {
    write_long_string(out, query)?;
    params.write(version, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type ParamsTuple = (
        u16,
        bool,
        Option<i32>,
        Option<Vec<u8>>,
        Option<u16>,
        Option<i64>,
        Option<String>,
        Option<i32>,
        bool,
    );

    fn arb_params() -> impl Strategy<Value = ParamsTuple> {
        (
            any::<u16>(),
            any::<bool>(),
            proptest::option::of(any::<i32>()),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            proptest::option::of(any::<u16>()),
            proptest::option::of(any::<i64>()),
            proptest::option::of("[a-z]{1,10}"),
            proptest::option::of(any::<i32>()),
            any::<bool>(),
        )
    }

    proptest! {
        #[test]
        fn round_trip((consistency, skip, page, state, serial, ts, ks, now, with_values) in arb_params(), v5 in any::<bool>()) {
            let version = if v5 { ProtocolVersion::V5 } else { ProtocolVersion::V4 };
            let mut raw = Vec::new();
            crate::primitives::write_value(&mut raw, Value::Bytes(b"abc")).unwrap();
            crate::primitives::write_value(&mut raw, Value::Null).unwrap();
            let params = QueryParams {
                consistency,
                flags: if skip { flags::SKIP_METADATA } else { 0 },
                values: with_values.then_some(Values { count: 2, named: false, raw: &raw }),
                page_size: page,
                paging_state: state.as_deref(),
                serial_consistency: serial,
                default_timestamp: ts,
                keyspace: if v5 { ks.as_deref() } else { None },
                now_in_seconds: if v5 { now } else { None },
            };
            let mut out = Vec::new();
            encode_query(version, b"SELECT 1", &params, &mut out).unwrap();
            let back = QueryView::parse(&out, version).unwrap();
            prop_assert_eq!(back.query, b"SELECT 1");
            let mut expect = params;
            let mut out2 = Vec::new();
            back.params.write(version, &mut out2).unwrap();
            prop_assert_eq!(&out2[..], &out[12..]);
            expect.flags = back.params.flags;
            prop_assert_eq!(back.params, expect);
            if let Some(v) = back.params.values {
                let items: Vec<_> = v.iter().map(|r| r.unwrap()).collect();
                prop_assert_eq!(items, vec![(None, Value::Bytes(b"abc")), (None, Value::Null)]);
            }
        }

        #[test]
        fn parse_is_total(data in proptest::collection::vec(any::<u8>(), 0..80), v5 in any::<bool>()) {
            let version = if v5 { ProtocolVersion::V5 } else { ProtocolVersion::V4 };
            let _ = QueryView::parse(&data, version);
        }
    }
}
