//! The normalizer against the real server: every statement of `tests/corpus/dml.cql` (format
//! described at the top of that file) is checked as follows.
//!
//! 1. The original statement is valid: it PREPAREs, reporting one bind variable per marker the
//!    client wrote, and, when it has none, it also runs as a QUERY without error.
//! 2. It normalizes to a shape (or to the not-candidate reason the corpus lists for it).
//! 3. The shape's text PREPAREs and the server reports exactly one bind variable per slot: the
//!    literals bound plus the client's own markers.
//!
//! The schema (keyspace `autoprep_corpus`) is created here; the server is the one
//! `autoprep_tests::upstream` names (`AUTOPREP_TEST_UPSTREAM`, or the project's script).

use std::time::{Duration, Instant};

use autoprep_protocol::cql::normalize::{normalize, Normalized, NotCandidate, Slot};
use autoprep_protocol::cql::Literal;
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

/// Checks one entry; `Ok(true)` for a shape, `Ok(false)` for an expected not-candidate.
fn check(cl: &mut Client, e: &Entry) -> Result<bool, String> {
    let normalized = normalize(e.cql.as_bytes()).map_err(|err| format!("normalize: {err}"))?;

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
            return Ok(false)
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
    Ok(true)
}

#[test]
fn every_corpus_statement_normalizes_and_prepares_on_the_server() {
    let entries = load_corpus();
    let mut cl = Client::connect(&upstream()).expect("connect to the server under test");
    setup(&mut cl);

    let mut shapes = 0;
    let mut not_candidates = 0;
    let mut failures = Vec::new();
    for e in &entries {
        match check(&mut cl, e) {
            Ok(true) => shapes += 1,
            Ok(false) => not_candidates += 1,
            Err(msg) => failures.push(format!("line {}: {}\n    {msg}", e.line, e.cql)),
        }
    }
    eprintln!(
        "corpus: {} statements, {shapes} shapes prepared with matching bind counts, \
         {not_candidates} expected not-candidates, {} failures",
        entries.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(
        shapes >= 200,
        "the corpus must hold at least 200 rewritable statements"
    );
}
