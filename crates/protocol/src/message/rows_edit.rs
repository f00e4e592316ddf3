//! Editing a Rows result (spec section 4.2.5.2) in place of the server's: chosen cells get new
//! values, or every row goes, and nothing else changes. The kind, the metadata (flags, column
//! specs, paging state, v5 new metadata id) and every cell that is not edited are copied byte
//! for byte, in as few slice copies as the edits allow; nothing is decoded beyond the lengths
//! needed to find the cells.
//!
//! The caller decides which columns to edit from the column specs (or from what it knows of
//! the statement when the result carries no metadata); this module only walks and copies.

use super::result::{metadata_flags, ResultView, RowsView};
use crate::envelope::ProtocolVersion;
use crate::error::DecodeError;
use crate::primitives::read_bytes;

/// The Rows result of a RESULT message, or an error when the message is not one.
fn rows_of(message: &[u8], version: ProtocolVersion) -> Result<RowsView<'_>, DecodeError> {
    match ResultView::parse(message, version)? {
        ResultView::Rows(r) => Ok(r),
        other => Err(DecodeError::UnknownValue {
            what: "result kind (expected Rows)",
            value: other.kind() as u32,
        }),
    }
}

/// Offset of the row count in `message`, whose rows start where `rows.rows_raw` does.
fn row_count_offset(message: &[u8], rows: &RowsView<'_>) -> usize {
    // `rows_raw` is the tail of `message`, right after the 4-byte row count.
    message.len() - rows.rows_raw.len() - 4
}

/// Appends to `out` the RESULT `message` (kind Rows) with the cells of every column `edit`
/// marks rewritten by `write`, and returns how many cells were rewritten.
///
/// `edit[i]` says whether column `i` is rewritten (columns past the end of `edit` are kept).
/// For each such cell, `write(column, cell, out)` is called with the cell as the server sent
/// it (`None` for null) and must append one whole `[bytes]` (length included) to `out`. All
/// other bytes are copied unchanged. On error `out` may hold a partial write.
pub fn edit_cells(
    message: &[u8],
    version: ProtocolVersion,
    edit: &[bool],
    mut write: impl FnMut(usize, Option<&[u8]>, &mut Vec<u8>),
    out: &mut Vec<u8>,
) -> Result<usize, DecodeError> {
    let rows = rows_of(message, version)?;
    let columns = usize::try_from(rows.metadata.column_count).unwrap_or(0);
    let row_count = usize::try_from(rows.row_count).unwrap_or(0);
    out.reserve(message.len());
    let mut rest = rows.rows_raw;
    // Start of the bytes not yet copied to `out`.
    let mut copied_to = 0;
    let mut edited = 0;
    for _ in 0..row_count {
        for col in 0..columns {
            let start = message.len() - rest.len();
            let cell = read_bytes(&mut rest)?;
            if edit.get(col).copied().unwrap_or(false) {
                out.extend_from_slice(&message[copied_to..start]);
                write(col, cell, out);
                copied_to = message.len() - rest.len();
                edited += 1;
            }
        }
    }
    out.extend_from_slice(&message[copied_to..]);
    Ok(edited)
}

/// Appends to `out` the RESULT `message` (kind Rows) with no rows: the metadata, paging state
/// included, stays as it is and the row count becomes 0. Returns how many rows were dropped.
pub fn drop_rows(
    message: &[u8],
    version: ProtocolVersion,
    out: &mut Vec<u8>,
) -> Result<usize, DecodeError> {
    let rows = rows_of(message, version)?;
    let at = row_count_offset(message, &rows);
    out.extend_from_slice(&message[..at]);
    out.extend_from_slice(&0i32.to_be_bytes());
    Ok(usize::try_from(rows.row_count).unwrap_or(0))
}

/// A v5 Rows result whose metadata changed since PREPARE (spec v5 section 4.2.5.2: the
/// `Metadata_changed` flag, then `<new_metadata_id>` after the paging state), as the answer to
/// a QUERY carries it: appends to `out` the RESULT `message` without that flag and id, every
/// other byte copied, and returns the new metadata id and the new column specs (raw) the
/// server sent. `Ok(None)` when `message` is a Rows result whose metadata did not change (the
/// caller keeps it as it is).
pub fn without_metadata_changed<'a>(
    message: &'a [u8],
    version: ProtocolVersion,
    out: &mut Vec<u8>,
) -> Result<Option<ChangedMetadata<'a>>, DecodeError> {
    let rows = rows_of(message, version)?;
    let Some(new_id) = rows.metadata.new_metadata_id else {
        return Ok(None);
    };
    // kind (4), flags (4), column count (4), then the paging state when there are more pages.
    let flags_at = 4;
    let mut id_at = 12;
    if rows.metadata.flags & metadata_flags::HAS_MORE_PAGES != 0 {
        // Its [bytes]: the length, then as many bytes (none when it is null, length < 0).
        id_at += 4 + rows.metadata.paging_state.map_or(0, <[u8]>::len);
    }
    let id_end = id_at + 2 + new_id.len();
    let flags = rows.metadata.flags & !metadata_flags::METADATA_CHANGED;
    out.reserve(message.len());
    out.extend_from_slice(&message[..flags_at]);
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&message[flags_at + 4..id_at]);
    out.extend_from_slice(&message[id_end..]);
    let columns = rows.metadata.columns.map_or(&[][..], |c| c.raw());
    Ok(Some(ChangedMetadata {
        id: new_id,
        columns,
    }))
}

/// What a v5 Rows result said changed (see [`without_metadata_changed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangedMetadata<'a> {
    /// The new result metadata id.
    pub id: &'a [u8],
    /// The new column specs, raw.
    pub columns: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::result::{kind, metadata_flags};
    use crate::primitives::{write_bytes, write_string};
    use bytes::BufMut;
    use proptest::prelude::*;

    /// A Rows message with a global table spec `system.local`, columns (name, type id), an
    /// optional paging state, and `rows` of cells.
    fn rows_message(
        columns: &[(&str, u16)],
        paging: Option<&[u8]>,
        rows: &[Vec<Option<Vec<u8>>>],
    ) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_i32(kind::ROWS);
        let mut flags = metadata_flags::GLOBAL_TABLES_SPEC;
        if paging.is_some() {
            flags |= metadata_flags::HAS_MORE_PAGES;
        }
        b.put_i32(flags);
        b.put_i32(columns.len() as i32);
        if let Some(p) = paging {
            write_bytes(&mut b, Some(p)).unwrap();
        }
        write_string(&mut b, "system").unwrap();
        write_string(&mut b, "local").unwrap();
        for (name, ty) in columns {
            write_string(&mut b, name).unwrap();
            b.put_u16(*ty);
        }
        b.put_i32(rows.len() as i32);
        for row in rows {
            for cell in row {
                write_bytes(&mut b, cell.as_deref()).unwrap();
            }
        }
        b
    }

    fn cells(message: &[u8]) -> Vec<Vec<Option<Vec<u8>>>> {
        let ResultView::Rows(r) = ResultView::parse(message, ProtocolVersion::V4).unwrap() else {
            panic!("not rows")
        };
        r.rows()
            .map(|row| {
                row.unwrap()
                    .into_iter()
                    .map(|c| c.map(<[u8]>::to_vec))
                    .collect()
            })
            .collect()
    }

    const COLS: &[(&str, u16)] = &[
        ("key", 0x000D),
        ("rpc_address", 0x0010),
        ("rpc_port", 0x0009),
    ];

    #[test]
    fn edits_only_the_chosen_cells() {
        let rows = vec![
            vec![
                Some(b"local".to_vec()),
                Some(vec![10, 0, 0, 7]),
                Some(vec![0, 0, 0x23, 0x52]),
            ],
            vec![None, None, Some(vec![0, 0, 0, 1])],
        ];
        let msg = rows_message(COLS, Some(b"state"), &rows);
        let mut out = Vec::new();
        let n = edit_cells(
            &msg,
            ProtocolVersion::V4,
            &[false, true],
            |col, cell, out| {
                assert_eq!(col, 1);
                assert!(cell.is_none() || cell == Some(&[10, 0, 0, 7][..]));
                write_bytes(out, Some(&[127, 0, 0, 9])).unwrap();
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(n, 2);
        let want = vec![
            vec![
                Some(b"local".to_vec()),
                Some(vec![127, 0, 0, 9]),
                Some(vec![0, 0, 0x23, 0x52]),
            ],
            vec![None, Some(vec![127, 0, 0, 9]), Some(vec![0, 0, 0, 1])],
        ];
        assert_eq!(out, rows_message(COLS, Some(b"state"), &want));
    }

    #[test]
    fn no_edit_copies_the_message_exactly() {
        let rows = vec![vec![Some(b"local".to_vec()), None, Some(vec![0, 0, 0, 1])]];
        let msg = rows_message(COLS, None, &rows);
        let mut out = Vec::new();
        let n = edit_cells(
            &msg,
            ProtocolVersion::V5,
            &[],
            |_, _, _| unreachable!(),
            &mut out,
        )
        .unwrap();
        assert_eq!((n, out), (0, msg));
    }

    #[test]
    fn cells_may_change_length() {
        let rows = vec![vec![Some(b"local".to_vec()), Some(vec![1, 2, 3, 4]), None]];
        let msg = rows_message(COLS, None, &rows);
        let mut out = Vec::new();
        edit_cells(
            &msg,
            ProtocolVersion::V4,
            &[true, true, true],
            |col, _, out| match col {
                0 => write_bytes(out, None).unwrap(),
                1 => write_bytes(out, Some(&[0xfe; 16])).unwrap(),
                _ => write_bytes(out, Some(&[0, 0, 0, 2])).unwrap(),
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(
            cells(&out),
            vec![vec![None, Some(vec![0xfe; 16]), Some(vec![0, 0, 0, 2])]]
        );
    }

    #[test]
    fn dropping_rows_keeps_metadata_and_paging_state() {
        let rows = vec![vec![Some(b"a".to_vec()), None, None]; 3];
        let msg = rows_message(COLS, Some(b"more"), &rows);
        let mut out = Vec::new();
        assert_eq!(drop_rows(&msg, ProtocolVersion::V4, &mut out).unwrap(), 3);
        assert_eq!(out, rows_message(COLS, Some(b"more"), &[]));
        let ResultView::Rows(r) = ResultView::parse(&out, ProtocolVersion::V4).unwrap() else {
            panic!("not rows")
        };
        assert_eq!(r.metadata.paging_state, Some(&b"more"[..]));
        assert_eq!(r.row_count, 0);
    }

    #[test]
    fn other_kinds_and_truncated_rows_are_errors() {
        let void = kind::VOID.to_be_bytes();
        assert!(edit_cells(
            &void,
            ProtocolVersion::V4,
            &[true],
            |_, _, _| {},
            &mut Vec::new()
        )
        .is_err());
        assert!(drop_rows(&void, ProtocolVersion::V4, &mut Vec::new()).is_err());
        let rows = vec![vec![Some(b"local".to_vec()), Some(vec![1, 2, 3, 4]), None]];
        let mut msg = rows_message(COLS, None, &rows);
        msg.truncate(msg.len() - 2);
        assert!(edit_cells(
            &msg,
            ProtocolVersion::V4,
            &[true],
            |_, _, o| o.push(0),
            &mut Vec::new()
        )
        .is_err());
    }

    proptest! {
        /// Rewriting a cell to the value it had changes nothing, whatever the cells.
        #[test]
        fn identity_edit_is_the_identity(
            rows in proptest::collection::vec(
                proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12)), 3),
                0..6),
            edit in proptest::collection::vec(any::<bool>(), 0..4),
        ) {
            let msg = rows_message(COLS, Some(b"p"), &rows);
            let mut out = Vec::new();
            edit_cells(&msg, ProtocolVersion::V4, &edit, |_, cell, out| write_bytes(out, cell).unwrap(), &mut out).unwrap();
            prop_assert_eq!(out, msg);
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut b = kind::ROWS.to_be_bytes().to_vec();
            b.extend_from_slice(&body);
            let _ = edit_cells(&b, ProtocolVersion::V5, &[true, false, true], |_, c, o| write_bytes(o, c).unwrap(), &mut Vec::new());
            let _ = drop_rows(&b, ProtocolVersion::V5, &mut Vec::new());
        }
    }

    /// Found by the `edits` fuzz target: more pages announced with a null paging state (a
    /// [bytes] of length -1) still has its 4 length bytes before the new metadata id.
    #[test]
    fn metadata_changed_after_a_null_paging_state() {
        let mut m = Vec::new();
        m.put_i32(kind::ROWS);
        let flags = metadata_flags::NO_METADATA
            | metadata_flags::HAS_MORE_PAGES
            | metadata_flags::METADATA_CHANGED;
        m.put_i32(flags);
        m.put_i32(1);
        write_bytes(&mut m, None).unwrap();
        m.put_u16(3);
        m.extend_from_slice(b"new");
        m.put_i32(0);
        let mut out = Vec::new();
        let changed = without_metadata_changed(&m, ProtocolVersion::V5, &mut out)
            .unwrap()
            .expect("changed");
        assert_eq!(changed.id, b"new");
        let mut expected = m[..4].to_vec();
        expected.extend_from_slice(&(flags & !metadata_flags::METADATA_CHANGED).to_be_bytes());
        expected.extend_from_slice(&m[8..16]);
        expected.extend_from_slice(&m[21..]);
        assert_eq!(out, expected);
        let ResultView::Rows(r) = ResultView::parse(&out, ProtocolVersion::V5).unwrap() else {
            panic!("not rows")
        };
        assert_eq!(r.metadata.paging_state, None);
        assert_eq!(r.metadata.new_metadata_id, None);
    }

    #[test]
    fn metadata_changed_is_taken_out_byte_for_byte() {
        // v5 Rows: flags GLOBAL_TABLES_SPEC | HAS_MORE_PAGES | METADATA_CHANGED, 1 column.
        let mut m = Vec::new();
        m.put_i32(kind::ROWS);
        let flags = metadata_flags::GLOBAL_TABLES_SPEC
            | metadata_flags::HAS_MORE_PAGES
            | metadata_flags::METADATA_CHANGED;
        m.put_i32(flags);
        m.put_i32(1);
        write_bytes(&mut m, Some(b"page")).unwrap();
        m.put_u16(3);
        m.extend_from_slice(b"new");
        let specs_at = m.len();
        write_string(&mut m, "ks").unwrap();
        write_string(&mut m, "t").unwrap();
        write_string(&mut m, "v").unwrap();
        m.put_u16(0x0009);
        let specs_end = m.len();
        m.put_i32(1);
        write_bytes(&mut m, Some(&[0, 0, 0, 7])).unwrap();

        let mut out = Vec::new();
        let ChangedMetadata { id, columns } =
            without_metadata_changed(&m, ProtocolVersion::V5, &mut out)
                .unwrap()
                .expect("changed");
        assert_eq!(id, b"new");
        let ResultView::Rows(before) = ResultView::parse(&m, ProtocolVersion::V5).unwrap() else {
            panic!("not rows")
        };
        assert_eq!(Some(columns), before.metadata.columns.map(|c| c.raw()));
        assert!(m[specs_at..specs_end].ends_with(columns));
        // The same message, without the flag and the id.
        let mut expected = m[..4].to_vec();
        expected.extend_from_slice(&(flags & !metadata_flags::METADATA_CHANGED).to_be_bytes());
        expected.extend_from_slice(&m[8..specs_at - 5]);
        expected.extend_from_slice(&m[specs_at..]);
        assert_eq!(out, expected);
        let ResultView::Rows(r) = ResultView::parse(&out, ProtocolVersion::V5).unwrap() else {
            panic!("not rows")
        };
        assert_eq!(r.metadata.new_metadata_id, None);
        assert_eq!(r.metadata.paging_state, Some(&b"page"[..]));
        assert_eq!(r.row_count, 1);

        // Unchanged metadata: nothing to do.
        let plain = rows_message(COLS, None, &[]);
        let mut out = Vec::new();
        assert_eq!(
            without_metadata_changed(&plain, ProtocolVersion::V5, &mut out).unwrap(),
            None
        );
        assert!(out.is_empty());
    }
}
