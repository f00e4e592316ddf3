//! PREPARE (spec section 4.1.5): the query, and from v5 flags with an optional keyspace.

use crate::envelope::ProtocolVersion;
use crate::error::DecodeError;
use crate::primitives::{
    read_int, read_long_string_bytes, read_string, write_long_string, write_string, EncodeLenError,
};
use bytes::BufMut;

/// PREPARE flag (v5): a keyspace follows.
pub const WITH_KEYSPACE: u32 = 0x01;

/// A PREPARE body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrepareView<'a> {
    pub query: &'a [u8],
    /// v5 only.
    pub keyspace: Option<&'a str>,
}

impl<'a> PrepareView<'a> {
    /// Reads a PREPARE message.
    pub fn parse(mut body: &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let query = read_long_string_bytes(&mut body)?;
        let mut keyspace = None;
        if version >= ProtocolVersion::V5 {
            let flags = read_int(&mut body)? as u32;
            if flags & WITH_KEYSPACE != 0 {
                keyspace = Some(read_string(&mut body)?);
            }
        }
        Ok(PrepareView { query, keyspace })
    }
}

/// Writes a PREPARE body; `keyspace` is only sent on v5.
pub fn encode_prepare(
    version: ProtocolVersion,
    query: &[u8],
    keyspace: Option<&str>,
    out: &mut impl BufMut,
) -> Result<(), EncodeLenError> {
    write_long_string(out, query)?;
    if version >= ProtocolVersion::V5 {
        match keyspace {
            Some(k) => {
                out.put_u32(WITH_KEYSPACE);
                write_string(out, k)?;
            }
            None => out.put_u32(0),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for (v, ks) in [
            (ProtocolVersion::V4, None),
            (ProtocolVersion::V5, Some("ks")),
            (ProtocolVersion::V5, None),
        ] {
            let mut out = Vec::new();
            encode_prepare(v, b"SELECT * FROM t WHERE k = ?", ks, &mut out).unwrap();
            let p = PrepareView::parse(&out, v).unwrap();
            assert_eq!(p.query, b"SELECT * FROM t WHERE k = ?");
            assert_eq!(p.keyspace, ks);
        }
    }
}
