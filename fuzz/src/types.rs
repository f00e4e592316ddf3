//! CQL types for the fuzz targets: chosen by the fuzzer, and written as the server writes them,
//! both as a protocol `[option]` and as a Cassandra marshal class name.

use arbitrary::{Result, Unstructured};
use autoprep_protocol::types::ColumnType;

/// Keyspaces a generated UDT may live in (class names need a word here).
const KEYSPACES: [&str; 3] = ["ks", "system", "k_2"];

/// The simple types, in protocol id order.
pub const SIMPLE: [ColumnType; 20] = [
    ColumnType::Ascii,
    ColumnType::Bigint,
    ColumnType::Blob,
    ColumnType::Boolean,
    ColumnType::Counter,
    ColumnType::Decimal,
    ColumnType::Double,
    ColumnType::Float,
    ColumnType::Int,
    ColumnType::Timestamp,
    ColumnType::Uuid,
    ColumnType::Varchar,
    ColumnType::Varint,
    ColumnType::Timeuuid,
    ColumnType::Inet,
    ColumnType::Date,
    ColumnType::Time,
    ColumnType::Smallint,
    ColumnType::Tinyint,
    ColumnType::Duration,
];

/// A type chosen by the fuzzer, nested at most `depth` levels. Never [`ColumnType::Custom`]
/// (its class name would be the fuzzer's text: see [`custom`]).
pub fn arbitrary_type(u: &mut Unstructured<'_>, depth: u32) -> Result<ColumnType> {
    let leaf = depth == 0 || u.ratio(2, 3)?;
    if leaf {
        return Ok(u.choose(&SIMPLE)?.clone());
    }
    let d = depth - 1;
    Ok(match u.int_in_range(0..=5u8)? {
        0 => ColumnType::List(Box::new(arbitrary_type(u, d)?)),
        1 => ColumnType::Set(Box::new(arbitrary_type(u, d)?)),
        2 => ColumnType::Map(
            Box::new(arbitrary_type(u, d)?),
            Box::new(arbitrary_type(u, d)?),
        ),
        3 => {
            let n = u.int_in_range(1..=4u8)?;
            ColumnType::Tuple(
                (0..n)
                    .map(|_| arbitrary_type(u, d))
                    .collect::<Result<_>>()?,
            )
        }
        4 => {
            let n = u.int_in_range(0..=4u8)?;
            let mut fields = Vec::new();
            for i in 0..n {
                // Field names as the server keeps them (lower case), sometimes repeated.
                let name = if u.ratio(1, 8)? {
                    "a".to_owned()
                } else {
                    format!("{}", (b'a' + i) as char)
                };
                fields.push((name, arbitrary_type(u, d)?));
            }
            ColumnType::Udt {
                keyspace: (*u.choose(&KEYSPACES)?).to_owned(),
                name: if u.ratio(1, 2)? { "addr" } else { "Mixed Case" }.to_owned(),
                fields,
            }
        }
        _ => ColumnType::Vector {
            element: Box::new(arbitrary_type(u, d)?),
            dimension: u.int_in_range(1..=4u32)?,
        },
    })
}

/// A custom type: a class name of the fuzzer's, which may or may not name a known type.
pub fn custom(u: &mut Unstructured<'_>) -> Result<ColumnType> {
    let class: String = u.arbitrary()?;
    Ok(ColumnType::from_custom_class(&class))
}

/// The type's Cassandra class name (`AbstractType.toString()`, package left out, which the
/// crate's parser accepts): `Int32Type`, `ListType(UTF8Type)`, `UserType(ks,6164,61:Int32Type)`.
pub fn class_name(t: &ColumnType) -> String {
    let simple = match t {
        ColumnType::Custom(c) => return c.clone(),
        ColumnType::Ascii => "AsciiType",
        ColumnType::Bigint => "LongType",
        ColumnType::Blob => "BytesType",
        ColumnType::Boolean => "BooleanType",
        ColumnType::Counter => "CounterColumnType",
        ColumnType::Decimal => "DecimalType",
        ColumnType::Double => "DoubleType",
        ColumnType::Float => "FloatType",
        ColumnType::Int => "Int32Type",
        ColumnType::Timestamp => "TimestampType",
        ColumnType::Uuid => "UUIDType",
        ColumnType::Varchar => "UTF8Type",
        ColumnType::Varint => "IntegerType",
        ColumnType::Timeuuid => "TimeUUIDType",
        ColumnType::Inet => "InetAddressType",
        ColumnType::Date => "SimpleDateType",
        ColumnType::Time => "TimeType",
        ColumnType::Smallint => "ShortType",
        ColumnType::Tinyint => "ByteType",
        ColumnType::Duration => "DurationType",
        ColumnType::List(e) => return format!("ListType({})", class_name(e)),
        ColumnType::Set(e) => return format!("SetType({})", class_name(e)),
        ColumnType::Map(k, v) => return format!("MapType({},{})", class_name(k), class_name(v)),
        ColumnType::Tuple(items) => {
            let items: Vec<String> = items.iter().map(class_name).collect();
            return format!("TupleType({})", items.join(","));
        }
        ColumnType::Udt {
            keyspace,
            name,
            fields,
        } => {
            let mut s = format!("UserType({keyspace},{}", hex(name));
            for (f, ft) in fields {
                s.push_str(&format!(",{}:{}", hex(f), class_name(ft)));
            }
            s.push(')');
            return s;
        }
        ColumnType::Vector { element, dimension } => {
            return format!("VectorType({},{dimension})", class_name(element))
        }
    };
    simple.to_owned()
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Appends the type as a protocol `[option]` (spec section 6), as Cassandra 5.0 writes it on
/// v5 (vectors and custom types as class names).
pub fn write_option(t: &ColumnType, out: &mut Vec<u8>) {
    let id: u16 = match t {
        ColumnType::Custom(_) | ColumnType::Vector { .. } => {
            out.extend_from_slice(&0u16.to_be_bytes());
            string(&class_name(t), out);
            return;
        }
        ColumnType::Ascii => 0x01,
        ColumnType::Bigint => 0x02,
        ColumnType::Blob => 0x03,
        ColumnType::Boolean => 0x04,
        ColumnType::Counter => 0x05,
        ColumnType::Decimal => 0x06,
        ColumnType::Double => 0x07,
        ColumnType::Float => 0x08,
        ColumnType::Int => 0x09,
        ColumnType::Timestamp => 0x0B,
        ColumnType::Uuid => 0x0C,
        ColumnType::Varchar => 0x0D,
        ColumnType::Varint => 0x0E,
        ColumnType::Timeuuid => 0x0F,
        ColumnType::Inet => 0x10,
        ColumnType::Date => 0x11,
        ColumnType::Time => 0x12,
        ColumnType::Smallint => 0x13,
        ColumnType::Tinyint => 0x14,
        ColumnType::Duration => 0x15,
        ColumnType::List(e) | ColumnType::Set(e) => {
            let id: u16 = if matches!(t, ColumnType::List(_)) {
                0x20
            } else {
                0x22
            };
            out.extend_from_slice(&id.to_be_bytes());
            write_option(e, out);
            return;
        }
        ColumnType::Map(k, v) => {
            out.extend_from_slice(&0x21u16.to_be_bytes());
            write_option(k, out);
            write_option(v, out);
            return;
        }
        ColumnType::Udt {
            keyspace,
            name,
            fields,
        } => {
            out.extend_from_slice(&0x30u16.to_be_bytes());
            string(keyspace, out);
            string(name, out);
            out.extend_from_slice(&(fields.len() as u16).to_be_bytes());
            for (f, ft) in fields {
                string(f, out);
                write_option(ft, out);
            }
            return;
        }
        ColumnType::Tuple(items) => {
            out.extend_from_slice(&0x31u16.to_be_bytes());
            out.extend_from_slice(&(items.len() as u16).to_be_bytes());
            for i in items {
                write_option(i, out);
            }
            return;
        }
    };
    out.extend_from_slice(&id.to_be_bytes());
}

/// A `[string]`: a 2-byte length and UTF-8 bytes (cut at 65,535 bytes).
pub fn string(s: &str, out: &mut Vec<u8>) {
    let b = &s.as_bytes()[..s.len().min(usize::from(u16::MAX))];
    out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    out.extend_from_slice(b);
}

/// The CQL spelling of a type, as `DESCRIBE` would print it (for messages only).
pub fn cql(t: &ColumnType) -> String {
    match t {
        ColumnType::List(e) => format!("list<{}>", cql(e)),
        ColumnType::Set(e) => format!("set<{}>", cql(e)),
        ColumnType::Map(k, v) => format!("map<{}, {}>", cql(k), cql(v)),
        ColumnType::Tuple(i) => {
            let i: Vec<String> = i.iter().map(cql).collect();
            format!("tuple<{}>", i.join(", "))
        }
        ColumnType::Udt { name, .. } => format!("udt {name:?}"),
        ColumnType::Vector { element, dimension } => {
            format!("vector<{}, {dimension}>", cql(element))
        }
        ColumnType::Custom(c) => format!("'{c}'"),
        other => other.cql_name().to_owned(),
    }
}
