//! Every place autoprep edits a server's answer in place: the Rows cell edits and row drops
//! of `message::rows_edit`, the topology rewrite of `system.local` / `system.peers` answers
//! built on them (compressed bodies included), the v5 "metadata changed" edit of an
//! EXECUTE's Rows, and the SUPPORTED options removed for drivers.
//!
//! The Rows result is built from the fuzzer's structure (columns of any type, paging state,
//! new metadata id, no-metadata flag, cells) or taken as raw bytes. Checked:
//! - no edit panics; an edit that succeeds gives a Rows result that parses, with the same
//!   metadata bytes and row count (zero rows for a drop), the edited cells replaced and every
//!   other cell as it was; an identity edit changes no byte but a null written
//!   with a negative length other than -1, which comes back as -1;
//! - a rewritten topology answer is a Rows result of the same columns, its metadata kept;
//! - the metadata-changed edit removes the flag and the id, and nothing else;
//! - a SUPPORTED answer without the removed keys parses and lost only those keys.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use autoprep::metrics::Metrics;
use autoprep::rewrite::Rewriter;
use autoprep::topology::{
    is_removed_supported_key, keep_event, supported, PreparedRead, Read, SystemTable, Topology,
};
use autoprep_cache::ShapeHash;
use autoprep_fuzz::types::arbitrary_type;
use autoprep_fuzz::wire::{self, Column, Layout};
use autoprep_protocol::compression::{compress, plain_body, Compression};
use autoprep_protocol::envelope::{Envelope, Flags, Opcode, ProtocolVersion};
use autoprep_protocol::message::result::{metadata_flags, ResultView, RowsView};
use autoprep_protocol::message::rows_edit::{drop_rows, edit_cells};
use autoprep_protocol::message::supported::{for_each_option, without_options};
use autoprep_protocol::message::ResponseBody;
use autoprep_protocol::primitives::write_bytes;
use autoprep_protocol::types::ColumnType;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, LazyLock};

const MAX: usize = 1 << 20;

/// Column names of the system tables the topology rewrite edits, and others.
const NAMES: [&str; 14] = [
    "key",
    "rpc_address",
    "broadcast_address",
    "listen_address",
    "native_address",
    "native_transport_address",
    "rpc_port",
    "native_port",
    "native_transport_port",
    "host_id",
    "tokens",
    "peer",
    "data_center",
    "v",
];

#[derive(Debug)]
struct Col(Column);

impl<'a> Arbitrary<'a> for Col {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let name = (*u.choose(&NAMES)?).to_owned();
        let ty = if u.ratio(1, 2)? {
            // The types the system tables give those columns.
            u.choose(&[
                ColumnType::Inet,
                ColumnType::Int,
                ColumnType::Uuid,
                ColumnType::Varchar,
                ColumnType::Set(Box::new(ColumnType::Varchar)),
            ])?
            .clone()
        } else {
            arbitrary_type(u, 2)?
        };
        let table = *u.choose(&["local", "peers", "peers_v2", "t"])?;
        Ok(Col(Column {
            keyspace: "system".into(),
            table: table.into(),
            name,
            ty,
        }))
    }
}

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    version: u8,
    /// Take the message as these bytes instead of building it.
    raw: Option<&'a [u8]>,
    global: bool,
    paging: Option<&'a [u8]>,
    new_metadata_id: Option<&'a [u8]>,
    no_metadata: bool,
    columns: Vec<Col>,
    rows: u8,
    cells: Vec<Option<&'a [u8]>>,
    edit: Vec<bool>,
    replacement: Option<&'a [u8]>,
    table: u8,
    /// The topology read came as an EXECUTE (its columns known from its PREPARE).
    execute: bool,
    /// 0: none, 1: LZ4, 2: Snappy (v3/v4 only).
    compression: u8,
    supported: Vec<(&'a str, Vec<&'a str>)>,
    supported_raw: Option<&'a [u8]>,
}

static TOPOLOGY: LazyLock<Topology> =
    LazyLock::new(|| Topology::new("127.0.0.1:9042", Some("10.1.2.3:9043")).unwrap());
static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::default);
static REWRITER: LazyLock<Rewriter> = LazyLock::new(|| {
    let cfg = autoprep::config::Config::for_upstream("127.0.0.1:9042");
    let cluster = Arc::new(autoprep::cluster::ClusterView::new(false, None));
    Rewriter::new(&cfg, 1, Arc::default(), cluster).unwrap()
});

fuzz_target!(|input: Input<'_>| {
    let version = wire::version(input.version);
    let columns: Vec<Column> = input.columns.iter().map(|c| c.0.clone()).collect();
    let message = match input.raw {
        Some(raw) => raw.to_vec(),
        None => {
            let layout = Layout {
                global: input.global,
                paging: input.paging,
                new_metadata_id: input.new_metadata_id,
                no_metadata: input.no_metadata,
            };
            let mut m = Vec::new();
            let rows = usize::from(input.rows % 16);
            wire::rows_message(&layout, &columns, rows, &input.cells, &mut m);
            m
        }
    };

    rows_edits(&message, version, &input.edit, input.replacement);
    topology(&input, &message, version, &columns);
    metadata_changed(&message, version);
    supported_edit(&input, version);
});

fn rows_of(message: &[u8], version: ProtocolVersion) -> Option<RowsView<'_>> {
    match ResultView::parse(message, version) {
        Ok(ResultView::Rows(r)) => Some(r),
        _ => None,
    }
}

/// The bytes of a Rows message before its row count.
fn metadata_bytes<'m>(message: &'m [u8], rows: &RowsView<'_>) -> &'m [u8] {
    &message[..message.len() - rows.rows_raw.len() - 4]
}

type Cells<'a> = Vec<Vec<Option<&'a [u8]>>>;

fn cells<'a>(rows: &RowsView<'a>) -> Option<Cells<'a>> {
    rows.rows().collect::<Result<Vec<_>, _>>().ok()
}

fn rows_edits(message: &[u8], version: ProtocolVersion, edit: &[bool], replacement: Option<&[u8]>) {
    let mut same = Vec::new();
    let identity = edit_cells(
        message,
        version,
        edit,
        |_, cell, out| write_bytes(out, cell).unwrap(),
        &mut same,
    );
    if identity.is_ok() && same != message {
        // Only a null written with another negative length than -1 (which the spec reads as
        // null too) may come back as -1: the same length, the same cells.
        assert_eq!(
            same.len(),
            message.len(),
            "an identity edit changed the length"
        );
        let before = rows_of(message, version).expect("an edited message is Rows");
        let after = rows_of(&same, version).expect("an edit gives Rows");
        assert_eq!(
            metadata_bytes(message, &before),
            metadata_bytes(&same, &after)
        );
        assert_eq!(
            cells(&before),
            cells(&after),
            "an identity edit changed cells"
        );
    }

    let mut out = Vec::new();
    let edited = edit_cells(
        message,
        version,
        edit,
        |_, _, out| write_bytes(out, replacement).unwrap(),
        &mut out,
    );
    if let Ok(n) = edited {
        assert_eq!(identity.as_ref().ok(), Some(&n));
        let before = rows_of(message, version).expect("an edited message is Rows");
        let after = rows_of(&out, version).expect("an edit gives Rows");
        assert_eq!(
            metadata_bytes(message, &before),
            metadata_bytes(&out, &after)
        );
        assert_eq!(before.row_count, after.row_count);
        let old = cells(&before).expect("the rows edited all parse");
        let new = cells(&after).expect("the edited rows all parse");
        let mut count = 0;
        for (o, n) in old.iter().zip(&new) {
            for (col, (oc, nc)) in o.iter().zip(n).enumerate() {
                if edit.get(col).copied().unwrap_or(false) {
                    assert_eq!(*nc, replacement);
                    count += 1;
                } else {
                    assert_eq!(oc, nc);
                }
            }
        }
        assert_eq!(count, n, "edited cell count");
        assert_eq!(
            &out[out.len() - trailing(&before, &old)..],
            &message[message.len() - trailing(&before, &old)..],
            "bytes after the rows"
        );
    }

    let mut out = Vec::new();
    if let Ok(n) = drop_rows(message, version, &mut out) {
        let before = rows_of(message, version).expect("a message whose rows were dropped is Rows");
        let after = rows_of(&out, version).expect("dropping rows gives Rows");
        assert_eq!(Ok(n), usize::try_from(before.row_count));
        assert_eq!(after.row_count, 0);
        assert!(after.rows_raw.is_empty());
        assert_eq!(
            metadata_bytes(message, &before),
            metadata_bytes(&out, &after)
        );
    }
}

/// How many bytes follow the last row (kept as they were by an edit).
fn trailing(rows: &RowsView<'_>, cells: &Cells<'_>) -> usize {
    let used: usize = cells
        .iter()
        .flatten()
        .map(|c| 4 + c.map_or(0, <[u8]>::len))
        .sum();
    rows.rows_raw.len() - used
}

fn compression_of(input: &Input<'_>, version: ProtocolVersion) -> Option<Compression> {
    if version >= ProtocolVersion::V5 {
        return None;
    }
    match input.compression % 3 {
        1 => Some(Compression::Lz4),
        2 => Some(Compression::Snappy),
        _ => None,
    }
}

/// A response envelope carrying `message`, compressed when `alg` is set.
fn envelope(
    version: ProtocolVersion,
    opcode: Opcode,
    message: &[u8],
    alg: Option<Compression>,
) -> Envelope {
    match alg {
        Some(a) => {
            let mut c = Vec::new();
            compress(a, message, &mut c);
            wire::response(version, Flags::COMPRESSION, opcode, &c)
        }
        None => wire::response(version, 0, opcode, message),
    }
}

fn message_of(env: &Envelope, alg: Option<Compression>) -> Vec<u8> {
    let body = plain_body(env, alg, MAX).expect("an answer the proxy built decompresses");
    let rb = ResponseBody::parse(env.header(), &body).expect("its body parses");
    rb.message.to_vec()
}

fn topology(input: &Input<'_>, message: &[u8], version: ProtocolVersion, columns: &[Column]) {
    let alg = compression_of(input, version);
    let env = envelope(version, Opcode::RESULT, message, alg);
    let table = match input.table % 4 {
        0 => SystemTable::Local,
        1 => SystemTable::Peers,
        2 => SystemTable::PeersV2,
        _ => SystemTable::ClientRoutes,
    };
    let read = if input.execute {
        let mut option = Vec::new();
        let columns = columns
            .iter()
            .map(|c| {
                option.clear();
                autoprep_fuzz::types::write_option(&c.ty, &mut option);
                (c.name.clone(), option.clone())
            })
            .collect();
        Read::Execute(Arc::new(PreparedRead { table, columns }))
    } else {
        Read::Query(table)
    };
    let out = TOPOLOGY.on_response(env.clone(), &read, None, wire(alg), &METRICS);
    if out.as_bytes() == env.as_bytes() {
        return;
    }
    let new = message_of(&out, alg);
    let before = rows_of(message, version).expect("a rewritten topology answer was Rows");
    let after = rows_of(&new, version).expect("a rewritten topology answer is Rows");
    assert_eq!(
        metadata_bytes(message, &before),
        metadata_bytes(&new, &after)
    );
    match table {
        SystemTable::Local => assert_eq!(before.row_count, after.row_count),
        _ => assert_eq!(after.row_count, 0),
    }
    cells(&after).expect("rewritten rows parse");
}

fn metadata_changed(message: &[u8], version: ProtocolVersion) {
    let env = envelope(version, Opcode::RESULT, message, None);
    let out = REWRITER.without_metadata_change(env.clone(), 0, ShapeHash(7), &[1; 16]);
    if out.as_bytes() == env.as_bytes() {
        return;
    }
    let new = message_of(&out, None);
    let before = rows_of(message, version).expect("an edited EXECUTE answer was Rows");
    let after = rows_of(&new, version).expect("an edited EXECUTE answer is Rows");
    assert!(before.metadata.new_metadata_id.is_some());
    assert_eq!(after.metadata.new_metadata_id, None);
    assert_eq!(
        after.metadata.flags,
        before.metadata.flags & !metadata_flags::METADATA_CHANGED
    );
    assert_eq!(after.metadata.paging_state, before.metadata.paging_state);
    assert_eq!(
        after.metadata.columns.map(|c| c.raw()),
        before.metadata.columns.map(|c| c.raw())
    );
    assert_eq!(before.rows_raw, after.rows_raw);
    assert_eq!(before.row_count, after.row_count);
}

fn supported_edit(input: &Input<'_>, version: ProtocolVersion) {
    let body = match input.supported_raw {
        Some(raw) => raw.to_vec(),
        None => {
            let mut b = Vec::new();
            let n = input.supported.len().min(64);
            b.extend_from_slice(&(n as u16).to_be_bytes());
            for (k, vs) in &input.supported[..n] {
                autoprep_fuzz::types::string(k, &mut b);
                b.extend_from_slice(&(vs.len() as u16).to_be_bytes());
                for v in vs {
                    autoprep_fuzz::types::string(v, &mut b);
                }
            }
            b
        }
    };
    let keys = |b: &[u8]| {
        let mut k = Vec::new();
        for_each_option(b, |key, _| k.push(key.to_owned()))
            .ok()
            .map(|_| k)
    };
    if let Ok(Some(kept)) = without_options(&body, is_removed_supported_key) {
        let all = keys(&body).expect("a SUPPORTED body edited was read");
        let left = keys(&kept).expect("an edited SUPPORTED body reads");
        let expected: Vec<String> = all
            .into_iter()
            .filter(|k| !is_removed_supported_key(k))
            .collect();
        assert_eq!(left, expected);
    }
    let alg = compression_of(input, version);
    let env = envelope(version, Opcode::SUPPORTED, &body, alg);
    let out = supported(env.clone(), wire(alg));
    if out.as_bytes() != env.as_bytes() {
        let new = message_of(&out, alg);
        let left = keys(&new).expect("a rebuilt SUPPORTED reads");
        assert!(!left.iter().any(|k| is_removed_supported_key(k)));
    }
    let event = envelope(version, Opcode::EVENT, &body, alg);
    let _ = keep_event(&event, wire(alg));
}

/// The wire of a link that negotiated `compression` (the proxy's leaves read bodies through it).
fn wire(compression: Option<Compression>) -> autoprep::wire::Wire {
    autoprep::wire::Wire {
        compression,
        max_frame: MAX,
    }
}
