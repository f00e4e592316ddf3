//! The typed form of a protocol type `[option]`, as found in PREPARED and Rows metadata.

use crate::error::DecodeError;
use crate::primitives::{read_short, read_string};

/// A CQL type as the server describes it on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnType {
    /// 0x0000 with a Java class name the proxy did not recognise.
    Custom(String),
    Ascii,
    Bigint,
    Blob,
    Boolean,
    Counter,
    Decimal,
    Double,
    Float,
    Int,
    Timestamp,
    Uuid,
    /// `text` / `varchar` (0x000D).
    Varchar,
    Varint,
    Timeuuid,
    Inet,
    Date,
    Time,
    Smallint,
    Tinyint,
    Duration,
    List(Box<ColumnType>),
    Map(Box<ColumnType>, Box<ColumnType>),
    Set(Box<ColumnType>),
    Udt {
        keyspace: String,
        name: String,
        fields: Vec<(String, ColumnType)>,
    },
    Tuple(Vec<ColumnType>),
    /// `vector<T, n>`, carried on the wire as a custom `VectorType` class name.
    Vector {
        element: Box<ColumnType>,
        dimension: u32,
    },
}

/// Nesting deeper than this is rejected: hostile metadata must not exhaust the stack.
const MAX_DEPTH: usize = 64;

impl ColumnType {
    /// Reads one type `[option]`, advancing `buf`.
    pub fn read(buf: &mut &[u8]) -> Result<ColumnType, DecodeError> {
        Self::read_depth(buf, 0)
    }

    /// Skips one type `[option]` without allocating.
    pub fn skip(buf: &mut &[u8]) -> Result<(), DecodeError> {
        Self::skip_depth(buf, 0)
    }

    fn too_deep() -> DecodeError {
        DecodeError::Malformed {
            what: "type option",
            reason: "nested too deeply",
        }
    }

    fn read_depth(buf: &mut &[u8], depth: usize) -> Result<ColumnType, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(Self::too_deep());
        }
        let id = read_short(buf)?;
        let d = depth + 1;
        Ok(match id {
            0x0000 => Self::from_custom_class(read_string(buf)?),
            0x0001 => ColumnType::Ascii,
            0x0002 => ColumnType::Bigint,
            0x0003 => ColumnType::Blob,
            0x0004 => ColumnType::Boolean,
            0x0005 => ColumnType::Counter,
            0x0006 => ColumnType::Decimal,
            0x0007 => ColumnType::Double,
            0x0008 => ColumnType::Float,
            0x0009 => ColumnType::Int,
            0x000B => ColumnType::Timestamp,
            0x000C => ColumnType::Uuid,
            0x000D => ColumnType::Varchar,
            0x000E => ColumnType::Varint,
            0x000F => ColumnType::Timeuuid,
            0x0010 => ColumnType::Inet,
            0x0011 => ColumnType::Date,
            0x0012 => ColumnType::Time,
            0x0013 => ColumnType::Smallint,
            0x0014 => ColumnType::Tinyint,
            0x0015 => ColumnType::Duration,
            0x0020 => ColumnType::List(Box::new(Self::read_depth(buf, d)?)),
            0x0021 => {
                let k = Self::read_depth(buf, d)?;
                let v = Self::read_depth(buf, d)?;
                ColumnType::Map(Box::new(k), Box::new(v))
            }
            0x0022 => ColumnType::Set(Box::new(Self::read_depth(buf, d)?)),
            0x0030 => {
                let keyspace = read_string(buf)?.to_owned();
                let name = read_string(buf)?.to_owned();
                let n = read_short(buf)?;
                let mut fields = Vec::with_capacity(usize::from(n).min(64));
                for _ in 0..n {
                    let f = read_string(buf)?.to_owned();
                    fields.push((f, Self::read_depth(buf, d)?));
                }
                ColumnType::Udt {
                    keyspace,
                    name,
                    fields,
                }
            }
            0x0031 => {
                let n = read_short(buf)?;
                let mut items = Vec::with_capacity(usize::from(n).min(64));
                for _ in 0..n {
                    items.push(Self::read_depth(buf, d)?);
                }
                ColumnType::Tuple(items)
            }
            other => {
                return Err(DecodeError::UnknownValue {
                    what: "type option id",
                    value: other.into(),
                })
            }
        })
    }

    fn skip_depth(buf: &mut &[u8], depth: usize) -> Result<(), DecodeError> {
        if depth > MAX_DEPTH {
            return Err(Self::too_deep());
        }
        let d = depth + 1;
        match read_short(buf)? {
            0x0000 => {
                read_string(buf)?;
            }
            0x0001..=0x0009 | 0x000B..=0x0015 => {}
            0x0020 | 0x0022 => Self::skip_depth(buf, d)?,
            0x0021 => {
                Self::skip_depth(buf, d)?;
                Self::skip_depth(buf, d)?;
            }
            0x0030 => {
                read_string(buf)?;
                read_string(buf)?;
                for _ in 0..read_short(buf)? {
                    read_string(buf)?;
                    Self::skip_depth(buf, d)?;
                }
            }
            0x0031 => {
                for _ in 0..read_short(buf)? {
                    Self::skip_depth(buf, d)?;
                }
            }
            other => {
                return Err(DecodeError::UnknownValue {
                    what: "type option id",
                    value: other.into(),
                })
            }
        }
        Ok(())
    }

    /// Maps a custom type's Java class name to a known type where one applies
    /// (`VectorType`, `DurationType` on v4, `ReversedType` unwrapped, ...).
    pub fn from_custom_class(class: &str) -> ColumnType {
        // Filled in by the encoder work (issue 4); unknown names stay custom.
        ColumnType::Custom(class.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nested_collections() {
        // map<text, frozen<list<int>>>
        let bytes = [0x00, 0x21, 0x00, 0x0D, 0x00, 0x20, 0x00, 0x09];
        let mut b = &bytes[..];
        let t = ColumnType::read(&mut b).unwrap();
        assert!(b.is_empty());
        assert_eq!(
            t,
            ColumnType::Map(
                Box::new(ColumnType::Varchar),
                Box::new(ColumnType::List(Box::new(ColumnType::Int)))
            )
        );
        let mut b = &bytes[..];
        ColumnType::skip(&mut b).unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn deep_nesting_is_rejected() {
        let bytes: Vec<u8> = std::iter::repeat_n([0x00u8, 0x20], 1000)
            .flatten()
            .collect();
        assert!(ColumnType::read(&mut &bytes[..]).is_err());
        assert!(ColumnType::skip(&mut &bytes[..]).is_err());
    }
}
