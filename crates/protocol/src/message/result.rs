//! RESULT (spec section 4.2.5): Void, Rows, Set_keyspace, Prepared and Schema_change.
//!
//! Rows and metadata are read lazily: the views record where columns and rows start and
//! iterate over them on demand, so a proxy that only needs the kind or the paging state
//! never walks the cells.

use super::event::SchemaChange;
use crate::envelope::ProtocolVersion;
use crate::error::DecodeError;
use crate::primitives::{read_bytes, read_int, read_short_bytes, read_string};
use crate::types::ColumnType;

/// Result kinds.
pub mod kind {
    pub const VOID: i32 = 1;
    pub const ROWS: i32 = 2;
    pub const SET_KEYSPACE: i32 = 3;
    pub const PREPARED: i32 = 4;
    pub const SCHEMA_CHANGE: i32 = 5;
}

/// Rows metadata flags.
pub mod metadata_flags {
    pub const GLOBAL_TABLES_SPEC: i32 = 0x01;
    pub const HAS_MORE_PAGES: i32 = 0x02;
    pub const NO_METADATA: i32 = 0x04;
    /// v5.
    pub const METADATA_CHANGED: i32 = 0x08;
}

/// A column description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSpec<'a> {
    pub keyspace: &'a str,
    pub table: &'a str,
    pub name: &'a str,
    /// The type `[option]`, undecoded; see [`ColumnSpec::column_type`].
    pub type_raw: &'a [u8],
}

impl ColumnSpec<'_> {
    /// Decodes the column's type.
    pub fn column_type(&self) -> Result<ColumnType, DecodeError> {
        ColumnType::read(&mut &self.type_raw[..])
    }
}

/// Column specs, read lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSpecs<'a> {
    count: i32,
    global: Option<(&'a str, &'a str)>,
    raw: &'a [u8],
}

impl<'a> ColumnSpecs<'a> {
    fn read(buf: &mut &'a [u8], count: i32, global: bool) -> Result<Self, DecodeError> {
        let global = if global {
            Some((read_string(buf)?, read_string(buf)?))
        } else {
            None
        };
        let start = *buf;
        let specs = ColumnSpecs {
            count,
            global,
            raw: start,
        };
        let mut probe = specs;
        for _ in 0..count.max(0) {
            probe.next_spec()?;
        }
        *buf = probe.raw;
        Ok(ColumnSpecs {
            raw: &start[..start.len() - buf.len()],
            ..specs
        })
    }

    fn next_spec(&mut self) -> Result<ColumnSpec<'a>, DecodeError> {
        let b = &mut self.raw;
        let (keyspace, table) = match self.global {
            Some(g) => g,
            None => (read_string(b)?, read_string(b)?),
        };
        let name = read_string(b)?;
        let before = *b;
        ColumnType::skip(b)?;
        Ok(ColumnSpec {
            keyspace,
            table,
            name,
            type_raw: &before[..before.len() - b.len()],
        })
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(0)
    }

    /// True when there are no columns.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The global keyspace and table, when the metadata has one.
    pub fn global_table(&self) -> Option<(&'a str, &'a str)> {
        self.global
    }

    /// The raw bytes of the specs (after any global table spec).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates over the columns (already validated when the view was built).
    pub fn iter(&self) -> impl Iterator<Item = ColumnSpec<'a>> {
        let mut cur = *self;
        (0..self.len()).map_while(move |_| cur.next_spec().ok())
    }
}

/// The metadata of a Rows result, or the result metadata of a Prepared result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowsMetadata<'a> {
    pub flags: i32,
    pub column_count: i32,
    pub paging_state: Option<&'a [u8]>,
    /// v5: present when the flags say the metadata changed.
    pub new_metadata_id: Option<&'a [u8]>,
    /// Absent with the `NO_METADATA` flag.
    pub columns: Option<ColumnSpecs<'a>>,
}

impl<'a> RowsMetadata<'a> {
    /// Reads rows metadata.
    pub fn read(buf: &mut &'a [u8]) -> Result<Self, DecodeError> {
        let flags = read_int(buf)?;
        let column_count = read_int(buf)?;
        if column_count < 0 {
            return Err(DecodeError::NegativeLength {
                what: "column count",
                length: column_count,
            });
        }
        let paging_state = if flags & metadata_flags::HAS_MORE_PAGES != 0 {
            read_bytes(buf)?
        } else {
            None
        };
        let new_metadata_id = if flags & metadata_flags::METADATA_CHANGED != 0 {
            Some(read_short_bytes(buf)?)
        } else {
            None
        };
        let columns = if flags & metadata_flags::NO_METADATA != 0 {
            None
        } else {
            Some(ColumnSpecs::read(
                buf,
                column_count,
                flags & metadata_flags::GLOBAL_TABLES_SPEC != 0,
            )?)
        };
        Ok(RowsMetadata {
            flags,
            column_count,
            paging_state,
            new_metadata_id,
            columns,
        })
    }
}

/// A Rows result.
#[derive(Debug, Clone, Copy)]
pub struct RowsView<'a> {
    pub metadata: RowsMetadata<'a>,
    pub row_count: i32,
    /// The row content, undecoded.
    pub rows_raw: &'a [u8],
}

impl<'a> RowsView<'a> {
    /// Reads the row count and checks it against the bytes left: every cell takes at least
    /// its 4-byte length, so a count the body cannot hold is refused here rather than walked.
    fn read(buf: &mut &'a [u8], metadata: RowsMetadata<'a>) -> Result<Self, DecodeError> {
        let row_count = read_int(buf)?;
        let rows = usize::try_from(row_count).map_err(|_| DecodeError::NegativeLength {
            what: "row count",
            length: row_count,
        })?;
        // Both counts are non-negative i32s here, so the product cannot overflow a u64.
        let cols = metadata.column_count as u64;
        if cols == 0 && rows > 0 {
            // Rows of no columns take no bytes, so nothing bounds their count.
            return Err(DecodeError::Malformed {
                what: "rows",
                reason: "rows without columns",
            });
        }
        let min_len = rows as u64 * cols * 4;
        if min_len > buf.len() as u64 {
            return Err(DecodeError::TooFewBytes {
                what: "rows",
                expected: usize::try_from(min_len).unwrap_or(usize::MAX),
                received: buf.len(),
            });
        }
        Ok(RowsView {
            metadata,
            row_count,
            rows_raw: buf,
        })
    }

    /// Iterates over rows; each row is a vector of cells (`None` for null). The first error
    /// ends the iteration.
    pub fn rows(&self) -> impl Iterator<Item = Result<Vec<Option<&'a [u8]>>, DecodeError>> + '_ {
        let mut rest = self.rows_raw;
        let cols = usize::try_from(self.metadata.column_count).unwrap_or(0);
        let mut failed = false;
        (0..self.row_count.max(0)).map_while(move |_| {
            if failed {
                return None;
            }
            let mut row = Vec::with_capacity(cols.min(1024));
            for _ in 0..cols {
                match read_bytes(&mut rest) {
                    Ok(cell) => row.push(cell),
                    Err(e) => {
                        failed = true;
                        return Some(Err(e));
                    }
                }
            }
            Some(Ok(row))
        })
    }
}

/// The bind-variable metadata of a Prepared result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparedMetadata<'a> {
    pub flags: i32,
    /// Partition key indexes, as raw `[short]`s.
    pub pk_indexes_raw: &'a [u8],
    pub columns: ColumnSpecs<'a>,
}

impl<'a> PreparedMetadata<'a> {
    fn read(buf: &mut &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let flags = read_int(buf)?;
        let count = read_int(buf)?;
        if count < 0 {
            return Err(DecodeError::NegativeLength {
                what: "bind variable count",
                length: count,
            });
        }
        let pk_indexes_raw = if version >= ProtocolVersion::V4 {
            let pk_count = read_int(buf)?;
            let n = usize::try_from(pk_count).map_err(|_| DecodeError::NegativeLength {
                what: "partition key count",
                length: pk_count,
            })?;
            crate::primitives::read_raw(buf, n.saturating_mul(2))?
        } else {
            &[]
        };
        let columns =
            ColumnSpecs::read(buf, count, flags & metadata_flags::GLOBAL_TABLES_SPEC != 0)?;
        Ok(PreparedMetadata {
            flags,
            pk_indexes_raw,
            columns,
        })
    }

    /// The partition key indexes.
    pub fn pk_indexes(&self) -> impl Iterator<Item = u16> + 'a {
        self.pk_indexes_raw
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
    }
}

/// A Prepared result.
#[derive(Debug, Clone, Copy)]
pub struct PreparedView<'a> {
    pub id: &'a [u8],
    /// v5 only.
    pub result_metadata_id: Option<&'a [u8]>,
    pub bind: PreparedMetadata<'a>,
    pub result: RowsMetadata<'a>,
    /// The raw bytes of the result metadata (`result`), as the server wrote them.
    pub result_raw: &'a [u8],
}

/// A RESULT body.
#[derive(Debug, Clone)]
pub enum ResultView<'a> {
    Void,
    Rows(RowsView<'a>),
    SetKeyspace(&'a str),
    Prepared(PreparedView<'a>),
    SchemaChange(SchemaChange<'a>),
}

impl<'a> ResultView<'a> {
    /// Reads a RESULT message (body prefix already split off).
    pub fn parse(mut body: &'a [u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let b = &mut body;
        Ok(match read_int(b)? {
            kind::VOID => ResultView::Void,
            kind::ROWS => {
                let metadata = RowsMetadata::read(b)?;
                ResultView::Rows(RowsView::read(b, metadata)?)
            }
            kind::SET_KEYSPACE => ResultView::SetKeyspace(read_string(b)?),
            kind::PREPARED => {
                let id = read_short_bytes(b)?;
                let result_metadata_id = if version >= ProtocolVersion::V5 {
                    Some(read_short_bytes(b)?)
                } else {
                    None
                };
                let bind = PreparedMetadata::read(b, version)?;
                let before = *b;
                let result = RowsMetadata::read(b)?;
                ResultView::Prepared(PreparedView {
                    id,
                    result_metadata_id,
                    bind,
                    result,
                    result_raw: &before[..before.len() - b.len()],
                })
            }
            kind::SCHEMA_CHANGE => ResultView::SchemaChange(SchemaChange::read(b)?),
            other => {
                return Err(DecodeError::UnknownValue {
                    what: "result kind",
                    value: other as u32,
                })
            }
        })
    }

    /// The kind number.
    pub fn kind(&self) -> i32 {
        match self {
            ResultView::Void => kind::VOID,
            ResultView::Rows(_) => kind::ROWS,
            ResultView::SetKeyspace(_) => kind::SET_KEYSPACE,
            ResultView::Prepared(_) => kind::PREPARED,
            ResultView::SchemaChange(_) => kind::SCHEMA_CHANGE,
        }
    }
}

/// Writes the message of a Prepared result (kind included) as Cassandra's
/// `ResultMessage.Prepared` codec does: `id`, the result metadata id (v5), the bind-variable
/// metadata of `binds` and the result metadata `result_raw` as the server wrote it.
///
/// The bind metadata follows `ResultSet.PreparedMetadata` (5.0): the global-tables-spec flag
/// when there is at least one bind variable and all are of one table, and the partition-key
/// indexes (v4+) only then and only when `pk_indexes` is given; otherwise a count of 0.
pub fn write_prepared(
    out: &mut impl bytes::BufMut,
    version: ProtocolVersion,
    id: &[u8],
    result_metadata_id: Option<&[u8]>,
    binds: &[ColumnSpec<'_>],
    pk_indexes: Option<&[u16]>,
    result_raw: &[u8],
) -> Result<(), crate::primitives::EncodeLenError> {
    use crate::primitives::{write_short_bytes, write_string};
    out.put_i32(kind::PREPARED);
    write_short_bytes(out, id)?;
    if version >= ProtocolVersion::V5 {
        write_short_bytes(out, result_metadata_id.unwrap_or(&[]))?;
    }
    let global = binds.first().filter(|first| {
        binds
            .iter()
            .all(|c| c.keyspace == first.keyspace && c.table == first.table)
    });
    out.put_i32(if global.is_some() {
        metadata_flags::GLOBAL_TABLES_SPEC
    } else {
        0
    });
    let count = i32::try_from(binds.len()).map_err(|_| crate::primitives::EncodeLenError {
        what: "bind variables",
        len: binds.len(),
    })?;
    out.put_i32(count);
    if version >= ProtocolVersion::V4 {
        match pk_indexes.filter(|_| global.is_some()) {
            Some(pk) => {
                out.put_i32(pk.len() as i32);
                for i in pk {
                    out.put_u16(*i);
                }
            }
            None => out.put_i32(0),
        }
    }
    if let Some(g) = global {
        write_string(out, g.keyspace)?;
        write_string(out, g.table)?;
    }
    for c in binds {
        if global.is_none() {
            write_string(out, c.keyspace)?;
            write_string(out, c.table)?;
        }
        write_string(out, c.name)?;
        out.put_slice(c.type_raw);
    }
    out.put_slice(result_raw);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_is_total(kind in 1i32..=6, rest in proptest::collection::vec(any::<u8>(), 0..100), v5 in any::<bool>()) {
            let mut b = kind.to_be_bytes().to_vec();
            b.extend_from_slice(&rest);
            let v = if v5 { ProtocolVersion::V5 } else { ProtocolVersion::V4 };
            if let Ok(ResultView::Rows(r)) = ResultView::parse(&b, v) {
                for row in r.rows() { let _ = row; }
                if let Some(c) = r.metadata.columns { for s in c.iter() { let _ = s.column_type(); } }
            }
        }
    }

    /// A Prepared message written from parsed parts reads back to the same parts, and writing
    /// those again gives the same bytes (the writer follows the layout the reader accepts).
    #[test]
    fn prepared_messages_round_trip() {
        let int = [0u8, 9];
        let text = [0u8, 13];
        let spec = |table, name, type_raw| ColumnSpec {
            keyspace: "ks",
            table,
            name,
            type_raw,
        };
        // Rows metadata: global spec ks.t, one int column k.
        let mut result = Vec::new();
        result.extend_from_slice(&metadata_flags::GLOBAL_TABLES_SPEC.to_be_bytes());
        result.extend_from_slice(&1i32.to_be_bytes());
        crate::primitives::write_string(&mut result, "ks").unwrap();
        crate::primitives::write_string(&mut result, "t").unwrap();
        crate::primitives::write_string(&mut result, "k").unwrap();
        result.extend_from_slice(&int);
        for (binds, pk, version) in [
            (
                vec![spec("t", "k", &int[..]), spec("t", "v", &text[..])],
                Some(&[0u16][..]),
                ProtocolVersion::V4,
            ),
            (
                vec![spec("t", "k", &int[..]), spec("u", "v", &text[..])],
                Some(&[0u16][..]),
                ProtocolVersion::V5,
            ),
            (vec![], None, ProtocolVersion::V5),
        ] {
            let mut out = Vec::new();
            write_prepared(
                &mut out,
                version,
                &[7; 16],
                Some(&[9; 16]),
                &binds,
                pk,
                &result,
            )
            .unwrap();
            let ResultView::Prepared(p) = ResultView::parse(&out, version).unwrap() else {
                panic!("not prepared")
            };
            assert_eq!(p.id, &[7; 16]);
            assert_eq!(
                p.result_metadata_id,
                (version >= ProtocolVersion::V5).then_some(&[9u8; 16][..])
            );
            assert_eq!(p.bind.columns.iter().collect::<Vec<_>>(), binds);
            let global = binds.windows(2).all(|w| w[0].table == w[1].table) && !binds.is_empty();
            assert_eq!(
                p.bind.flags,
                if global {
                    metadata_flags::GLOBAL_TABLES_SPEC
                } else {
                    0
                }
            );
            let want_pk: Vec<u16> = if global {
                pk.unwrap_or(&[]).to_vec()
            } else {
                Vec::new()
            };
            assert_eq!(p.bind.pk_indexes().collect::<Vec<_>>(), want_pk);
            assert_eq!(p.result_raw, &result[..]);
            let mut again = Vec::new();
            let cols: Vec<_> = p.bind.columns.iter().collect();
            let pk_again: Vec<u16> = p.bind.pk_indexes().collect();
            write_prepared(
                &mut again,
                version,
                p.id,
                p.result_metadata_id,
                &cols,
                Some(&pk_again),
                p.result_raw,
            )
            .unwrap();
            assert_eq!(again, out);
        }
    }

    /// Rows metadata with `NO_METADATA`, `cols` columns, then `row_count` and `rest`.
    fn bare_rows(cols: i32, row_count: i32, rest: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [kind::ROWS, metadata_flags::NO_METADATA, cols, row_count] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(rest);
        b
    }

    #[test]
    fn row_counts_the_body_cannot_hold_are_refused() {
        // A 20-byte message claiming 2^30 rows used to be walked row by row, one error each.
        let b = bare_rows(1, 1 << 30, &[]);
        assert!(matches!(
            ResultView::parse(&b, ProtocolVersion::V4),
            Err(DecodeError::TooFewBytes { what: "rows", .. })
        ));
        let b = bare_rows(0, i32::MAX, &[]);
        assert!(matches!(
            ResultView::parse(&b, ProtocolVersion::V4),
            Err(DecodeError::Malformed { what: "rows", .. })
        ));
        let b = bare_rows(2, -1, &[]);
        assert!(matches!(
            ResultView::parse(&b, ProtocolVersion::V4),
            Err(DecodeError::NegativeLength { .. })
        ));
        // No rows of no columns is fine, and so is a body that holds what it claims.
        assert!(ResultView::parse(&bare_rows(0, 0, &[]), ProtocolVersion::V4).is_ok());
        let b = bare_rows(2, 1, &[0xff; 8]);
        let ResultView::Rows(r) = ResultView::parse(&b, ProtocolVersion::V4).unwrap() else {
            panic!("not rows")
        };
        assert_eq!(
            r.rows().map(Result::unwrap).collect::<Vec<_>>(),
            [vec![None, None]]
        );
    }

    #[test]
    fn rows_stop_at_the_first_error() {
        // Two rows of one column; the first cell claims 100 bytes where 4 remain.
        let b = bare_rows(1, 2, &[0, 0, 0, 100, 0, 0, 0, 0]);
        let ResultView::Rows(r) = ResultView::parse(&b, ProtocolVersion::V4).unwrap() else {
            panic!("not rows")
        };
        let rows: Vec<_> = r.rows().collect();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].is_err());
    }

    #[test]
    fn reads_rows_with_global_spec() {
        use bytes::BufMut;
        let mut b = Vec::new();
        b.put_i32(kind::ROWS);
        b.put_i32(metadata_flags::GLOBAL_TABLES_SPEC);
        b.put_i32(2);
        crate::primitives::write_string(&mut b, "ks").unwrap();
        crate::primitives::write_string(&mut b, "t").unwrap();
        crate::primitives::write_string(&mut b, "k").unwrap();
        b.put_u16(0x0009);
        crate::primitives::write_string(&mut b, "v").unwrap();
        b.put_u16(0x0020);
        b.put_u16(0x000D);
        b.put_i32(1);
        crate::primitives::write_bytes(&mut b, Some(&[0, 0, 0, 1])).unwrap();
        crate::primitives::write_bytes(&mut b, None).unwrap();
        let ResultView::Rows(r) = ResultView::parse(&b, ProtocolVersion::V4).unwrap() else {
            panic!("not rows")
        };
        let cols: Vec<_> = r.metadata.columns.unwrap().iter().collect();
        assert_eq!(cols.len(), 2);
        assert_eq!(cols[1].name, "v");
        assert_eq!(
            cols[1].column_type().unwrap(),
            ColumnType::List(Box::new(ColumnType::Varchar))
        );
        let rows: Vec<_> = r.rows().map(|r| r.unwrap()).collect();
        assert_eq!(rows, vec![vec![Some(&[0u8, 0, 0, 1][..]), None]]);
    }
}
