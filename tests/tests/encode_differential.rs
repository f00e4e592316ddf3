//! Differential test of the literal encoder against a real Cassandra (issue 4).
//!
//! Each case is a column type and a literal. The literal is written once through a QUERY that
//! carries it inline (key A) and once through EXECUTE of `INSERT ... VALUES (?, ?)` with the
//! bytes `encode_literal` produced for the type PREPARED reported (key B); both cells are read
//! back raw and must be equal. When the server rejects the literal QUERY, the encoder must have
//! refused it. The encoder may refuse literals the server accepts (server clock, zone, DNS,
//! rare forms): those are counted and printed.
//!
//! `AUTOPREP_ENCODE_ALL_GOLDEN=1` adds the ~3000 golden vectors of the protocol crate.
//!
//! The whole run happens on protocol v4 (where `duration` and `vector` arrive as custom class
//! names, so `ColumnType::from_custom_class` is exercised) and again on v5.
//!
//! Server: `autoprep_tests::server::upstream()` (`AUTOPREP_TEST_UPSTREAM`, or a local node from
//! `scripts/cassandra.sh start`).

use anyhow::{anyhow, Result};
use autoprep_protocol::cql::Literal;
use autoprep_protocol::envelope::ProtocolVersion;
use autoprep_protocol::types::{encode_literal, ColumnType, EncodeError, EncodeOptions};
use autoprep_tests::client::{Client, Prepared, Response};
use autoprep_tests::server::upstream;
use std::collections::BTreeMap;

#[path = "../../crates/protocol/src/types/encode/test_support.rs"]
mod support;

const KS: &str = "autoprep_encode";

/// The golden vectors of the protocol crate (type, literal, term-level result).
const GOLDEN: &str =
    include_str!("../../crates/protocol/src/types/encode/testdata/cassandra-5.0.6-literals.tsv");

/// (CQL type, literal text). Counter cases run separately through `UPDATE ... c = c + lit`.
const CASES: &[(&str, &str)] = &[
    // integers: min/max of each type, out of range, leading zeros, wrong kinds
    ("tinyint", "-128"), ("tinyint", "127"), ("tinyint", "128"), ("tinyint", "-129"), ("tinyint", "007"),
    ("smallint", "-32768"), ("smallint", "32767"), ("smallint", "32768"), ("smallint", "-0"),
    ("int", "-2147483648"), ("int", "2147483647"), ("int", "2147483648"), ("int", "0"), ("int", "'5'"),
    ("int", "0x0001"), ("int", "1.5"), ("int", "null"), ("int", "(42)"), ("int", "true"),
    ("bigint", "-9223372036854775808"), ("bigint", "9223372036854775807"), ("bigint", "9223372036854775808"),
    ("bigint", "000000000000000000000000000042"),
    // varint
    ("varint", "0"), ("varint", "-0"), ("varint", "127"), ("varint", "128"), ("varint", "-128"), ("varint", "-129"),
    ("varint", "255"), ("varint", "-256"), ("varint", "18446744073709551616"),
    ("varint", "123456789012345678901234567890123456789012345678901234567890"),
    ("varint", "-98765432109876543210987654321098765432109876543210987654321098765432109876543210"),
    ("varint", "1.5"),
    // decimal: scale as written
    ("decimal", "1.50"), ("decimal", "1e3"), ("decimal", "1E+3"), ("decimal", "-0.000"), ("decimal", "0"),
    ("decimal", "-1.5e-3"), ("decimal", "1."), ("decimal", "007.50"), ("decimal", "12345678901234567890.12345678901234567890"),
    ("decimal", "-123456789012345678901234567890123456789012345678901234567890e-20"), ("decimal", "NaN"),
    ("decimal", "Infinity"), ("decimal", "1e400"), ("decimal", "1e2147483648"), ("decimal", "1e-2147483648"),
    // float / double
    ("float", "1.5"), ("float", "-0.0"), ("float", "-0"), ("float", "NaN"), ("float", "-NaN"), ("float", "Infinity"),
    ("float", "-Infinity"), ("float", "3.4028235e38"), ("float", "3.4028236e38"), ("float", "1e40"), ("float", "1.4e-45"),
    ("float", "1e-46"), ("float", "0.1"), ("float", "16777217"), ("float", "1.000000178813934326171875"), ("float", "1e400"),
    ("double", "1.5"), ("double", "-0.0"), ("double", "NaN"), ("double", "Infinity"), ("double", "-Infinity"),
    ("double", "1e308"), ("double", "1.7976931348623157e308"), ("double", "1.7976931348623159e308"), ("double", "4.9e-324"),
    ("double", "2e-324"), ("double", "1e-400"), ("double", "0.1"), ("double", "9007199254740993"),
    ("double", "2.2250738585072011e-308"), ("double", "123456789012345678901234567890"), ("double", "'1.5'"),
    // boolean, text, ascii, blob
    ("boolean", "true"), ("boolean", "FALSE"), ("boolean", "1"), ("boolean", "'true'"),
    ("text", "''"), ("text", "'hello'"), ("text", "'it''s'"), ("text", "'é日本語😀'"), ("text", "$$raw ' $$"),
    ("text", "1"), ("ascii", "'plain'"), ("ascii", "''"), ("ascii", "'é'"),
    ("blob", "0x"), ("blob", "0xCAFEbabe"), ("blob", "0x00ff"), ("blob", "0xABC"), ("blob", "'00'"),
    // uuid, timeuuid
    ("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"), ("uuid", "550E8400-E29B-41D4-A716-446655440000"),
    ("uuid", "'550e8400-e29b-41d4-a716-446655440000'"), ("timeuuid", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"),
    ("timeuuid", "550e8400-e29b-41d4-a716-446655440000"),
    // inet
    ("inet", "'1.2.3.4'"), ("inet", "'0.0.0.0'"), ("inet", "'255.255.255.255'"), ("inet", "'::1'"), ("inet", "'::'"),
    ("inet", "'2001:db8::1'"), ("inet", "'::ffff:1.2.3.4'"), ("inet", "'::ffff:0102:0304'"), ("inet", "'::1.2.3.4'"),
    ("inet", "''"), ("inet", "'256.1.1.1'"), ("inet", "'1:2:3:4:5:6:7:8'"), ("inet", "'localhost'"),
    // timestamp
    ("timestamp", "'2020-01-01 00:00:00Z'"), ("timestamp", "'2020-01-01T10:00:30.123+0000'"),
    ("timestamp", "'2020-01-01 10:00:30.123456789+05:30'"), ("timestamp", "'2020-01-01 10:00 -0800'"),
    ("timestamp", "'2020-01-01 10:00 UTC'"), ("timestamp", "'2020-01-01 10:00 GMT'"), ("timestamp", "'2020-01-01 10:00+05'"),
    ("timestamp", "'2020-01-01 10:00 +0530'"), ("timestamp", "'2020-01-01 10:00 UTC+01:00'"), ("timestamp", "'2020-01-01Z'"),
    ("timestamp", "'2020-01-01+05:00'"), ("timestamp", "'2020-02-30 10:00Z'"), ("timestamp", "'2020-01-01 24:00Z'"),
    ("timestamp", "'2020-1-2 3:4:5Z'"), ("timestamp", "'1969-12-31 23:59:59.9999Z'"), ("timestamp", "'0001-01-01 00:00Z'"),
    ("timestamp", "'10000-01-01 00:00Z'"), ("timestamp", "'2020-01-01 10:00:60Z'"), ("timestamp", "'2020-13-01 00:00Z'"),
    ("timestamp", "'2020-01-01 10:00+1801'"), ("timestamp", "''"), ("timestamp", "'1577836800000'"), ("timestamp", "'-5'"),
    ("timestamp", "1577836800000"), ("timestamp", "-1"), ("timestamp", "'now'"), ("timestamp", "'2020-01-01 10:00'"),
    ("timestamp", "'2020-01-01 10:00 Europe/Paris'"), ("timestamp", "1.5"),
    // date
    ("date", "'2020-01-01'"), ("date", "'1970-01-01'"), ("date", "'1969-12-31'"), ("date", "'-0001-01-01'"),
    ("date", "'+10000-01-01'"), ("date", "'2020-02-30'"), ("date", "''"), ("date", "'123'"), ("date", "0"),
    ("date", "2147483648"), ("date", "4294967295"), ("date", "4294967296"), ("date", "-1"),
    // time
    ("time", "'00:00:00'"), ("time", "'23:59:59.999999999'"), ("time", "'12:34:56.1'"), ("time", "'1:2:3'"),
    ("time", "'12:34:56.1234567890'"), ("time", "'24:00:00'"), ("time", "'12:34'"), ("time", "''"),
    ("time", "86399999999999"), ("time", "86400000000000"), ("time", "'45296000000000'"),
    // duration (custom type on v4)
    ("duration", "1h30m"), ("duration", "-1h30m"), ("duration", "1y2mo3w4d5h6m7s8ms9us10ns"), ("duration", "1µs"),
    ("duration", "P1Y2M3DT4H5M6S"), ("duration", "P2W"), ("duration", "-P0001-02-03T04:05:06"), ("duration", "1m1h"),
    ("duration", "5"), ("duration", "'1h'"), ("duration", "2147483648mo"),
    // collections
    ("list<int>", "[]"), ("list<int>", "[3, 1, 3]"), ("list<int>", "[1, null]"), ("list<int>", "{1}"),
    ("list<text>", "['', 'a', 'it''s']"), ("frozen<list<frozen<list<int>>>>", "[[1], [], [2, 3]]"),
    ("set<int>", "{}"), ("set<int>", "{3, 1, 2, 1}"), ("set<text>", "{'b', 'a', '', 'é', 'B'}"),
    ("set<varint>", "{128, -129, 0, 1000000000000000000000, -1}"), ("set<double>", "{NaN, -Infinity, -0.0, 0.0, 1.5}"),
    ("set<timestamp>", "{5, -5, '2020-01-01 00:00Z'}"), ("set<uuid>", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8, 550e8400-e29b-41d4-a716-446655440000, 00000000-0000-0000-0000-000000000000}"),
    ("set<timeuuid>", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8, 6ba7b810-9dad-11d1-00b4-00c04fd430c8, 6ba7b80f-9dad-11d1-80b4-00c04fd430c8}"),
    ("set<inet>", "{'::1', '1.2.3.4', '0.0.0.0'}"), ("set<date>", "{'2020-01-01', '1969-01-01'}"), ("set<boolean>", "{true, false}"),
    ("frozen<set<int>>", "{2, 1}"), ("set<int>", "{null}"),
    ("map<text, int>", "{}"), ("map<text, int>", "{'b': 2, 'a': 1}"), ("map<text, int>", "{'a': 1, 'a': 1}"),
    ("map<text, int>", "{'a': null}"), ("map<int, text>", "{3: 'c', -1: 'z'}"), ("frozen<map<text, frozen<list<int>>>>", "{'x': [1, 2], 'a': []}"),
    ("map<timestamp, double>", "{'2020-01-01 00:00Z': 1.5, 0: -0.0}"), ("map<text, int>", "{1: 2}"),
    ("list<frozen<map<text, int>>>", "[{'a': 1}, {}]"), ("set<frozen<list<int>>>", "{[1]}"),
    // tuples
    ("tuple<int, text, double>", "(1, 'a', 2.5)"), ("tuple<int, text, double>", "(1, null, null)"),
    ("tuple<int, text, double>", "(1)"), ("tuple<int, text>", "(1, 'a', 3)"), ("tuple<int, tuple<text, int>>", "(1, ('a', 2))"),
    ("tuple<timestamp, inet>", "('2020-01-01 00:00Z', '::1')"), ("tuple<int, text>", "[1, 'a']"),
    // UDTs (u: a int, b text, c frozen<list<int>>; p: x double, "Y" frozen<u>)
    ("frozen<u>", "{a: 1, b: 'x', c: [1, 2]}"), ("frozen<u>", "{a: 1}"), ("frozen<u>", "{b: 'only'}"), ("frozen<u>", "{a: null}"),
    ("frozen<u>", "{a: 1, a: 2}"), ("frozen<u>", "{z: 1}"), ("frozen<u>", "(1, 'x')"), ("frozen<u>", "{}"),
    ("u", "{a: 1, b: 'x'}"), ("frozen<p>", "{x: 1.5, \"Y\": {a: 1}}"), ("frozen<p>", "{x: 1.5, y: {a: 1}}"),
    ("list<frozen<u>>", "[{a: 1}, {b: 'z'}]"),
    // vectors
    ("vector<float, 3>", "[1.5, 2, -0.0]"), ("vector<float, 3>", "[1, 2]"), ("vector<float, 3>", "[1, 2, null]"),
    ("vector<float, 2>", "[NaN, Infinity]"), ("vector<double, 2>", "[1e308, 4.9e-324]"), ("vector<int, 2>", "[1, -1]"),
    ("vector<bigint, 1>", "[9223372036854775807]"), ("vector<boolean, 2>", "[true, false]"),
    ("vector<uuid, 1>", "[6ba7b810-9dad-11d1-80b4-00c04fd430c8]"), ("vector<timestamp, 2>", "['2020-01-01 00:00Z', 5]"),
    ("vector<text, 2>", "['', 'abc']"), ("vector<blob, 2>", "[0x, 0x01]"), ("vector<smallint, 2>", "[1, 2]"),
    ("vector<varint, 3>", "[0, 128, -129]"), ("vector<decimal, 1>", "[1.50]"), ("vector<frozen<list<int>>, 2>", "[[1], []]"),
    ("vector<float, 2>", "{1, 2}"), ("vector<inet, 1>", "['']"),
    // nulls of every family
    ("list<int>", "null"), ("map<text, int>", "null"), ("frozen<u>", "null"), ("vector<float, 3>", "null"),
    ("tuple<int, text, double>", "null"), ("timestamp", "null"), ("duration", "null"),
];

/// Counter increments: `UPDATE ... SET c = c + <lit>`.
const COUNTER_CASES: &[&str] = &[
    "5",
    "-9223372036854775808",
    "9223372036854775807",
    "9223372036854775808",
    "null",
    "1.5",
];

/// Thin helpers over the test client: a server error is `Err(message)`.
struct Conn {
    c: Client,
}

type Reply = std::result::Result<Response, String>;

impl Conn {
    fn query(&mut self, cql: &str) -> Reply {
        match self.c.query(cql) {
            Ok(Response::Error { code, message }) => Err(format!("0x{code:04x} {message}")),
            Ok(r) => Ok(r),
            Err(e) => panic!("{cql}: {e:#}"),
        }
    }

    fn prepare(&mut self, cql: &str) -> Prepared {
        self.c
            .prepare(cql)
            .and_then(Response::prepared)
            .unwrap_or_else(|e| panic!("PREPARE {cql}: {e:#}"))
    }

    /// `values` are whole `[value]`s, already framed.
    fn execute(&mut self, p: &Prepared, values: &[&[u8]]) -> Reply {
        let raw = values.concat();
        match self.c.execute_raw(p, &raw, values.len()) {
            Ok(Response::Error { code, message }) => Err(format!("0x{code:04x} {message}")),
            Ok(r) => Ok(r),
            Err(e) => panic!("EXECUTE: {e:#}"),
        }
    }

    /// The single cell of a one-row, one-column SELECT (`None` for a null cell).
    fn cell(&mut self, cql: &str) -> Option<Vec<u8>> {
        let rows = self
            .query(cql)
            .map_err(|e| anyhow!(e))
            .and_then(Response::rows)
            .unwrap_or_else(|e| panic!("{cql}: {e:#}"));
        assert_eq!(rows.rows.len(), 1, "{cql}: expected one row");
        rows.rows[0][0].clone()
    }
}

fn value_of(lit: &Literal<'_>, ty: &ColumnType) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_literal(lit, ty, &EncodeOptions::default(), &mut out)?;
    Ok(out)
}

fn hexs(b: impl AsRef<[u8]>) -> String {
    b.as_ref().iter().map(|x| format!("{x:02x}")).collect()
}

fn int_value(v: i32) -> Vec<u8> {
    let mut out = 4i32.to_be_bytes().to_vec();
    out.extend_from_slice(&v.to_be_bytes());
    out
}

#[derive(Default)]
struct Tally {
    exact: usize,
    both_rejected: usize,
    refused_accepted: Vec<String>,
    failures: Vec<String>,
}

#[test]
fn encoder_matches_the_server_v4() -> Result<()> {
    run(ProtocolVersion::V4, "v4")
}

#[test]
fn encoder_matches_the_server_v5() -> Result<()> {
    run(ProtocolVersion::V5, "v5")
}

fn run(version: ProtocolVersion, tag: &str) -> Result<()> {
    let mut c = Conn {
        c: Client::connect_with(&upstream(), version, None)?,
    };
    let t = format!("t_{tag}");
    let cnt = format!("cnt_{tag}");
    // Cases: the list above, plus every golden vector when AUTOPREP_ENCODE_ALL_GOLDEN is set.
    let mut cases: Vec<(&str, &str)> = CASES.to_vec();
    if std::env::var_os("AUTOPREP_ENCODE_ALL_GOLDEN").is_some() {
        cases.extend(GOLDEN.lines().filter_map(|l| {
            let mut p = l.splitn(3, '\t');
            let (ty, lit) = (p.next()?, p.next()?);
            (ty != "counter").then_some((ty, lit))
        }));
    }
    // Schema: one wide table with a column per distinct type (types the server cannot store,
    // such as set<duration>, are skipped with their cases), and a counter table.
    c.query(&format!(
        "CREATE KEYSPACE IF NOT EXISTS {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    ))
    .expect("keyspace");
    c.query(&format!(
        "CREATE TYPE IF NOT EXISTS {KS}.u (a int, b text, c frozen<list<int>>)"
    ))
    .expect("type u");
    c.query(&format!(
        "CREATE TYPE IF NOT EXISTS {KS}.p (x double, \"Y\" frozen<u>)"
    ))
    .expect("type p");
    c.query(&format!("DROP TABLE IF EXISTS {KS}.{t}"))
        .expect("drop");
    c.query(&format!("CREATE TABLE {KS}.{t} (k int PRIMARY KEY)"))
        .expect("table");
    c.query(&format!("DROP TABLE IF EXISTS {KS}.{cnt}"))
        .expect("drop");
    c.query(&format!(
        "CREATE TABLE {KS}.{cnt} (k int PRIMARY KEY, c counter)"
    ))
    .expect("counter table");
    let mut columns: BTreeMap<&str, Option<String>> = BTreeMap::new();
    for (ty, _) in &cases {
        if columns.contains_key(ty) {
            continue;
        }
        let col = format!("c{}", columns.len());
        let ok = match c.query(&format!("ALTER TABLE {KS}.{t} ADD {col} {ty}")) {
            Ok(_) => true,
            // 0x2200 Invalid: the type cannot be a column (set<duration> ...). Anything else
            // (a timeout on a loaded machine) is a failure of the run, not a skip.
            Err(e) if e.starts_with("0x2200") => false,
            Err(e) => panic!("ALTER TABLE {KS}.{t} ADD {col} {ty}: {e}"),
        };
        columns.insert(ty, ok.then_some(col));
    }

    let mut tally = Tally::default();
    let mut prepared: BTreeMap<&str, (Prepared, ColumnType)> = BTreeMap::new();
    let mut skipped = 0;
    for (i, (ty_text, lit_text)) in cases.iter().enumerate() {
        let Some(col) = &columns[ty_text] else {
            skipped += 1;
            continue;
        };
        let (ka, kb) = (2 * i as i32, 2 * i as i32 + 1);
        let label = format!("{ty_text} {lit_text}");
        let (p, ty) = prepared
            .entry(ty_text)
            .or_insert_with(|| {
                let p = c.prepare(&format!("INSERT INTO {KS}.{t} (k, {col}) VALUES (?, ?)"));
                let ty = p.bind[1].1.clone();
                (p, ty)
            })
            .clone();
        let lit = support::lit(lit_text);
        let server = c.query(&format!(
            "INSERT INTO {KS}.{t} (k, {col}) VALUES ({ka}, {lit_text})"
        ));
        let encoded = value_of(&lit, &ty);
        match (server, encoded) {
            (Ok(_), Ok(v)) => {
                if let Err(e) = c.execute(&p, &[&int_value(kb), &v]) {
                    tally.failures.push(format!("{label}: EXECUTE failed: {e}"));
                    continue;
                }
                let a = c.cell(&format!("SELECT {col} FROM {KS}.{t} WHERE k = {ka}"));
                let b = c.cell(&format!("SELECT {col} FROM {KS}.{t} WHERE k = {kb}"));
                if a == b {
                    tally.exact += 1;
                } else {
                    tally.failures.push(format!(
                        "{label}: stored {:?} via QUERY, {:?} via EXECUTE",
                        a.map(hexs),
                        b.map(hexs)
                    ));
                }
            }
            (Ok(_), Err(e)) if e.server_rejects() => tally
                .failures
                .push(format!("{label}: server accepts, encoder says {e}")),
            (Ok(_), Err(e)) => tally.refused_accepted.push(format!("{label} -> {e}")),
            (Err(_), Err(_)) => tally.both_rejected += 1,
            (Err(e), Ok(v)) => tally.failures.push(format!(
                "{label}: server rejects ({e}) but encoder produced {}",
                hexs(v)
            )),
        }
    }

    // Counters: UPDATE with the literal vs EXECUTE of the prepared increment.
    let cp = c.prepare(&format!("UPDATE {KS}.{cnt} SET c = c + ? WHERE k = ?"));
    for (i, lit_text) in COUNTER_CASES.iter().enumerate() {
        let (ka, kb) = (2 * i as i32, 2 * i as i32 + 1);
        let label = format!("counter {lit_text}");
        let server = c.query(&format!(
            "UPDATE {KS}.{cnt} SET c = c + {lit_text} WHERE k = {ka}"
        ));
        let encoded = value_of(&support::lit(lit_text), &cp.bind[0].1);
        match (server, encoded) {
            (Ok(_), Ok(v)) => {
                c.execute(&cp, &[&v, &int_value(kb)])
                    .expect("counter EXECUTE");
                let a = c.cell(&format!("SELECT c FROM {KS}.{cnt} WHERE k = {ka}"));
                let b = c.cell(&format!("SELECT c FROM {KS}.{cnt} WHERE k = {kb}"));
                if a == b {
                    tally.exact += 1;
                } else {
                    tally.failures.push(format!("{label}: {a:?} vs {b:?}"));
                }
            }
            (Err(_), Err(_)) => tally.both_rejected += 1,
            (Ok(_), Err(e)) => tally.refused_accepted.push(format!("{label} -> {e}")),
            (Err(e), Ok(_)) => tally
                .failures
                .push(format!("{label}: server rejects ({e}), encoder accepts")),
        }
    }

    let total = cases.len() + COUNTER_CASES.len() - skipped;
    println!(
        "{tag}: {total} cases ({skipped} skipped: column type not storable): {} identical cells, {} rejected by both, {} accepted by the server but refused by the encoder",
        tally.exact,
        tally.both_rejected,
        tally.refused_accepted.len()
    );
    for r in &tally.refused_accepted {
        println!("  refused: {r}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} failures:\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
    assert!(total >= 150);
    Ok(())
}
