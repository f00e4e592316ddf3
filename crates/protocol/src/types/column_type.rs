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
    /// `AbstractType.valueLengthIfFixed()`: the size every value of this type has, for the
    /// types a vector packs without length prefixes; `None` for the others.
    pub fn fixed_size(&self) -> Option<usize> {
        match self {
            ColumnType::Boolean => Some(1),
            ColumnType::Int | ColumnType::Float => Some(4),
            ColumnType::Bigint | ColumnType::Double | ColumnType::Timestamp => Some(8),
            ColumnType::Uuid | ColumnType::Timeuuid => Some(16),
            ColumnType::Vector { element, dimension } => element
                .fixed_size()?
                .checked_mul(usize::try_from(*dimension).ok()?),
            _ => None,
        }
    }

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
    /// (`VectorType`, `DurationType` on v4, `ReversedType` and `FrozenType` unwrapped, collections,
    /// tuples and UDTs spelled as class names). Anything not fully understood stays
    /// [`ColumnType::Custom`] with the whole name, so the encoder refuses it.
    pub fn from_custom_class(class: &str) -> ColumnType {
        let mut p = ClassParser {
            rest: class,
            depth: 0,
        };
        match p.parse_type() {
            Some(t) if p.rest.trim().is_empty() => t,
            _ => ColumnType::Custom(class.to_owned()),
        }
    }

    /// The CQL name of the type's family, for error messages and metric labels
    /// (never includes user data).
    pub fn cql_name(&self) -> &'static str {
        match self {
            ColumnType::Custom(_) => "custom",
            ColumnType::Ascii => "ascii",
            ColumnType::Bigint => "bigint",
            ColumnType::Blob => "blob",
            ColumnType::Boolean => "boolean",
            ColumnType::Counter => "counter",
            ColumnType::Decimal => "decimal",
            ColumnType::Double => "double",
            ColumnType::Float => "float",
            ColumnType::Int => "int",
            ColumnType::Timestamp => "timestamp",
            ColumnType::Uuid => "uuid",
            ColumnType::Varchar => "text",
            ColumnType::Varint => "varint",
            ColumnType::Timeuuid => "timeuuid",
            ColumnType::Inet => "inet",
            ColumnType::Date => "date",
            ColumnType::Time => "time",
            ColumnType::Smallint => "smallint",
            ColumnType::Tinyint => "tinyint",
            ColumnType::Duration => "duration",
            ColumnType::List(_) => "list",
            ColumnType::Map(_, _) => "map",
            ColumnType::Set(_) => "set",
            ColumnType::Udt { .. } => "udt",
            ColumnType::Tuple(_) => "tuple",
            ColumnType::Vector { .. } => "vector",
        }
    }
}

/// The package Cassandra's marshal classes live in; names may also come without it.
const MARSHAL_PACKAGE: &str = "org.apache.cassandra.db.marshal.";

/// Recursive-descent parser for Cassandra's `AbstractType.toString()` syntax
/// (`TypeParser`): `Name`, `Name(param, ...)`. Returns `None` on anything unexpected; the caller
/// then keeps the whole name as `Custom`.
struct ClassParser<'a> {
    rest: &'a str,
    depth: usize,
}

impl<'a> ClassParser<'a> {
    fn skip_ws(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn word(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let end = self
            .rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$'))
            .unwrap_or(self.rest.len());
        if end == 0 {
            return None;
        }
        let (w, r) = self.rest.split_at(end);
        self.rest = r;
        Some(w)
    }

    fn hex_word(&mut self) -> Option<String> {
        self.skip_ws();
        let end = self
            .rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(self.rest.len());
        let (h, r) = self.rest.split_at(end);
        self.rest = r;
        decode_hex_utf8(h)
    }

    fn parse_type(&mut self) -> Option<ColumnType> {
        if self.depth > MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let t = self.parse_type_inner();
        self.depth -= 1;
        t
    }

    fn parse_type_inner(&mut self) -> Option<ColumnType> {
        let full = self.word()?;
        let name = full.strip_prefix(MARSHAL_PACKAGE).unwrap_or(full);
        let simple = match name {
            "AsciiType" => Some(ColumnType::Ascii),
            "LongType" => Some(ColumnType::Bigint),
            "BytesType" => Some(ColumnType::Blob),
            "BooleanType" => Some(ColumnType::Boolean),
            "CounterColumnType" => Some(ColumnType::Counter),
            "DecimalType" => Some(ColumnType::Decimal),
            "DoubleType" => Some(ColumnType::Double),
            "FloatType" => Some(ColumnType::Float),
            "Int32Type" => Some(ColumnType::Int),
            "TimestampType" => Some(ColumnType::Timestamp),
            "UUIDType" => Some(ColumnType::Uuid),
            "UTF8Type" => Some(ColumnType::Varchar),
            "IntegerType" => Some(ColumnType::Varint),
            "TimeUUIDType" => Some(ColumnType::Timeuuid),
            "InetAddressType" => Some(ColumnType::Inet),
            "SimpleDateType" => Some(ColumnType::Date),
            "TimeType" => Some(ColumnType::Time),
            "ShortType" => Some(ColumnType::Smallint),
            "ByteType" => Some(ColumnType::Tinyint),
            "DurationType" => Some(ColumnType::Duration),
            _ => None,
        };
        if let Some(t) = simple {
            // A simple type takes no parameters.
            return if self.peek_open() { None } else { Some(t) };
        }
        if !self.eat('(') {
            return None;
        }
        let t = match name {
            "ReversedType" | "FrozenType" => self.parse_type()?,
            "ListType" => ColumnType::List(Box::new(self.parse_type()?)),
            "SetType" => ColumnType::Set(Box::new(self.parse_type()?)),
            "MapType" => {
                let k = self.parse_type()?;
                if !self.eat(',') {
                    return None;
                }
                ColumnType::Map(Box::new(k), Box::new(self.parse_type()?))
            }
            "TupleType" => {
                let mut items = vec![self.parse_type()?];
                while self.eat(',') {
                    items.push(self.parse_type()?);
                }
                ColumnType::Tuple(items)
            }
            "UserType" => {
                let keyspace = self.word()?.to_owned();
                if !self.eat(',') {
                    return None;
                }
                let name = self.hex_word()?;
                let mut fields = Vec::new();
                while self.eat(',') {
                    let field = self.hex_word()?;
                    if !self.eat(':') {
                        return None;
                    }
                    fields.push((field, self.parse_type()?));
                }
                ColumnType::Udt {
                    keyspace,
                    name,
                    fields,
                }
            }
            "VectorType" => {
                let element = self.parse_type()?;
                if !self.eat(',') {
                    return None;
                }
                self.skip_ws();
                let dimension: u32 = self.word()?.parse().ok()?;
                if dimension == 0 {
                    return None;
                }
                ColumnType::Vector {
                    element: Box::new(element),
                    dimension,
                }
            }
            _ => return None,
        };
        if self.eat(')') {
            Some(t)
        } else {
            None
        }
    }

    fn peek_open(&mut self) -> bool {
        self.skip_ws();
        self.rest.starts_with('(')
    }
}

/// Decodes hex digits (as Cassandra prints UDT and field names) into a UTF-8 string.
fn decode_hex_utf8(h: &str) -> Option<String> {
    if h.len() & 1 == 1 {
        return None;
    }
    let bytes: Option<Vec<u8>> = h
        .as_bytes()
        .chunks_exact(2)
        .map(|p| {
            let hi = (p[0] as char).to_digit(16)?;
            let lo = (p[1] as char).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect();
    String::from_utf8(bytes?).ok()
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
        let bytes: Vec<u8> = (0..1000).flat_map(|_| [0x00u8, 0x20]).collect();
        assert!(ColumnType::read(&mut &bytes[..]).is_err());
        assert!(ColumnType::skip(&mut &bytes[..]).is_err());
    }

    fn m(name: &str) -> String {
        format!("org.apache.cassandra.db.marshal.{name}")
    }

    #[test]
    fn custom_vector_of_float() {
        let t =
            ColumnType::from_custom_class(&format!("{}({} , 3)", m("VectorType"), m("FloatType")));
        assert_eq!(
            t,
            ColumnType::Vector {
                element: Box::new(ColumnType::Float),
                dimension: 3
            }
        );
        // Without the spaces too.
        let t =
            ColumnType::from_custom_class(&format!("{}({},3)", m("VectorType"), m("FloatType")));
        assert!(matches!(t, ColumnType::Vector { dimension: 3, .. }));
    }

    #[test]
    fn custom_duration_reversed_and_frozen() {
        assert_eq!(
            ColumnType::from_custom_class(&m("DurationType")),
            ColumnType::Duration
        );
        let t = ColumnType::from_custom_class(&format!(
            "{}({})",
            m("ReversedType"),
            m("TimestampType")
        ));
        assert_eq!(t, ColumnType::Timestamp);
        let t = ColumnType::from_custom_class(&format!(
            "{}({}({}({})))",
            m("ReversedType"),
            m("FrozenType"),
            m("ListType"),
            m("Int32Type")
        ));
        assert_eq!(t, ColumnType::List(Box::new(ColumnType::Int)));
    }

    #[test]
    fn custom_nested_collections_tuple_and_udt() {
        let t = ColumnType::from_custom_class(&format!(
            "{}({},{}({}({},{})))",
            m("MapType"),
            m("UTF8Type"),
            m("FrozenType"),
            m("TupleType"),
            m("Int32Type"),
            m("SetType(org.apache.cassandra.db.marshal.UUIDType)")
        ));
        assert_eq!(
            t,
            ColumnType::Map(
                Box::new(ColumnType::Varchar),
                Box::new(ColumnType::Tuple(vec![
                    ColumnType::Int,
                    ColumnType::Set(Box::new(ColumnType::Uuid))
                ]))
            )
        );
        // UserType(ks, hex(name), hex(field):type, ...)
        let t = ColumnType::from_custom_class(&format!(
            "{}(ks,61646472,737472656574:{},7a6970:{})",
            m("UserType"),
            m("UTF8Type"),
            m("Int32Type")
        ));
        assert_eq!(
            t,
            ColumnType::Udt {
                keyspace: "ks".into(),
                name: "addr".into(),
                fields: vec![
                    ("street".into(), ColumnType::Varchar),
                    ("zip".into(), ColumnType::Int)
                ]
            }
        );
    }

    #[test]
    fn unknown_or_malformed_custom_stays_custom() {
        for name in [
            "com.example.MyType",
            "org.apache.cassandra.db.marshal.DynamicCompositeType(a=>org.apache.cassandra.db.marshal.BytesType)",
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType,0)",
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType,x)",
            "org.apache.cassandra.db.marshal.ListType(org.apache.cassandra.db.marshal.Int32Type",
            "org.apache.cassandra.db.marshal.Int32Type(org.apache.cassandra.db.marshal.Int32Type)",
            "org.apache.cassandra.db.marshal.ListType(com.example.MyType)",
            "org.apache.cassandra.db.marshal.UserType(ks,6,61:org.apache.cassandra.db.marshal.Int32Type)",
            "",
        ] {
            assert_eq!(ColumnType::from_custom_class(name), ColumnType::Custom(name.into()), "{name}");
        }
    }

    #[test]
    fn custom_parser_survives_deep_nesting() {
        let mut s = String::new();
        for _ in 0..10_000 {
            s.push_str("org.apache.cassandra.db.marshal.ListType(");
        }
        assert!(matches!(
            ColumnType::from_custom_class(&s),
            ColumnType::Custom(_)
        ));
    }

    proptest::proptest! {
        #[test]
        fn custom_parser_is_total(s in ".{0,200}") {
            let _ = ColumnType::from_custom_class(&s);
        }
    }
}
