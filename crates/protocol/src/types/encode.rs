//! Encoding of a CQL literal into the bytes of a bound `[value]` for a given type, exactly as
//! the server would have converted the literal itself (issue 4).

use crate::cql::literal::Literal;
use crate::types::ColumnType;
use bytes::BufMut;
use thiserror::Error;

/// Why a literal cannot be encoded for a type; the QUERY then goes through unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// Not implemented yet.
    #[error("encoding of this literal for {ty} is not supported")]
    Unsupported { ty: &'static str },
}

/// Appends `lit` encoded as a `[value]` (with its `[int]` length prefix) of type `ty` to `out`.
pub fn encode_literal(
    lit: &Literal<'_>,
    ty: &ColumnType,
    out: &mut impl BufMut,
) -> Result<(), EncodeError> {
    let _ = (lit, ty, out);
    Err(EncodeError::Unsupported { ty: "any" })
}
