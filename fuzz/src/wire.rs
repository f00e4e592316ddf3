//! Builders of the protocol messages the targets feed in (spec section 4), so that the fuzzer's
//! structure reaches past the framing checks: Rows results, PREPARED results, envelopes.

use crate::types::{string, write_option};
use autoprep_protocol::envelope::{
    Direction, Envelope, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::types::ColumnType;

/// `kind` values of RESULT.
pub const ROWS: i32 = 2;
/// PREPARED.
pub const PREPARED: i32 = 4;

/// A column of a result: keyspace, table, name and type.
#[derive(Debug, Clone)]
pub struct Column {
    pub keyspace: String,
    pub table: String,
    pub name: String,
    pub ty: ColumnType,
}

/// How the metadata of a Rows result is laid out.
#[derive(Debug, Clone, Default)]
pub struct Layout<'a> {
    /// Every column in one table: the table is named once (flag 0x01).
    pub global: bool,
    /// `HAS_MORE_PAGES` with this paging state.
    pub paging: Option<&'a [u8]>,
    /// v5 `METADATA_CHANGED` with this new id.
    pub new_metadata_id: Option<&'a [u8]>,
    /// `NO_METADATA`: the column count only.
    pub no_metadata: bool,
}

/// Appends `[bytes]`: a length (-1 for null) and the bytes.
pub fn bytes(b: Option<&[u8]>, out: &mut Vec<u8>) {
    match b {
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

/// Appends `[short bytes]`.
pub fn short_bytes(b: &[u8], out: &mut Vec<u8>) {
    let b = &b[..b.len().min(usize::from(u16::MAX))];
    out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    out.extend_from_slice(b);
}

/// Appends rows metadata (4.2.5.2) for `columns`.
pub fn rows_metadata(layout: &Layout<'_>, columns: &[Column], out: &mut Vec<u8>) {
    let global = layout.global && !columns.is_empty();
    let mut flags = 0i32;
    if global {
        flags |= 0x01;
    }
    if layout.paging.is_some() {
        flags |= 0x02;
    }
    if layout.no_metadata {
        flags |= 0x04;
    }
    if layout.new_metadata_id.is_some() {
        flags |= 0x08;
    }
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&(columns.len() as i32).to_be_bytes());
    if let Some(p) = layout.paging {
        bytes(Some(p), out);
    }
    if let Some(id) = layout.new_metadata_id {
        short_bytes(id, out);
    }
    if layout.no_metadata {
        return;
    }
    if global {
        string(&columns[0].keyspace, out);
        string(&columns[0].table, out);
    }
    for c in columns {
        if !global {
            string(&c.keyspace, out);
            string(&c.table, out);
        }
        string(&c.name, out);
        write_option(&c.ty, out);
    }
}

/// A RESULT Rows message (kind onward): metadata, then `rows` of `columns.len()` cells each
/// (cells beyond the last are cycled through `cells`; no cells at all: nulls).
pub fn rows_message(
    layout: &Layout<'_>,
    columns: &[Column],
    row_count: usize,
    cells: &[Option<&[u8]>],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&ROWS.to_be_bytes());
    rows_metadata(layout, columns, out);
    let rows = if columns.is_empty() { 0 } else { row_count };
    out.extend_from_slice(&(rows as i32).to_be_bytes());
    let mut next = cells.iter().cycle();
    for _ in 0..rows * columns.len() {
        bytes(next.next().copied().flatten(), out);
    }
}

/// A response envelope of `opcode` with `body` (already compressed if `flags` says so).
pub fn response(version: ProtocolVersion, flags: u8, opcode: Opcode, body: &[u8]) -> Envelope {
    Envelope::new(
        Header {
            version,
            direction: Direction::Response,
            flags: Flags(flags),
            stream: StreamId(3),
            opcode,
            length: 0,
        },
        body,
    )
}

/// A request header of `opcode` for a body of `length` bytes.
pub fn request_header(
    version: ProtocolVersion,
    flags: u8,
    opcode: Opcode,
    length: usize,
) -> Header {
    Header {
        version,
        direction: Direction::Request,
        flags: Flags(flags),
        stream: StreamId(5),
        opcode,
        length,
    }
}

/// The protocol version the fuzzer's byte picks.
pub fn version(b: u8) -> ProtocolVersion {
    match b % 3 {
        0 => ProtocolVersion::V3,
        1 => ProtocolVersion::V4,
        _ => ProtocolVersion::V5,
    }
}
