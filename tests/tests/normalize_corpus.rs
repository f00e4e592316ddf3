//! The normalizer against the real server: every statement of `tests/corpus/dml.cql` (format
//! described at the top of that file) is checked as follows.
//!
//! 1. The original statement is valid: it PREPAREs, reporting one bind variable per marker the
//!    client wrote, and, when it has none, it also runs as a QUERY without error.
//! 2. It normalizes to a shape (or to the not-candidate reason the corpus lists for it).
//! 3. The shape's text PREPAREs and the server reports exactly one bind variable per slot: the
//!    literals bound plus the client's own markers.
//! 4. Differential, when the shape has no client markers and the encoder (issue 4) accepts
//!    every literal for the types PREPARE reported: the original runs as a QUERY and the shape
//!    as an EXECUTE, back to back, and the outcomes must match (same error, or same result
//!    kind, and the same rows for deterministic SELECTs).
//!
//! The schema (keyspace `autoprep_corpus`) is created here; the server is the one
//! `autoprep_tests::upstream` names (`AUTOPREP_TEST_UPSTREAM`, or the project's script).

use std::time::{Duration, Instant};

use autoprep_protocol::cql::normalize::Shape;
use autoprep_protocol::cql::normalize::{normalize, Normalized, NotCandidate, Slot};
use autoprep_protocol::cql::Literal;
use autoprep_protocol::types::{encode_literal, EncodeOptions};
use autoprep_tests::client::Prepared;
use autoprep_tests::{upstream, Client, Response};

const KEYSPACE: &str = "autoprep_corpus";

const SCHEMA: &[&str] = &[
    "DROP KEYSPACE IF EXISTS autoprep_corpus",
    "CREATE KEYSPACE autoprep_corpus WITH replication = \
     {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TYPE autoprep_corpus.addr (street text, zip int, \"Tags\" frozen<set<text>>)",
    "CREATE TABLE autoprep_corpus.all_types (k int PRIMARY KEY, a ascii, bi bigint, b blob, \
     bo boolean, d date, dec decimal, dbl double, dur duration, f float, i inet, ii int, \
     si smallint, t text, tm time, ts timestamp, tu timeuuid, ti tinyint, u uuid, vc varchar, \
     vi varint)",
    "CREATE TABLE autoprep_corpus.colls (k text PRIMARY KEY, l list<int>, s set<text>, \
     m map<text, int>, fl frozen<list<int>>, fs frozen<set<int>>, fm frozen<map<int, text>>, \
     ad frozen<addr>, ua addr, tp tuple<int, text>, v vector<float, 3>, \
     lt list<frozen<tuple<int, text>>>, nested map<text, frozen<list<int>>>)",
    "CREATE TABLE autoprep_corpus.counters (k text PRIMARY KEY, c counter, c2 counter)",
    "CREATE TABLE autoprep_corpus.events (p text, c1 int, c2 text, v text, n int, \
     PRIMARY KEY (p, c1, c2))",
    "CREATE TABLE autoprep_corpus.\"MixedCase\" (\"Key\" text PRIMARY KEY, \"Value\" int, \
     \"select\" text)",
    "CREATE TABLE autoprep_corpus.lwt (k int PRIMARY KEY, v int, l list<int>, \
     m map<text, int>, u addr, s set<int>)",
    "CREATE TABLE autoprep_corpus.ts_data (sensor text, day date, at timestamp, value double, \
     PRIMARY KEY ((sensor, day), at)) WITH CLUSTERING ORDER BY (at DESC)",
    "CREATE INDEX colls_s ON autoprep_corpus.colls (s) USING 'sai'",
    "CREATE INDEX colls_mk ON autoprep_corpus.colls (keys(m)) USING 'sai'",
    "CREATE INDEX colls_v ON autoprep_corpus.colls (v) USING 'sai'",
    "CREATE INDEX events_v ON autoprep_corpus.events (v) USING 'sai'",
];

/// What the corpus says a statement must normalize to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Shape,
    NoLiterals,
    Unsupported,
    /// The server rejects the statement.
    Error,
}

struct Entry {
    line: usize,
    expect: Expect,
    cql: String,
}

fn load_corpus() -> Vec<Entry> {
    let path = autoprep_tests::repo_root().join("tests/corpus/dml.cql");
    let text = std::fs::read_to_string(&path).expect("read tests/corpus/dml.cql");
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (expect, stmt) = if let Some(s) = line.strip_prefix("!no-literals ") {
            (Expect::NoLiterals, s)
        } else if let Some(s) = line.strip_prefix("!unsupported ") {
            (Expect::Unsupported, s)
        } else if let Some(s) = line.strip_prefix("!error ") {
            (Expect::Error, s)
        } else {
            (Expect::Shape, line)
        };
        out.push(Entry {
            line: i + 1,
            expect,
            cql: stmt.replace("\\n", "\n").replace("\\t", "\t"),
        });
    }
    out
}

fn setup(cl: &mut Client) {
    for ddl in SCHEMA {
        if let Response::Error { code, message } = cl.query(ddl).expect("schema statement") {
            panic!("{ddl}: error 0x{code:04x} {message}");
        }
    }
    match cl.query(&format!("USE {KEYSPACE}")).expect("USE") {
        Response::SetKeyspace(_) => {}
        other => panic!("USE gave {other:?}"),
    }
    // Index builds are asynchronous: wait until the indexed queries are accepted.
    let deadline = Instant::now() + Duration::from_secs(60);
    for probe in [
        "SELECT k FROM colls WHERE s CONTAINS 'a'",
        "SELECT k FROM colls WHERE m CONTAINS KEY 'a'",
        "SELECT k FROM colls ORDER BY v ANN OF [0.1, 0.2, 0.3] LIMIT 1",
        "SELECT p FROM events WHERE v = 'a'",
    ] {
        loop {
            match cl.query(probe).expect("index probe") {
                Response::Rows(_) => break,
                other if Instant::now() > deadline => panic!("{probe}: {other:?}"),
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

fn describe(r: &Response) -> String {
    match r {
        Response::Error { code, message } => format!("error 0x{code:04x}: {message}"),
        other => format!("{other:?}"),
    }
}

/// What happened to one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// An expected not-candidate.
    Passed,
    /// A shape, checked by PREPARE only (client markers, or a literal the encoder refuses).
    Prepared,
    /// A shape also executed and compared with the original.
    Compared,
    /// A rejected statement that the rewrite leaves to the server (not a candidate, the shape
    /// does not prepare, or the encoder refuses a literal).
    ErrorPassedThrough,
    /// A rejected statement whose rewrite fails with the very same error.
    ErrorSame,
}

/// Checks one entry.
fn check(cl: &mut Client, e: &Entry) -> Result<Outcome, String> {
    let normalized = normalize(e.cql.as_bytes()).map_err(|err| format!("normalize: {err}"))?;
    if e.expect == Expect::Error {
        return check_error(cl, e, &normalized);
    }

    // The original must be valid on the server.
    let orig = cl
        .prepare(&e.cql)
        .map_err(|err| format!("prepare original: {err}"))?;
    let Response::Prepared(orig) = orig else {
        return Err(format!("original does not prepare: {}", describe(&orig)));
    };

    let shape = match (&normalized, e.expect) {
        (Normalized::Shape(s), Expect::Shape) => s,
        (Normalized::NotCandidate(NotCandidate::NoLiterals { .. }), Expect::NoLiterals)
        | (Normalized::NotCandidate(NotCandidate::Unsupported { .. }), Expect::Unsupported) => {
            return Ok(Outcome::Passed)
        }
        (other, expect) => return Err(format!("expected {expect:?}, normalized to {other:?}")),
    };

    let client_markers = shape.client_marker_count();
    if orig.bind.len() != client_markers {
        return Err(format!(
            "original reports {} bind variables, the shape has {client_markers} client markers",
            orig.bind.len()
        ));
    }
    if client_markers == 0 {
        let r = cl
            .query(&e.cql)
            .map_err(|err| format!("query original: {err}"))?;
        if let Response::Error { .. } = r {
            return Err(format!("original fails: {}", describe(&r)));
        }
    }

    let prepared = cl
        .prepare(&shape.text)
        .map_err(|err| format!("prepare shape: {err}"))?;
    let Response::Prepared(p) = prepared else {
        return Err(format!(
            "shape {:?} does not prepare: {}",
            shape.text,
            describe(&prepared)
        ));
    };
    if p.bind.len() != shape.slots.len() {
        return Err(format!(
            "shape {:?}: server reports {} bind variables {:?}, normalizer has {} slots {:?}",
            shape.text,
            p.bind.len(),
            p.bind.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            shape.slots.len(),
            shape.slots
        ));
    }
    // Slot by slot: an `in(col)` variable is a list the normalizer built (or the client's own
    // marker), and a named marker keeps its name.
    for (slot, (name, _)) in shape.slots.iter().zip(&p.bind) {
        match slot {
            Slot::Literal(lit) if name.starts_with("in(") && !matches!(lit, Literal::List(_)) => {
                return Err(format!("{name} bound to {lit:?}"));
            }
            Slot::ClientNamed { .. } if slot.resolved_name().as_deref() != Some(name) => {
                return Err(format!("named marker {slot:?} reported as {name}"));
            }
            _ => {}
        }
    }
    if client_markers > 0 {
        return Ok(Outcome::Prepared);
    }
    differential(cl, e, shape, &p)
}

/// A statement the server rejects: the rewrite must not change that. Either the normalizer
/// leaves it alone, or the shape fails to PREPARE, or the encoder refuses a literal (in all
/// three cases the proxy sends the original), or executing the shape gives the very same error.
fn check_error(cl: &mut Client, e: &Entry, normalized: &Normalized<'_>) -> Result<Outcome, String> {
    let orig = cl
        .query(&e.cql)
        .map_err(|err| format!("query original: {err}"))?;
    let Response::Error { .. } = orig else {
        return Err(format!("expected a server error, got {}", describe(&orig)));
    };
    let Normalized::Shape(shape) = normalized else {
        return Ok(Outcome::ErrorPassedThrough);
    };
    let prepared = cl
        .prepare(&shape.text)
        .map_err(|err| format!("prepare shape: {err}"))?;
    let Response::Prepared(p) = prepared else {
        return Ok(Outcome::ErrorPassedThrough);
    };
    let mut raw = Vec::new();
    for (slot, (_, ty)) in shape.slots.iter().zip(&p.bind) {
        let Slot::Literal(lit) = slot else {
            return Ok(Outcome::ErrorPassedThrough);
        };
        if encode_literal(lit, ty, &EncodeOptions::default(), &mut raw).is_err() {
            return Ok(Outcome::ErrorPassedThrough);
        }
    }
    let rewritten = cl
        .execute_raw(&p, &raw, shape.slots.len())
        .map_err(|err| format!("execute shape: {err}"))?;
    if rewritten == orig {
        Ok(Outcome::ErrorSame)
    } else {
        Err(format!(
            "the rewrite changes the outcome of {:?}:\n      original: {}\n      rewritten: {}",
            shape.text,
            describe(&orig),
            describe(&rewritten)
        ))
    }
}

/// Runs the original as a QUERY and the shape as an EXECUTE with the encoded literals, and
/// compares the outcomes.
fn differential(
    cl: &mut Client,
    e: &Entry,
    shape: &Shape<'_>,
    p: &Prepared,
) -> Result<Outcome, String> {
    let mut raw = Vec::new();
    for (slot, (_, ty)) in shape.slots.iter().zip(&p.bind) {
        let Slot::Literal(lit) = slot else {
            return Ok(Outcome::Prepared);
        };
        if encode_literal(lit, ty, &EncodeOptions::default(), &mut raw).is_err() {
            // Refused (server context such as a zone-less timestamp): the proxy would pass the
            // QUERY through, so there is nothing to compare.
            return Ok(Outcome::Prepared);
        }
    }
    let orig = cl
        .query(&e.cql)
        .map_err(|err| format!("query original: {err}"))?;
    let rewritten = cl
        .execute_raw(p, &raw, shape.slots.len())
        .map_err(|err| format!("execute shape: {err}"))?;
    let lower = e.cql.to_ascii_lowercase();
    // Values that change between two runs: clocks, TTLs, random ids, LWT outcomes (the first
    // run changes what the second one sees).
    let volatile = ["now()", "ttl(", "writetime(", "uuid()", " if "]
        .iter()
        .any(|v| lower.contains(v));
    let same = match (&orig, &rewritten) {
        (
            Response::Error {
                code: a,
                message: m,
            },
            Response::Error {
                code: b,
                message: n,
            },
        ) => a == b && m == n,
        (Response::Rows(a), Response::Rows(b)) => {
            a.columns == b.columns && (volatile || a.rows == b.rows)
        }
        (Response::Void, Response::Void) => true,
        _ => false,
    };
    if same {
        Ok(Outcome::Compared)
    } else {
        Err(format!(
            "outcomes differ for {:?}:\n      original: {}\n      rewritten: {}",
            shape.text,
            describe(&orig),
            describe(&rewritten)
        ))
    }
}

#[test]
fn every_corpus_statement_normalizes_and_prepares_on_the_server() {
    let entries = load_corpus();
    let mut cl = Client::connect(&upstream()).expect("connect to the server under test");
    setup(&mut cl);

    let mut shapes = 0;
    let mut compared = 0;
    let mut not_candidates = 0;
    let mut errors_passed = 0;
    let mut errors_same = 0;
    let mut failures = Vec::new();
    for e in &entries {
        match check(&mut cl, e) {
            Ok(Outcome::Prepared) => shapes += 1,
            Ok(Outcome::Compared) => {
                shapes += 1;
                compared += 1;
            }
            Ok(Outcome::Passed) => not_candidates += 1,
            Ok(Outcome::ErrorPassedThrough) => errors_passed += 1,
            Ok(Outcome::ErrorSame) => errors_same += 1,
            Err(msg) => failures.push(format!("line {}: {}\n    {msg}", e.line, e.cql)),
        }
    }
    eprintln!(
        "corpus: {} statements, {shapes} shapes prepared with matching bind counts \
         ({compared} also executed with the encoded literals and matching the original), \
         {not_candidates} expected not-candidates; rejected statements: {errors_passed} left \
         to the server, {errors_same} rewritten with the same error; {} failures",
        entries.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(
        shapes >= 200,
        "the corpus must hold at least 200 rewritable statements"
    );
}
