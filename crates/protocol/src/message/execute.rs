//! EXECUTE (spec section 4.1.6): the prepared id, from v5 the result metadata id, then the
//! query parameters.

use super::query::QueryParams;
use crate::envelope::ProtocolVersion;
use crate::error::DecodeError;
use crate::primitives::{read_short_bytes, write_short_bytes, EncodeLenError};
use bytes::BufMut;

/// An EXECUTE body.
#[derive(Debug, Clone, Copy)]
pub struct ExecuteView<'a> {
    pub id: &'a [u8],
    /// v5 only.
    pub result_metadata_id: Option<&'a [u8]>,
    pub params: QueryParams<'a>,
}

impl<'a> ExecuteView<'a> {
    /// Reads an EXECUTE message.
    pub fn parse(mut body: &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let id = read_short_bytes(&mut body)?;
        let result_metadata_id = if version >= ProtocolVersion::V5 {
            Some(read_short_bytes(&mut body)?)
        } else {
            None
        };
        let params = QueryParams::read(&mut body, version)?;
        Ok(ExecuteView {
            id,
            result_metadata_id,
            params,
        })
    }

    /// The prepared id alone (the body's first field, in every version), without reading the
    /// parameters: enough to tell whether the statement is one the caller knows.
    pub fn id_of(mut body: &'a [u8]) -> Result<&'a [u8], DecodeError> {
        read_short_bytes(&mut body)
    }
}

/// Writes an EXECUTE body. `result_metadata_id` is required on v5 and ignored before.
pub fn encode_execute(
    version: ProtocolVersion,
    id: &[u8],
    result_metadata_id: &[u8],
    params: &QueryParams<'_>,
    out: &mut impl BufMut,
) -> Result<(), EncodeLenError> {
    write_short_bytes(out, id)?;
    if version >= ProtocolVersion::V5 {
        write_short_bytes(out, result_metadata_id)?;
    }
    params.write(version, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let params = QueryParams {
            consistency: 1,
            page_size: Some(100),
            ..Default::default()
        };
        for v in [ProtocolVersion::V4, ProtocolVersion::V5] {
            let mut out = Vec::new();
            encode_execute(v, &[1, 2, 3], &[9; 16], &params, &mut out).unwrap();
            let e = ExecuteView::parse(&out, v).unwrap();
            assert_eq!(ExecuteView::id_of(&out).unwrap(), e.id);
            assert_eq!(e.id, &[1, 2, 3]);
            assert_eq!(e.params.page_size, Some(100));
            assert_eq!(e.result_metadata_id.is_some(), v == ProtocolVersion::V5);
        }
    }
}
