//! BATCH (spec section 4.1.7): a type, children (query text or prepared id, each with its own
//! values), then consistency, flags and the optional serial consistency, timestamp and (v5)
//! keyspace and now_in_seconds.

use super::query::{flags, Values};
use crate::envelope::ProtocolVersion;
use crate::error::DecodeError;
use crate::primitives::{
    read_int, read_long, read_long_string_bytes, read_short, read_short_bytes, read_string,
    read_u8, write_long_string, write_short_bytes, write_string, EncodeLenError,
};
use bytes::BufMut;

/// One statement of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchQuery<'a> {
    /// Kind 0: query text.
    Text(&'a [u8]),
    /// Kind 1: a prepared id.
    Prepared(&'a [u8]),
}

/// One child of a batch with its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchChild<'a> {
    pub query: BatchQuery<'a>,
    pub values: Values<'a>,
}

/// The parameters that follow the children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchParams<'a> {
    pub consistency: u16,
    /// The flags as sent.
    pub flags: u32,
    pub serial_consistency: Option<u16>,
    pub default_timestamp: Option<i64>,
    pub keyspace: Option<&'a str>,
    pub now_in_seconds: Option<i32>,
}

/// A BATCH body: children are read lazily from `children_raw`.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    /// 0 logged, 1 unlogged, 2 counter.
    pub batch_type: u8,
    pub count: u16,
    children_raw: &'a [u8],
    named: bool,
    pub params: BatchParams<'a>,
}

fn read_child<'a>(buf: &mut &'a [u8], named: bool) -> Result<BatchChild<'a>, DecodeError> {
    let query = match read_u8(buf)? {
        0 => BatchQuery::Text(read_long_string_bytes(buf)?),
        1 => BatchQuery::Prepared(read_short_bytes(buf)?),
        other => {
            return Err(DecodeError::UnknownValue {
                what: "batch child kind",
                value: other.into(),
            })
        }
    };
    let count = read_short(buf)?;
    let start = *buf;
    for _ in 0..count {
        if named {
            read_string(buf)?;
        }
        crate::primitives::read_value(buf)?;
    }
    Ok(BatchChild {
        query,
        values: Values {
            count,
            named,
            raw: &start[..start.len() - buf.len()],
        },
    })
}

impl<'a> BatchView<'a> {
    /// Reads a BATCH message.
    pub fn parse(mut body: &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let batch_type = read_u8(&mut body)?;
        let count = read_short(&mut body)?;
        // The names flag comes after the children, so find the end first assuming no names
        // (Cassandra rejects named values in batches), then re-check once the flags are known.
        let start = body;
        for _ in 0..count {
            read_child(&mut body, false)?;
        }
        let children_raw = &start[..start.len() - body.len()];
        let consistency = read_short(&mut body)?;
        let f = if version >= ProtocolVersion::V5 {
            read_int(&mut body)? as u32
        } else {
            u32::from(read_u8(&mut body)?)
        };
        let has = |b: u32| f & b != 0;
        if has(flags::NAMES_FOR_VALUES) {
            return Err(DecodeError::Malformed {
                what: "batch",
                reason: "named values are not supported in batches",
            });
        }
        let serial_consistency = has(flags::SERIAL_CONSISTENCY)
            .then(|| read_short(&mut body))
            .transpose()?;
        let default_timestamp = has(flags::DEFAULT_TIMESTAMP)
            .then(|| read_long(&mut body))
            .transpose()?;
        let v5 = version >= ProtocolVersion::V5;
        let keyspace = (v5 && has(flags::KEYSPACE))
            .then(|| read_string(&mut body))
            .transpose()?;
        let now_in_seconds = (v5 && has(flags::NOW_IN_SECONDS))
            .then(|| read_int(&mut body))
            .transpose()?;
        Ok(BatchView {
            batch_type,
            count,
            children_raw,
            named: false,
            params: BatchParams {
                consistency,
                flags: f,
                serial_consistency,
                default_timestamp,
                keyspace,
                now_in_seconds,
            },
        })
    }

    /// Iterates over the children.
    pub fn children(&self) -> impl Iterator<Item = Result<BatchChild<'a>, DecodeError>> {
        let mut rest = self.children_raw;
        let named = self.named;
        (0..self.count).map(move |_| read_child(&mut rest, named))
    }
}

/// Writes a BATCH body.
pub fn encode_batch<'c>(
    version: ProtocolVersion,
    batch_type: u8,
    children: &[BatchChild<'c>],
    params: &BatchParams<'_>,
    out: &mut impl BufMut,
) -> Result<(), EncodeLenError> {
    out.put_u8(batch_type);
    let n = u16::try_from(children.len()).map_err(|_| EncodeLenError {
        what: "batch children",
        len: children.len(),
    })?;
    out.put_u16(n);
    for c in children {
        match c.query {
            BatchQuery::Text(q) => {
                out.put_u8(0);
                write_long_string(out, q)?;
            }
            BatchQuery::Prepared(id) => {
                out.put_u8(1);
                write_short_bytes(out, id)?;
            }
        }
        out.put_u16(c.values.count);
        out.put_slice(c.values.raw);
    }
    let v5 = version >= ProtocolVersion::V5;
    let set = |cond: bool, bit: u32| if cond { bit } else { 0 };
    let f = set(
        params.serial_consistency.is_some(),
        flags::SERIAL_CONSISTENCY,
    ) | set(params.default_timestamp.is_some(), flags::DEFAULT_TIMESTAMP)
        | set(v5 && params.keyspace.is_some(), flags::KEYSPACE)
        | set(v5 && params.now_in_seconds.is_some(), flags::NOW_IN_SECONDS);
    out.put_u16(params.consistency);
    if v5 {
        out.put_u32(f);
    } else {
        out.put_u8(f as u8);
    }
    if let Some(s) = params.serial_consistency {
        out.put_u16(s);
    }
    if let Some(t) = params.default_timestamp {
        out.put_i64(t);
    }
    if v5 {
        if let Some(k) = params.keyspace {
            write_string(out, k)?;
        }
        if let Some(n) = params.now_in_seconds {
            out.put_i32(n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let mut raw = Vec::new();
        crate::primitives::write_bytes(&mut raw, Some(b"x")).unwrap();
        let children = [
            BatchChild {
                query: BatchQuery::Text(b"INSERT INTO t (k) VALUES (?)"),
                values: Values {
                    count: 1,
                    named: false,
                    raw: &raw,
                },
            },
            BatchChild {
                query: BatchQuery::Prepared(&[7; 16]),
                values: Values {
                    count: 0,
                    named: false,
                    raw: &[],
                },
            },
        ];
        for v in [ProtocolVersion::V4, ProtocolVersion::V5] {
            let params = BatchParams {
                consistency: 4,
                flags: 0,
                serial_consistency: Some(8),
                default_timestamp: Some(42),
                keyspace: (v == ProtocolVersion::V5).then_some("ks"),
                now_in_seconds: None,
            };
            let mut out = Vec::new();
            encode_batch(v, 1, &children, &params, &mut out).unwrap();
            let b = BatchView::parse(&out, v).unwrap();
            assert_eq!(b.batch_type, 1);
            let back: Vec<_> = b.children().map(|c| c.unwrap()).collect();
            assert_eq!(back, children);
            assert_eq!(b.params.default_timestamp, Some(42));
            assert_eq!(b.params.keyspace, params.keyspace);
        }
    }

    proptest! {
        #[test]
        fn parse_is_total(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(b) = BatchView::parse(&data, ProtocolVersion::V4) {
                for c in b.children() { let _ = c; }
            }
        }
    }
}
