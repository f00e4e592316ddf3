//! A stand-in CQL node (protocol v4, no compression, no authentication) that answers every
//! request at once with a canned answer, so that what is measured through a proxy in front of
//! it is the proxy's work and not a server's: READY to STARTUP and REGISTER, SUPPORTED to
//! OPTIONS, a void RESULT to every EXECUTE, BATCH and data QUERY, a PREPARED result with
//! bind-variable metadata to a PREPARE of the table [`TABLE`], and the rows of a one-node
//! cluster to the reads of `system.local`, `system.peers(_v2)` and `system_schema.keyspaces`
//! that autoprep's cluster view sends (spec sections 4.2.1–4.2.5).
//!
//! Each connection is one task: it reads what the socket holds, answers every whole request
//! in it into one buffer and writes that buffer once, so that a batch of requests read at once
//! is answered by one write. It counts the requests it answers, by opcode ([`Seen`]).

use autoprep_protocol::envelope::{Opcode, HEADER_LEN};
use autoprep_protocol::message::result::{kind, metadata_flags, write_prepared, ColumnSpec};
use autoprep_protocol::primitives::{write_bytes, write_string};
use bytes::{Buf, BufMut, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The keyspace and table whose statements the stand-in prepares.
pub const TABLE: (&str, &str) = ("bench", "hop");

/// The columns of [`TABLE`] in order, with their type `[option]`s: a PREPARE's `n` bind
/// markers are the first `n` of them (the statements list their columns in this order).
pub const COLUMNS: [(&str, &[u8]); 4] = [
    ("k", &[0x00, 0x0D]),  // varchar, the partition key
    ("ts", &[0x00, 0x0B]), // timestamp
    ("v", &[0x00, 0x07]),  // double
    ("n", &[0x00, 0x09]),  // int
];

/// The prepared id the stand-in gives every statement it prepares.
pub const PREPARED_ID: [u8; 16] = *b"stand-in-prepare";

const VARCHAR: &[u8] = &[0x00, 0x0D];
const INT: &[u8] = &[0x00, 0x09];
const INET: &[u8] = &[0x00, 0x10];
const SET_OF_VARCHAR: &[u8] = &[0x00, 0x22, 0x00, 0x0D];
const MAP_OF_VARCHAR: &[u8] = &[0x00, 0x21, 0x00, 0x0D, 0x00, 0x0D];

/// Requests answered so far, by kind, over every connection.
#[derive(Debug, Default)]
pub struct Seen {
    pub queries: AtomicU64,
    pub prepares: AtomicU64,
    pub executes: AtomicU64,
    pub other: AtomicU64,
}

impl Seen {
    /// `(queries, prepares, executes, other)`.
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (
            r(&self.queries),
            r(&self.prepares),
            r(&self.executes),
            r(&self.other),
        )
    }
}

/// Listens on an ephemeral loopback port and serves every connection on the current runtime;
/// returns the address and the counts.
pub async fn spawn() -> std::io::Result<(SocketAddr, Arc<Seen>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve(sock, counts.clone()));
        }
    });
    Ok((addr, seen))
}

async fn serve(mut sock: TcpStream, seen: Arc<Seen>) {
    let _ = sock.set_nodelay(true);
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut output = BytesMut::with_capacity(64 * 1024);
    loop {
        match sock.read_buf(&mut input).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while let Some(request) = next_request(&mut input) {
            answer(&request, &mut output, &seen);
        }
        if !output.is_empty() && sock.write_all(&output).await.is_err() {
            return;
        }
        output.clear();
    }
}

/// Splits the next whole request off `input`.
fn next_request(input: &mut BytesMut) -> Option<BytesMut> {
    let head = input.get(..HEADER_LEN)?;
    let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
    (input.len() >= HEADER_LEN + len).then(|| input.split_to(HEADER_LEN + len))
}

/// Appends the answer to `request` (header and body) to `out`.
fn answer(request: &[u8], out: &mut BytesMut, seen: &Seen) {
    let (version, stream, opcode) = (request[0] & 0x7f, [request[2], request[3]], request[4]);
    let body = &request[HEADER_LEN..];
    let start = out.len();
    out.put_u8(0x80 | version);
    out.put_u8(0);
    out.put_slice(&stream);
    let count = |a: &AtomicU64| {
        a.fetch_add(1, Ordering::Relaxed);
    };
    match Opcode(opcode) {
        Opcode::EXECUTE | Opcode::BATCH => {
            count(&seen.executes);
            void(out);
        }
        Opcode::QUERY => {
            count(&seen.queries);
            query(body, out);
        }
        Opcode::PREPARE => {
            count(&seen.prepares);
            prepare(body, out);
        }
        Opcode::OPTIONS => {
            count(&seen.other);
            supported(out);
        }
        _ => {
            // STARTUP, REGISTER.
            count(&seen.other);
            out.put_u8(Opcode::READY.0);
            out.put_u32(0);
        }
    }
    let len = out.len() - start - HEADER_LEN;
    out[start + 5..start + HEADER_LEN].copy_from_slice(&(len as u32).to_be_bytes());
}

/// Opens a RESULT body of `kind` (the length is patched by [`answer`]).
fn result(out: &mut BytesMut, k: i32) {
    out.put_u8(Opcode::RESULT.0);
    out.put_u32(0);
    out.put_i32(k);
}

fn void(out: &mut BytesMut) {
    result(out, kind::VOID);
}

/// The `[long string]` a QUERY or PREPARE body starts with.
fn statement(mut body: &[u8]) -> &[u8] {
    if body.len() < 4 {
        return &[];
    }
    let len = body.get_u32() as usize;
    body.get(..len).unwrap_or(&[])
}

fn query(body: &[u8], out: &mut BytesMut) {
    let text = statement(body);
    // Data statements first, so that they cost the stand-in as little as possible.
    if !text.starts_with(b"SELECT") {
        if let Some(keyspace) = text.strip_prefix(b"USE ") {
            result(out, kind::SET_KEYSPACE);
            let _ = write_string(out, &String::from_utf8_lossy(keyspace));
        } else {
            void(out);
        }
        return;
    }
    let has = |what: &[u8]| text.windows(what.len()).any(|w| w == what);
    if has(b"system.local") {
        rows(
            out,
            ("system", "local"),
            &[
                ("data_center", VARCHAR),
                ("rack", VARCHAR),
                ("tokens", SET_OF_VARCHAR),
                ("partitioner", VARCHAR),
            ],
            &[&[
                b"dc1",
                b"r1",
                // A set of one token: [int n] then n [bytes].
                &[0, 0, 0, 1, 0, 0, 0, 1, b'0'],
                b"org.apache.cassandra.dht.Murmur3Partitioner",
            ]],
        );
    } else if has(b"system.peers_v2") {
        rows(
            out,
            ("system", "peers_v2"),
            &[
                ("native_address", INET),
                ("native_port", INT),
                ("data_center", VARCHAR),
                ("rack", VARCHAR),
                ("tokens", SET_OF_VARCHAR),
            ],
            &[],
        );
    } else if has(b"system.peers") {
        rows(
            out,
            ("system", "peers"),
            &[
                ("rpc_address", INET),
                ("data_center", VARCHAR),
                ("rack", VARCHAR),
                ("tokens", SET_OF_VARCHAR),
            ],
            &[],
        );
    } else if has(b"system_schema.keyspaces") {
        rows(
            out,
            ("system_schema", "keyspaces"),
            &[("keyspace_name", VARCHAR), ("replication", MAP_OF_VARCHAR)],
            &[],
        );
    } else {
        rows(out, ("system", "local"), &[], &[]);
    }
}

/// A Rows result of one table: its columns (name, type) and rows of cells.
fn rows(out: &mut BytesMut, table: (&str, &str), columns: &[(&str, &[u8])], rows: &[&[&[u8]]]) {
    result(out, kind::ROWS);
    out.put_i32(metadata_flags::GLOBAL_TABLES_SPEC);
    out.put_i32(columns.len() as i32);
    let _ = write_string(out, table.0);
    let _ = write_string(out, table.1);
    for (name, type_raw) in columns {
        let _ = write_string(out, name);
        out.put_slice(type_raw);
    }
    out.put_i32(rows.len() as i32);
    for row in rows {
        for cell in *row {
            let _ = write_bytes(out, Some(cell));
        }
    }
}

/// A PREPARED result for a statement of [`TABLE`] with `n` bind markers (the first `n`
/// columns, the first one the partition key), no result columns.
fn prepare(body: &[u8], out: &mut BytesMut) {
    let markers = statement(body).iter().filter(|&&b| b == b'?').count();
    let binds: Vec<ColumnSpec<'_>> = COLUMNS
        .iter()
        .take(markers)
        .map(|(name, type_raw)| ColumnSpec {
            keyspace: TABLE.0,
            table: TABLE.1,
            name,
            type_raw,
        })
        .collect();
    out.put_u8(Opcode::RESULT.0);
    out.put_u32(0);
    // Result metadata: no columns.
    let mut no_result = Vec::with_capacity(8);
    no_result.put_i32(metadata_flags::NO_METADATA);
    no_result.put_i32(0);
    let version = autoprep_protocol::envelope::ProtocolVersion::V4;
    let _ = write_prepared(
        out,
        version,
        &PREPARED_ID,
        None,
        &binds,
        Some(&[0]),
        &no_result,
    );
}

/// SUPPORTED: protocol v4, no compression.
fn supported(out: &mut BytesMut) {
    out.put_u8(Opcode::SUPPORTED.0);
    out.put_u32(0);
    let options: [(&str, &[&str]); 3] = [
        ("CQL_VERSION", &["3.4.7"]),
        ("COMPRESSION", &[]),
        ("PROTOCOL_VERSIONS", &["4/v4"]),
    ];
    out.put_u16(options.len() as u16);
    for (key, values) in options {
        let _ = write_string(out, key);
        out.put_u16(values.len() as u16);
        for v in values {
            let _ = write_string(out, v);
        }
    }
}
