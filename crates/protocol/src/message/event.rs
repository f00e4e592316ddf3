//! EVENT (spec section 4.2.6) and the schema-change description it shares with
//! RESULT Schema_change (section 4.2.5.5).

use crate::error::DecodeError;
use crate::primitives::{read_inet, read_string, StringList};
use std::net::SocketAddr;

/// What changed in the schema.
#[derive(Debug, Clone)]
pub struct SchemaChange<'a> {
    /// `CREATED`, `UPDATED` or `DROPPED`.
    pub change: &'a str,
    /// `KEYSPACE`, `TABLE`, `TYPE`, `FUNCTION` or `AGGREGATE`.
    pub target: &'a str,
    pub keyspace: &'a str,
    /// Table, type, function or aggregate name; absent for a keyspace.
    pub name: Option<&'a str>,
    /// Argument types of a function or aggregate.
    pub arguments: Option<StringList<'a>>,
}

impl<'a> SchemaChange<'a> {
    /// Reads a schema change description.
    pub fn read(buf: &mut &'a [u8]) -> Result<Self, DecodeError> {
        let change = read_string(buf)?;
        let target = read_string(buf)?;
        let keyspace = read_string(buf)?;
        let (name, arguments) = match target {
            "KEYSPACE" => (None, None),
            "TABLE" | "TYPE" => (Some(read_string(buf)?), None),
            "FUNCTION" | "AGGREGATE" => (Some(read_string(buf)?), Some(StringList::read(buf)?)),
            _ => {
                return Err(DecodeError::Malformed {
                    what: "schema change",
                    reason: "unknown target",
                })
            }
        };
        Ok(SchemaChange {
            change,
            target,
            keyspace,
            name,
            arguments,
        })
    }
}

/// An EVENT body.
#[derive(Debug, Clone)]
pub enum EventView<'a> {
    /// `TOPOLOGY_CHANGE`: `NEW_NODE`, `REMOVED_NODE` (or `MOVED_NODE`) and the node's address.
    TopologyChange { change: &'a str, node: SocketAddr },
    /// `STATUS_CHANGE`: `UP` or `DOWN` and the node's address.
    StatusChange { change: &'a str, node: SocketAddr },
    /// `SCHEMA_CHANGE`.
    SchemaChange(SchemaChange<'a>),
}

impl<'a> EventView<'a> {
    /// Reads an EVENT message.
    pub fn parse(mut body: &'a [u8]) -> Result<Self, DecodeError> {
        let kind = read_string(&mut body)?;
        Ok(match kind {
            "TOPOLOGY_CHANGE" => EventView::TopologyChange {
                change: read_string(&mut body)?,
                node: read_inet(&mut body)?,
            },
            "STATUS_CHANGE" => EventView::StatusChange {
                change: read_string(&mut body)?,
                node: read_inet(&mut body)?,
            },
            "SCHEMA_CHANGE" => EventView::SchemaChange(SchemaChange::read(&mut body)?),
            _ => {
                return Err(DecodeError::Malformed {
                    what: "event",
                    reason: "unknown event type",
                })
            }
        })
    }
}
