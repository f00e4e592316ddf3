//! `token()` and `partition_token()` against a real server's `token(...)`.
//!
//! For every type a partition key may have (duration cannot be one) and for composite keys of
//! two and three components, the test writes a few hundred rows with random literals, then
//! reads `SELECT token(pk...), pk... FROM t`: the server returns both its token and the raw
//! serialized key columns, so the test never encodes a value itself. Every row's token must equal
//! the crate's token of those bytes.
//!
//! The server is `AUTOPREP_TEST_UPSTREAM` (host:port) or 127.0.0.1:9042 (`bash
//! scripts/cassandra.sh start` runs one). When nothing answers there the tests print why and
//! pass without checking anything. `AUTOPREP_TEST_SEED` replays a run (the seed is printed).
//!
//! The client is a minimal blocking CQL v4 connection over the workspace's protocol crate:
//! STARTUP, then QUERY with paging, one request at a time.

use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::message::query::{encode_query, QueryParams};
use autoprep_protocol::message::{ErrorView, ResponseBody, ResultView};
use autoprep_protocol::primitives::write_string_map;
use autoprep_routing::{
    partition_token, replicas, routing_key, token, Node, NodeId, ReplicaMap, ReplicationStrategy,
    Ring, Token,
};
use bytes::BytesMut;
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Rows per type.
const ROWS: usize = 300;
const CONSISTENCY_ONE: u16 = 0x0001;

// ---------------------------------------------------------------------------------------------
// A minimal blocking CQL client.

/// Result rows, cells raw.
type Rows = Vec<Vec<Option<Vec<u8>>>>;

struct Conn {
    sock: TcpStream,
    buf: BytesMut,
    stream: i16,
}

impl Conn {
    /// Connects and completes STARTUP; an error here means "no server".
    fn connect(addr: &str) -> Res<Conn> {
        let mut last = None;
        for sa in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&sa, Duration::from_secs(3)) {
                Ok(sock) => {
                    sock.set_read_timeout(Some(Duration::from_secs(60)))?;
                    sock.set_nodelay(true)?;
                    let mut c = Conn {
                        sock,
                        buf: BytesMut::new(),
                        stream: 0,
                    };
                    let mut body = Vec::new();
                    write_string_map(&mut body, &[("CQL_VERSION", "3.0.0")])?;
                    let ready = c.request(Opcode::STARTUP, &body)?;
                    if ready.header().opcode != Opcode::READY {
                        return Err(format!(
                            "STARTUP answered with {} (authentication is not supported here)",
                            ready.header().opcode.name()
                        )
                        .into());
                    }
                    return Ok(c);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or_else(|| format!("{addr} resolves to nothing").into(), Into::into))
    }

    fn request(&mut self, opcode: Opcode, body: &[u8]) -> Res<Envelope> {
        self.stream = (self.stream + 1) % 32000;
        let env = Envelope::new(
            Header {
                version: ProtocolVersion::V4,
                direction: Direction::Request,
                flags: Flags(0),
                stream: StreamId(self.stream),
                opcode,
                length: 0,
            },
            body,
        );
        self.sock.write_all(env.as_bytes())?;
        let dec = EnvelopeDecoder::new(Direction::Response, 256 << 20);
        loop {
            if let Some(e) = dec.decode(&mut self.buf)? {
                if e.header().stream == StreamId(self.stream) {
                    return Ok(e);
                }
                continue; // events
            }
            let mut chunk = [0u8; 65536];
            let n = self.sock.read(&mut chunk)?;
            if n == 0 {
                return Err("connection closed by the server".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Runs a statement; its rows (all pages) if it returns rows. A server error is an `Err`.
    fn query(&mut self, cql: &str) -> Res<Rows> {
        let mut rows = Vec::new();
        let mut paging: Option<Vec<u8>> = None;
        loop {
            let params = QueryParams {
                consistency: CONSISTENCY_ONE,
                page_size: Some(5000),
                paging_state: paging.as_deref(),
                ..Default::default()
            };
            let mut body = Vec::new();
            encode_query(ProtocolVersion::V4, cql.as_bytes(), &params, &mut body)?;
            let e = self.request(Opcode::QUERY, &body)?;
            let msg = ResponseBody::parse(e.header(), e.body())?.message;
            if e.header().opcode == Opcode::ERROR {
                let err = ErrorView::parse(msg, ProtocolVersion::V4)?;
                return Err(
                    format!("{cql}: server error 0x{:04x}: {}", err.code, err.message).into(),
                );
            }
            match ResultView::parse(msg, ProtocolVersion::V4)? {
                ResultView::Rows(r) => {
                    for row in r.rows() {
                        rows.push(row?.into_iter().map(|c| c.map(<[u8]>::to_vec)).collect());
                    }
                    match r.metadata.paging_state {
                        Some(p) => paging = Some(p.to_vec()),
                        None => return Ok(rows),
                    }
                }
                _ => return Ok(rows),
            }
        }
    }
}

/// The server under test, or `None` (with the reason printed) when none answers.
fn server() -> Option<Conn> {
    let addr = std::env::var("AUTOPREP_TEST_UPSTREAM")
        .ok()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "127.0.0.1:9042".into());
    match Conn::connect(&addr) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!(
                "SKIPPED: no CQL server answers at {addr} ({e}); start one with \
                 `bash scripts/cassandra.sh start` or set AUTOPREP_TEST_UPSTREAM"
            );
            None
        }
    }
}

fn long(cell: &Option<Vec<u8>>) -> i64 {
    let b = cell.as_deref().expect("token() is never null");
    i64::from_be_bytes(b.try_into().expect("token() is a bigint"))
}

/// The local node's datacenter (for a NetworkTopologyStrategy keyspace).
fn local_dc(c: &mut Conn) -> Res<String> {
    let rows = c.query("SELECT data_center FROM system.local")?;
    let cell = rows
        .first()
        .and_then(|r| r[0].clone())
        .ok_or("system.local has no data_center")?;
    Ok(String::from_utf8(cell)?)
}

fn fresh_keyspace(c: &mut Conn, ks: &str, replication: &str) -> Res<()> {
    c.query(&format!("DROP KEYSPACE IF EXISTS {ks}"))?;
    c.query(&format!(
        "CREATE KEYSPACE {ks} WITH replication = {replication}"
    ))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Random literals.

/// SplitMix64: small, seedable, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias does not matter here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn seed() -> u64 {
    let seed = std::env::var("AUTOPREP_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_70c3_2025);
    eprintln!("AUTOPREP_TEST_SEED={seed}");
    seed
}

/// An integer literal of `bits` bits, edges now and then.
fn int_lit(r: &mut Rng, bits: u32) -> String {
    let min = -(1i128 << (bits - 1));
    let max = (1i128 << (bits - 1)) - 1;
    let v = match r.below(40) {
        0 => min,
        1 => max,
        2 => 0,
        3 => -1,
        _ => {
            let span = (max - min + 1) as u128;
            min + (u128::from(r.next()) % span) as i128
        }
    };
    v.to_string()
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Text with ASCII (quotes included), Latin-1, Greek, CJK and emoji characters.
fn text_lit(r: &mut Rng, min_len: u64) -> String {
    let len = min_len + r.below(40);
    let s: String = (0..len)
        .map(|_| {
            let (lo, hi) = match r.below(6) {
                0 | 1 => (0x20, 0x7e),
                2 => (0xa0, 0xff),
                3 => (0x391, 0x3c9),
                4 => (0x4e00, 0x9fff),
                _ => (0x1f600, 0x1f64f),
            };
            char::from_u32(lo + r.below(u64::from(hi - lo + 1)) as u32).unwrap_or('x')
        })
        .collect();
    quote(&s)
}

fn ascii_lit(r: &mut Rng) -> String {
    let len = 1 + r.below(40);
    let s: String = (0..len)
        .map(|_| char::from(0x20 + r.below(95) as u8))
        .collect();
    quote(&s)
}

fn blob_lit(r: &mut Rng, min_len: u64) -> String {
    // Lengths around the 16-byte block size matter most for the hash.
    let len = (min_len + r.below(64)) as usize;
    let hex: String = r.bytes(len).iter().map(|b| format!("{b:02x}")).collect();
    format!("0x{hex}")
}

fn uuid_lit(r: &mut Rng, version1: bool) -> String {
    let mut b = r.bytes(16);
    if version1 {
        b[6] = (b[6] & 0x0f) | 0x10;
        b[8] = (b[8] & 0x3f) | 0x80;
    }
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn timestamp_lit(r: &mut Rng) -> String {
    // Milliseconds, roughly years -33000..37000.
    let v = (r.next() % (1 << 51)) as i64 - (1 << 50);
    v.to_string()
}

fn date_lit(r: &mut Rng) -> String {
    if r.chance(2) {
        // A raw day count, epoch at 2^31.
        (r.next() % (1 << 32)).to_string()
    } else {
        format!(
            "'{:04}-{:02}-{:02}'",
            1 + r.below(9999),
            1 + r.below(12),
            1 + r.below(28)
        )
    }
}

fn time_lit(r: &mut Rng) -> String {
    r.below(86_400_000_000_000).to_string()
}

fn double_lit(r: &mut Rng) -> String {
    let v = f64::from_bits(r.next());
    float_text(v.is_nan(), v.is_infinite(), v < 0.0, format!("{v:e}"))
}

fn float_lit(r: &mut Rng) -> String {
    let v = f32::from_bits(r.next() as u32);
    float_text(v.is_nan(), v.is_infinite(), v < 0.0, format!("{v:e}"))
}

fn float_text(nan: bool, inf: bool, neg: bool, shortest: String) -> String {
    match (nan, inf, neg) {
        (true, _, _) => "NaN".into(),
        (_, true, true) => "-Infinity".into(),
        (_, true, false) => "Infinity".into(),
        _ => shortest,
    }
}

fn digits(r: &mut Rng, max: u64) -> String {
    let n = 1 + r.below(max);
    (0..n)
        .map(|_| char::from(b'0' + r.below(10) as u8))
        .collect()
}

fn decimal_lit(r: &mut Rng) -> String {
    let mut s = String::new();
    if r.chance(2) {
        s.push('-');
    }
    s += &digits(r, 30);
    if r.chance(2) {
        s.push('.');
        s += &digits(r, 20);
    }
    if r.chance(3) {
        s += &format!("e{}", r.below(80) as i64 - 40);
    }
    s
}

fn varint_lit(r: &mut Rng) -> String {
    let sign = if r.chance(2) { "-" } else { "" };
    format!("{sign}{}", digits(r, 60))
}

fn inet_lit(r: &mut Rng) -> String {
    if r.chance(2) {
        let b = r.bytes(4);
        format!("'{}.{}.{}.{}'", b[0], b[1], b[2], b[3])
    } else {
        let groups: Vec<String> = (0..8).map(|_| format!("{:x}", r.next() as u16)).collect();
        format!("'{}'", groups.join(":"))
    }
}

fn list_lit(r: &mut Rng, elem: Gen, open: &str, close: &str) -> String {
    let n = r.below(6);
    let items: Vec<String> = (0..n).map(|_| elem(r)).collect();
    format!("{open}{}{close}", items.join(", "))
}

fn int32(r: &mut Rng) -> String {
    int_lit(r, 32)
}
fn int64(r: &mut Rng) -> String {
    int_lit(r, 64)
}
fn text1(r: &mut Rng) -> String {
    text_lit(r, 1)
}
fn text0(r: &mut Rng) -> String {
    text_lit(r, 0)
}
fn blob0(r: &mut Rng) -> String {
    blob_lit(r, 0)
}
fn boolean_lit(r: &mut Rng) -> String {
    r.chance(2).to_string()
}
fn int_list_lit(r: &mut Rng) -> String {
    list_lit(r, int32, "[", "]")
}
fn udt_lit(r: &mut Rng) -> String {
    let mut fields = Vec::new();
    if !r.chance(4) {
        fields.push(format!("x: {}", int32(r)));
    }
    if !r.chance(4) {
        fields.push(format!("y: {}", text0(r)));
    }
    if !r.chance(4) || fields.is_empty() {
        // `{}` would be an (empty) set literal: keep at least one field.
        fields.push(format!("z: {}", int_list_lit(r)));
    }
    format!("{{{}}}", fields.join(", "))
}
fn maybe_null(r: &mut Rng, f: Gen) -> String {
    if r.chance(5) {
        "null".into()
    } else {
        f(r)
    }
}

/// A literal generator.
type Gen = fn(&mut Rng) -> String;

/// Single-column partition keys: table suffix, CQL type, literals.
fn single_cases() -> Vec<(&'static str, &'static str, Gen)> {
    vec![
        ("int", "int", int32),
        ("bigint", "bigint", int64),
        ("smallint", "smallint", |r| int_lit(r, 16)),
        ("tinyint", "tinyint", |r| int_lit(r, 8)),
        ("text", "text", text1),
        ("varchar", "varchar", text1),
        ("ascii", "ascii", ascii_lit),
        ("blob", "blob", |r| blob_lit(r, 1)),
        ("uuid", "uuid", |r| uuid_lit(r, false)),
        ("timeuuid", "timeuuid", |r| uuid_lit(r, true)),
        ("timestamp", "timestamp", timestamp_lit),
        ("date", "date", date_lit),
        ("time", "time", time_lit),
        ("boolean", "boolean", boolean_lit),
        ("double", "double", double_lit),
        ("float", "float", float_lit),
        ("decimal", "decimal", decimal_lit),
        ("varint", "varint", varint_lit),
        ("inet", "inet", inet_lit),
        ("list", "frozen<list<int>>", int_list_lit),
        ("set", "frozen<set<text>>", |r| list_lit(r, text0, "{", "}")),
        ("map", "frozen<map<int, text>>", |r| {
            list_lit(r, |r| format!("{}: {}", int32(r), text0(r)), "{", "}")
        }),
        ("nested", "frozen<map<text, frozen<list<bigint>>>>", |r| {
            list_lit(
                r,
                |r| format!("{}: {}", text0(r), list_lit(r, int64, "[", "]")),
                "{",
                "}",
            )
        }),
        ("tuple", "frozen<tuple<int, text, bigint>>", |r| {
            format!(
                "({}, {}, {})",
                maybe_null(r, int32),
                maybe_null(r, text0),
                maybe_null(r, int64)
            )
        }),
        ("udt", "frozen<pt>", udt_lit),
    ]
}

/// Composite partition keys: table suffix, then each component's CQL type and literals. Empty
/// text and blob components are allowed (only a whole key may not be empty).
fn composite_cases() -> Vec<(&'static str, Vec<(&'static str, Gen)>)> {
    vec![
        ("int_text", vec![("int", int32), ("text", text0)]),
        (
            "uuid_bigint_blob",
            vec![
                ("uuid", |r| uuid_lit(r, false)),
                ("bigint", int64),
                ("blob", blob0),
            ],
        ),
        (
            "text_list_boolean",
            vec![
                ("text", text0),
                ("frozen<list<int>>", int_list_lit),
                ("boolean", boolean_lit),
            ],
        ),
        (
            "timestamp_inet",
            vec![("timestamp", timestamp_lit), ("inet", inet_lit)],
        ),
        (
            "blob_blob_blob",
            vec![("blob", blob0), ("blob", blob0), ("blob", blob0)],
        ),
        ("text_text", vec![("text", text0), ("text", text0)]),
        (
            "ascii_double_decimal",
            vec![
                ("ascii", ascii_lit),
                ("double", double_lit),
                ("decimal", decimal_lit),
            ],
        ),
        (
            "date_time_varint",
            vec![
                ("date", date_lit),
                ("time", time_lit),
                ("varint", varint_lit),
            ],
        ),
        (
            "tinyint_float_timeuuid",
            vec![
                ("tinyint", |r| int_lit(r, 8)),
                ("float", float_lit),
                ("timeuuid", |r| uuid_lit(r, true)),
            ],
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// Every single-column partition-key type: the token of the raw key equals the server's.
#[test]
fn single_column_tokens_match_the_server() {
    let Some(mut c) = server() else { return };
    let mut rng = Rng(seed());
    let ks = "autoprep_routing_single";
    let dc = local_dc(&mut c).unwrap();
    fresh_keyspace(
        &mut c,
        ks,
        &format!("{{'class': 'NetworkTopologyStrategy', {}: 1}}", quote(&dc)),
    )
    .unwrap();
    c.query(&format!(
        "CREATE TYPE {ks}.pt (x int, y text, z frozen<list<int>>)"
    ))
    .unwrap();

    let mut total = 0;
    let mut summary = Vec::new();
    for (name, cql, gen) in single_cases() {
        let table = format!("{ks}.t_{name}");
        c.query(&format!("CREATE TABLE {table} (k {cql} PRIMARY KEY)"))
            .unwrap();
        let mut literals = HashSet::new();
        for _ in 0..ROWS {
            let lit = gen(&mut rng);
            c.query(&format!("INSERT INTO {table} (k) VALUES ({lit})"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            literals.insert(lit);
        }
        let rows = c
            .query(&format!("SELECT token(k), k FROM {table}"))
            .unwrap();
        assert!(
            rows.len() >= literals.len().min(2),
            "{name}: {} rows for {} literals",
            rows.len(),
            literals.len()
        );
        for row in &rows {
            let server = long(&row[0]);
            let key = row[1].as_deref().expect("a key column is never null");
            assert_eq!(token(key), Token(server), "{name}: key {key:02x?}");
            assert_eq!(routing_key(&[Some(key)]).unwrap().as_deref(), Some(key));
            assert_eq!(partition_token(&[Some(key)]).unwrap(), Some(Token(server)));
        }
        total += rows.len();
        summary.push(format!("{name} {}", rows.len()));
    }
    eprintln!(
        "single-column keys checked: {total} ({})",
        summary.join(", ")
    );
    c.query(&format!("DROP KEYSPACE {ks}")).unwrap();
}

/// Composite partition keys of two and three components.
#[test]
fn composite_tokens_match_the_server() {
    let Some(mut c) = server() else { return };
    let mut rng = Rng(seed() ^ 0xc0);
    let ks = "autoprep_routing_composite";
    fresh_keyspace(
        &mut c,
        ks,
        "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    )
    .unwrap();

    let mut total = 0;
    let mut summary = Vec::new();
    for (name, cols) in composite_cases() {
        let table = format!("{ks}.t_{name}");
        let names: Vec<String> = (0..cols.len()).map(|i| format!("c{i}")).collect();
        let defs: Vec<String> = names
            .iter()
            .zip(&cols)
            .map(|(n, (cql, _))| format!("{n} {cql}"))
            .collect();
        c.query(&format!(
            "CREATE TABLE {table} ({}, PRIMARY KEY (({})))",
            defs.join(", "),
            names.join(", ")
        ))
        .unwrap();
        for _ in 0..ROWS {
            let lits: Vec<String> = cols.iter().map(|(_, gen)| gen(&mut rng)).collect();
            c.query(&format!(
                "INSERT INTO {table} ({}) VALUES ({})",
                names.join(", "),
                lits.join(", ")
            ))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let rows = c
            .query(&format!(
                "SELECT token({0}), {0} FROM {table}",
                names.join(", ")
            ))
            .unwrap();
        assert!(rows.len() > 1, "{name}: {} rows", rows.len());
        for row in &rows {
            let server = Token(long(&row[0]));
            let comps: Vec<Option<&[u8]>> = row[1..].iter().map(|c| c.as_deref()).collect();
            assert!(
                comps.iter().all(Option::is_some),
                "{name}: null key component"
            );
            let key = routing_key(&comps).unwrap().unwrap();
            assert_eq!(token(&key), server, "{name}: key {key:02x?}");
            assert_eq!(partition_token(&comps).unwrap(), Some(server));
        }
        total += rows.len();
        summary.push(format!("{name} {}", rows.len()));
    }
    eprintln!("composite keys checked: {total} ({})", summary.join(", "));
    c.query(&format!("DROP KEYSPACE {ks}")).unwrap();
}

/// Every keyspace's replication map parses, and on the node's own ring every key's replicas
/// are that node (a one-node cluster cannot say more).
#[test]
fn server_replication_maps_and_ring() {
    let Some(mut c) = server() else { return };
    let local = c
        .query("SELECT data_center, rack, tokens FROM system.local")
        .unwrap();
    let row = &local[0];
    let text = |cell: &Option<Vec<u8>>| String::from_utf8(cell.clone().unwrap()).unwrap();
    let tokens: Vec<Token> = decode_text_collection(row[2].as_deref().unwrap())
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
    let dc = text(&row[0]);
    let ring = Ring::new([Node {
        id: NodeId(0),
        datacenter: dc.clone(),
        rack: text(&row[1]),
        tokens,
    }])
    .unwrap();
    assert_eq!(ring.node_count(), 1);

    let keyspaces = c
        .query("SELECT keyspace_name, replication FROM system_schema.keyspaces")
        .unwrap();
    let mut rng = Rng(seed() ^ 0x5e);
    let mut seen = Vec::new();
    for row in &keyspaces {
        let name = text(&row[0]);
        let map = decode_text_map(row[1].as_deref().unwrap());
        let strategy = ReplicationStrategy::from_options(&map)
            .unwrap_or_else(|e| panic!("keyspace {name}: {map:?}: {e}"));
        let wants_replicas = match &strategy {
            ReplicationStrategy::Simple { replication_factor } => *replication_factor > 0,
            ReplicationStrategy::NetworkTopology { datacenters } => {
                datacenters.get(&dc).is_some_and(|rf| *rf > 0)
            }
            ReplicationStrategy::Everywhere => true,
            ReplicationStrategy::Local | ReplicationStrategy::Unknown { .. } => false,
        };
        let map_of_ranges = ReplicaMap::new(&ring, &strategy);
        for _ in 0..50 {
            let len = 1 + rng.below(30) as usize;
            let t = token(&rng.bytes(len));
            let want: Vec<NodeId> = if wants_replicas {
                vec![NodeId(0)]
            } else {
                vec![]
            };
            assert_eq!(replicas(&ring, &strategy, t), want, "keyspace {name}");
            assert_eq!(map_of_ranges.replicas(t), &want[..], "keyspace {name}");
        }
        seen.push(format!("{name}: {strategy:?}"));
    }
    assert!(keyspaces.len() >= 5, "system keyspaces missing");
    eprintln!("replication maps parsed: {}", seen.join("; "));
}

/// A serialized `set<text>` / `list<text>`: `[int n]` then n `[bytes]`.
fn decode_text_collection(mut b: &[u8]) -> Vec<String> {
    let n = read_i32(&mut b);
    (0..n).map(|_| read_text(&mut b)).collect()
}

/// A serialized `map<text, text>`.
fn decode_text_map(mut b: &[u8]) -> BTreeMap<String, String> {
    let n = read_i32(&mut b);
    (0..n)
        .map(|_| (read_text(&mut b), read_text(&mut b)))
        .collect()
}

fn read_i32(b: &mut &[u8]) -> i32 {
    let (head, tail) = b.split_at(4);
    *b = tail;
    i32::from_be_bytes(head.try_into().unwrap())
}

fn read_text(b: &mut &[u8]) -> String {
    let len = usize::try_from(read_i32(b)).unwrap();
    let (head, tail) = b.split_at(len);
    *b = tail;
    String::from_utf8(head.to_vec()).unwrap()
}
