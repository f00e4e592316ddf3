//! Encoding of a CQL literal into the bytes of a bound `[value]` for a given type, exactly as
//! the server would have converted the literal itself (issue 4; `cql-facts.md` section 4).
//!
//! The reference is Cassandra 5.0's own conversion path: `Constants.Literal.testAssignment`
//! decides which literal kinds a type accepts, then `AbstractType.fromString` (or the
//! `Lists`/`Sets`/`Maps`/`Tuples`/`UserTypes`/`Vectors` literal classes) builds the bytes. Every
//! conversion here mirrors one of those; where reproducing the server exactly would need its
//! context (clock, JVM time zone, DNS, time-zone database, unknown custom classes) or where the
//! server's behaviour is not deterministic, the encoder refuses and the caller sends the
//! original QUERY unchanged. A refusal is always safe; a wrong encoding is not, so anything not
//! understood is refused.
//!
//! # Output and errors
//! [`encode_literal`] appends one whole `[value]` (4-byte length, then the bytes; `null` is
//! length -1). On error **nothing** is appended: scalars are converted on the stack before the
//! first byte is written and collections are built in a scratch buffer. Scalars never allocate,
//! except varints and decimals beyond 128 bits.

mod collection;
mod direct;
mod number;
pub mod scylla;
mod simple;
mod temporal;
mod vint;

#[cfg(test)]
mod tests;

use crate::cql::literal::Literal;
use crate::types::ColumnType;
use bytes::BufMut;
use thiserror::Error;

pub use temporal::UtcOffset;

/// Settings that change how literals are converted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncodeOptions {
    /// The server JVM's default time zone, when the operator states it. Timestamps written
    /// without a zone (`'2024-01-02 03:04:05'`) are converted in that zone by the server; with
    /// `None` such literals are refused.
    pub server_time_zone: Option<UtcOffset>,
}

/// Why a literal cannot be encoded for a type; the QUERY then goes through unchanged.
///
/// Messages name types and reasons only, never the literal (it is user data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The server's own context decides the value: its clock (`'now'`), its default time zone,
    /// its DNS resolver, its time-zone database, or a custom type's Java class.
    #[error("the value depends on the server's {what}")]
    NeedsServerContext { what: &'static str },
    /// The server would reject this literal for this type (the client gets the server's error).
    #[error("the server rejects this literal for {ty}: {reason}")]
    Rejected {
        ty: &'static str,
        reason: &'static str,
    },
    /// The literal is out of the type's range; the server rejects it too.
    #[error("literal out of range for {ty}")]
    OutOfRange { ty: &'static str },
    /// The server may accept this literal, but the encoder does not reproduce its conversion
    /// exactly (rare forms); refusing keeps the server's behaviour.
    #[error("literal form not reproduced for {ty}: {reason}")]
    Unsupported {
        ty: &'static str,
        reason: &'static str,
    },
}

impl EncodeError {
    /// True when the server would itself reject the literal (the QUERY will fail there too).
    pub fn server_rejects(&self) -> bool {
        matches!(
            self,
            EncodeError::Rejected { .. } | EncodeError::OutOfRange { .. }
        )
    }

    /// A short, bounded label for metrics: one per variant.
    pub fn label(&self) -> &'static str {
        match self {
            EncodeError::NeedsServerContext { .. } => "needs_server_context",
            EncodeError::Rejected { .. } => "rejected",
            EncodeError::OutOfRange { .. } => "out_of_range",
            EncodeError::Unsupported { .. } => "unsupported",
        }
    }
}

/// Appends `lit` encoded as a `[value]` (with its `[int]` length prefix) of type `ty` to `out`.
///
/// On error nothing has been written to `out`.
pub fn encode_literal(
    lit: &Literal<'_>,
    ty: &ColumnType,
    opts: &EncodeOptions,
    out: &mut impl BufMut,
) -> Result<(), EncodeError> {
    if let Some(done) = direct::encode(lit, ty, opts, out) {
        return done;
    }
    match encode_value(lit, ty, opts, 0)? {
        None => out.put_i32(-1),
        // Small values: length prefix and body in one copy (the hot path for scalars).
        Some(Encoded::Inline { mut buf, len }) => {
            buf[..PREFIX].copy_from_slice(&i32::from(len).to_be_bytes());
            out.put_slice(&buf[..PREFIX + usize::from(len)]);
        }
        Some(v) => {
            let len = i32::try_from(v.len()).map_err(|_| too_large(ty))?;
            out.put_i32(len);
            v.write(out);
        }
    }
    Ok(())
}

/// Encodes the items of an `IN (a, b, ...)` list as one `list<T>` `[value]`, the way the
/// rewrite binds `IN ?`. `list_ty` is the type PREPARED reported for the marker.
pub fn encode_in_list(
    items: &[Literal<'_>],
    list_ty: &ColumnType,
    opts: &EncodeOptions,
    out: &mut impl BufMut,
) -> Result<(), EncodeError> {
    let ColumnType::List(elem) = list_ty else {
        return Err(rejected(list_ty, "IN values bind as a list"));
    };
    let body = collection::encode_list_items(items, elem, opts, 0)?;
    let len = i32::try_from(body.len()).map_err(|_| too_large(list_ty))?;
    out.put_i32(len);
    out.put_slice(&body);
    Ok(())
}

/// Collections nested deeper than this are refused (the type parser caps depth too).
const MAX_DEPTH: usize = 64;

/// Room for every fixed-size scalar: the largest is a duration (three 9-byte vints).
const INLINE: usize = 27;

/// Inline values keep 4 bytes in front for the `[value]` length prefix.
const PREFIX: usize = 4;

/// One encoded value, without its length prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Encoded<'a> {
    /// Small values built on the stack: the body is `buf[PREFIX..PREFIX + len]`.
    Inline { buf: [u8; PREFIX + INLINE], len: u8 },
    /// Bytes taken as they are from the literal (text, ascii).
    Borrowed(&'a [u8]),
    /// Validated hex digits (even count), decoded while writing.
    Hex(&'a [u8]),
    /// Large varints and decimals, and collections.
    Owned(Vec<u8>),
}

impl<'a> Encoded<'a> {
    pub(crate) fn inline(bytes: &[u8]) -> Self {
        let mut buf = [0u8; PREFIX + INLINE];
        let n = bytes.len().min(INLINE);
        buf[PREFIX..PREFIX + n].copy_from_slice(&bytes[..n]);
        // n <= INLINE (27) always fits a u8.
        Encoded::Inline { buf, len: n as u8 }
    }

    /// A fixed-size value; the size is known at compile time so the copy is a plain move.
    pub(crate) fn fixed<const N: usize>(bytes: [u8; N]) -> Self {
        let mut buf = [0u8; PREFIX + INLINE];
        let n = N.min(INLINE);
        buf[PREFIX..PREFIX + n].copy_from_slice(&bytes[..n]);
        // n <= INLINE (27) always fits a u8.
        Encoded::Inline { buf, len: n as u8 }
    }

    /// Length of the encoded bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Encoded::Inline { len, .. } => usize::from(*len),
            Encoded::Borrowed(b) => b.len(),
            Encoded::Hex(h) => h.len() / 2,
            Encoded::Owned(v) => v.len(),
        }
    }

    /// Appends the encoded bytes (no length prefix).
    pub(crate) fn write(&self, out: &mut impl BufMut) {
        match self {
            Encoded::Inline { buf, len } => out.put_slice(&buf[PREFIX..PREFIX + usize::from(*len)]),
            Encoded::Borrowed(b) => out.put_slice(b),
            Encoded::Hex(h) => {
                for pair in h.chunks_exact(2) {
                    out.put_u8((hex_val(pair[0]) << 4) | hex_val(pair[1]));
                }
            }
            Encoded::Owned(v) => out.put_slice(v),
        }
    }

    /// Writes into a scratch vector (used by collections).
    pub(crate) fn write_vec(&self, out: &mut Vec<u8>) {
        match self {
            Encoded::Borrowed(b) => out.extend_from_slice(b),
            Encoded::Owned(v) => out.extend_from_slice(v),
            _ => self.write(out),
        }
    }
}

/// Value of an ASCII hex digit already validated by [`simple`].
fn hex_val(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

pub(crate) fn rejected(ty: &ColumnType, reason: &'static str) -> EncodeError {
    EncodeError::Rejected {
        ty: ty.cql_name(),
        reason,
    }
}

pub(crate) fn unsupported(ty: &ColumnType, reason: &'static str) -> EncodeError {
    EncodeError::Unsupported {
        ty: ty.cql_name(),
        reason,
    }
}

pub(crate) fn out_of_range(ty: &ColumnType) -> EncodeError {
    EncodeError::OutOfRange { ty: ty.cql_name() }
}

fn too_large(ty: &ColumnType) -> EncodeError {
    unsupported(ty, "value larger than a [value] can carry")
}

/// Converts a literal into the bytes of a value of type `ty`; `None` is null.
pub(crate) fn encode_value<'l>(
    lit: &'l Literal<'_>,
    ty: &ColumnType,
    opts: &EncodeOptions,
    depth: usize,
) -> Result<Option<Encoded<'l>>, EncodeError> {
    if depth > MAX_DEPTH {
        return Err(unsupported(ty, "nested too deeply"));
    }
    // `(x)` is a parenthesised term unless the receiver is a tuple or UDT (Tuples.Literal).
    if let Literal::Tuple(items) = lit {
        if items.len() == 1 && !matches!(ty, ColumnType::Tuple(_) | ColumnType::Udt { .. }) {
            return encode_value(&items[0], ty, opts, depth + 1);
        }
    }
    if let Literal::Null = lit {
        // Constants.NullLiteral: not assignable to a counter.
        return match ty {
            ColumnType::Counter => Err(rejected(ty, "null counter increment")),
            ColumnType::Custom(_) => Err(EncodeError::NeedsServerContext {
                what: "custom type class",
            }),
            _ => Ok(None),
        };
    }
    let v = match ty {
        ColumnType::Custom(_) => {
            return Err(EncodeError::NeedsServerContext {
                what: "custom type class",
            })
        }
        ColumnType::Tinyint
        | ColumnType::Smallint
        | ColumnType::Int
        | ColumnType::Bigint
        | ColumnType::Counter
        | ColumnType::Varint
        | ColumnType::Decimal
        | ColumnType::Float
        | ColumnType::Double => number::encode(lit, ty)?,
        ColumnType::Ascii
        | ColumnType::Varchar
        | ColumnType::Blob
        | ColumnType::Boolean
        | ColumnType::Uuid
        | ColumnType::Timeuuid
        | ColumnType::Inet => simple::encode(lit, ty)?,
        ColumnType::Timestamp | ColumnType::Date | ColumnType::Time | ColumnType::Duration => {
            temporal::encode(lit, ty, opts)?
        }
        ColumnType::List(_)
        | ColumnType::Set(_)
        | ColumnType::Map(_, _)
        | ColumnType::Tuple(_)
        | ColumnType::Udt { .. }
        | ColumnType::Vector { .. } => collection::encode(lit, ty, opts, depth)?,
    };
    Ok(Some(v))
}

/// The kind of a literal, for "not assignable" reasons.
pub(crate) fn kind_mismatch(ty: &ColumnType, lit: &Literal<'_>) -> EncodeError {
    let reason = match lit {
        Literal::String(_) => "string literal not assignable",
        Literal::Integer(_) => "integer literal not assignable",
        Literal::Float(_) | Literal::NaN | Literal::Infinity { .. } => {
            "float literal not assignable"
        }
        Literal::Boolean(_) => "boolean literal not assignable",
        Literal::Uuid(_) => "uuid literal not assignable",
        Literal::Hex(_) => "blob literal not assignable",
        Literal::Duration(_) => "duration literal not assignable",
        Literal::Null => "null not assignable",
        Literal::List(_) => "list literal not assignable",
        Literal::Set(_) => "set literal not assignable",
        Literal::Map(_) => "map literal not assignable",
        Literal::Tuple(_) => "tuple literal not assignable",
        Literal::Udt(_) => "user type literal not assignable",
    };
    rejected(ty, reason)
}
