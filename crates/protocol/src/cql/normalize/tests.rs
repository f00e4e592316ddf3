//! Unit tests of the normalizer, one group per rule, and property tests: normalizing never
//! panics, a shape rendered back with its literals normalizes to the same shape, and the same
//! statement with other literal values gives the same text.

use super::*;
use proptest::prelude::*;
use std::fmt::Write as _;
use Literal as L;

fn shape(src: &str) -> Shape<'_> {
    match normalize_str(src) {
        Ok(Normalized::Shape(s)) => s,
        other => panic!("{src:?} gave {other:?}"),
    }
}

fn text(src: &str) -> String {
    shape(src).text
}

fn not_candidate(src: &str) -> NotCandidate {
    match normalize_str(src) {
        Ok(Normalized::NotCandidate(n)) => n,
        other => panic!("{src:?} gave {other:?}"),
    }
}

fn unsupported(src: &str) -> &'static str {
    match not_candidate(src) {
        NotCandidate::Unsupported { reason, .. } => reason,
        other => panic!("{src:?} gave {other:?}"),
    }
}

fn lit(src: &str) -> Vec<Slot<'_>> {
    shape(src).slots
}

fn s(v: &str) -> L<'_> {
    L::String(Cow::Borrowed(v))
}

// ---- statement kinds ----------------------------------------------------------------------

#[test]
fn statement_kinds() {
    assert_eq!(
        shape("SELECT a FROM t WHERE k = 1").kind,
        StatementKind::Select
    );
    assert_eq!(
        shape("INSERT INTO t (k) VALUES (1)").kind,
        StatementKind::Insert
    );
    assert_eq!(
        shape("UPDATE t SET a = 1 WHERE k = 1").kind,
        StatementKind::Update
    );
    assert_eq!(
        shape("DELETE FROM t WHERE k = 1").kind,
        StatementKind::Delete
    );
    assert_eq!(
        shape("BEGIN BATCH DELETE FROM t WHERE k = 1 APPLY BATCH").kind,
        StatementKind::Batch
    );
    for ddl in [
        "CREATE TABLE t (k int PRIMARY KEY) WITH comment = 'x'",
        "ALTER TABLE t WITH gc_grace_seconds = 10",
        "DROP TABLE t",
        "TRUNCATE t",
        "CREATE ROLE r WITH PASSWORD = 'secret' AND LOGIN = true",
        "GRANT SELECT ON KEYSPACE ks TO r",
        "CREATE FUNCTION f (a int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS 'return a;'",
        "DESCRIBE KEYSPACES",
        "LIST ROLES",
        "",
        "  -- only a comment\n",
        ";",
        "'just a string'",
    ] {
        assert_eq!(not_candidate(ddl), NotCandidate::NotDml, "{ddl}");
    }
    assert_eq!(NotCandidate::NotDml.kind(), StatementKind::Other);
}

#[test]
fn use_resolves_the_keyspace() {
    let ks = |q| match not_candidate(q) {
        NotCandidate::Use { keyspace } => keyspace,
        other => panic!("{other:?}"),
    };
    assert_eq!(ks("USE MyKs"), "myks");
    assert_eq!(ks("use \"MyKs\";"), "MyKs");
    assert_eq!(ks("USE \"a\"\"b\""), "a\"b");
    assert_eq!(ks("/* c */ USE ks -- c\n;;"), "ks");
    assert_eq!(unsupported("USE a b"), "malformed USE");
    assert_eq!(unsupported("USE"), "malformed USE");
    assert_eq!(not_candidate("USE x").kind(), StatementKind::Use);
}

#[test]
fn no_literal_is_not_a_candidate() {
    for q in [
        "SELECT * FROM t",
        "SELECT * FROM t WHERE k = ?",
        "SELECT * FROM t WHERE k = :k LIMIT :l",
        "SELECT 'x', 1 FROM t WHERE k = ?", // selection literals stay inline
        "INSERT INTO t (k, v) VALUES (?, now())",
        "DELETE FROM t WHERE k IN ?",
    ] {
        assert!(
            matches!(not_candidate(q), NotCandidate::NoLiterals { .. }),
            "{q}"
        );
    }
}

// ---- every literal kind -------------------------------------------------------------------

#[test]
fn every_constant_kind_becomes_a_slot() {
    let q = "INSERT INTO t (a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q) VALUES ('it''s', $$raw'$$, -12, \
             1.5e-3, true, FALSE, NaN, -NaN, Infinity, -infinity, \
             550E8400-e29b-41d4-a716-446655440000, 0xCAFE, 0x, 1h30m, P1Y2M, -PT4H, null)";
    assert_eq!(
        lit(q),
        vec![
            Slot::Literal(s("it's")),
            Slot::Literal(s("raw'")),
            Slot::Literal(L::Integer("-12")),
            Slot::Literal(L::Float("1.5e-3")),
            Slot::Literal(L::Boolean(true)),
            Slot::Literal(L::Boolean(false)),
            Slot::Literal(L::NaN),
            Slot::Literal(L::NaN),
            Slot::Literal(L::Infinity { negative: false }),
            Slot::Literal(L::Infinity { negative: true }),
            Slot::Literal(L::Uuid("550E8400-e29b-41d4-a716-446655440000")),
            Slot::Literal(L::Hex("CAFE")),
            Slot::Literal(L::Hex("")),
            Slot::Literal(L::Duration("1h30m")),
            Slot::Literal(L::Duration("P1Y2M")),
            Slot::Literal(L::Duration("-PT4H")),
            Slot::Literal(L::Null),
        ]
    );
    assert_eq!(
        text(q),
        "INSERT INTO t (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q) VALUES \
         (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    );
    // Strings without `''` borrow from the statement.
    match &lit("SELECT a FROM t WHERE k = 'abc'")[0] {
        Slot::Literal(L::String(Cow::Borrowed("abc"))) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn collection_tuple_and_udt_literals_become_one_marker() {
    let q = "UPDATE t SET l = [1, 2], s = {'a', 'b'}, m = {'k': [1], 'j': []}, e = {}, \
             tp = (1, 'x', (2, 3)), u = {street: 'x', \"Zip\": 1, Other: {a: 1}}, v = [1.0, 2.5] \
             WHERE k = 0";
    assert_eq!(
        text(q),
        "UPDATE t SET l = ?, s = ?, m = ?, e = ?, tp = ?, u = ?, v = ? WHERE k = ?"
    );
    let slots = lit(q);
    assert_eq!(
        slots[0],
        Slot::Literal(L::List(vec![L::Integer("1"), L::Integer("2")]))
    );
    assert_eq!(slots[1], Slot::Literal(L::Set(vec![s("a"), s("b")])));
    assert_eq!(
        slots[2],
        Slot::Literal(L::Map(vec![
            (s("k"), L::List(vec![L::Integer("1")])),
            (s("j"), L::List(vec![])),
        ]))
    );
    assert_eq!(slots[3], Slot::Literal(L::Map(vec![])));
    assert_eq!(
        slots[4],
        Slot::Literal(L::Tuple(vec![
            L::Integer("1"),
            s("x"),
            L::Tuple(vec![L::Integer("2"), L::Integer("3")])
        ]))
    );
    assert_eq!(
        slots[5],
        Slot::Literal(L::Udt(vec![
            (Cow::Borrowed("street"), s("x")),
            (Cow::Borrowed("Zip"), L::Integer("1")),
            (
                Cow::Borrowed("other"),
                L::Udt(vec![(Cow::Borrowed("a"), L::Integer("1"))])
            ),
        ]))
    );
}

#[test]
fn collections_with_other_parts_stay_inline_tuples_and_udts_go_element_wise() {
    // Cassandra 5 rejects markers inside list / set / map literals.
    let q = "INSERT INTO t (k, l, m, s) VALUES (1, [1, ?], {'a': :x}, {1, null})";
    assert_eq!(
        text(q),
        "INSERT INTO t (k, l, m, s) VALUES (?, [1, ?], {'a': :x}, {1, null})"
    );
    assert_eq!(
        lit(q),
        vec![
            Slot::Literal(L::Integer("1")),
            Slot::ClientMarker { index: 0 },
            Slot::ClientNamed { name: "x" },
        ]
    );
    let q = "INSERT INTO t (k, tp, u) VALUES (1, (1, ?, null, [2]), {a: 1, b: now()})";
    assert_eq!(
        text(q),
        "INSERT INTO t (k, tp, u) VALUES (?, (?, ?, NULL, ?), {a: ?, b: now()})"
    );
    assert_eq!(lit(q).len(), 5);
}

// ---- what stays inline ----------------------------------------------------------------------

#[test]
fn selection_clause_stays_inline_with_its_markers() {
    let q = "SELECT a, b + 1, 'lit', f(2, ?), {'k': c}, m['x'], cast(d AS text), count(*) \
             FROM t WHERE k = 5";
    assert_eq!(
        text(q),
        "SELECT a, b + 1, 'lit', f(2, ?), {'k': c}, m['x'], cast(d AS text), count(*) \
         FROM t WHERE k = ?"
    );
    assert_eq!(
        lit(q),
        vec![
            Slot::ClientMarker { index: 0 },
            Slot::Literal(L::Integer("5"))
        ]
    );
    assert_eq!(
        lit("SELECT :a, {'k': :b} FROM t WHERE k = 1"),
        vec![
            Slot::ClientNamed { name: "a" },
            Slot::ClientNamed { name: "b" },
            Slot::Literal(L::Integer("1"))
        ]
    );
    assert_eq!(
        text("SELECT JSON DISTINCT k FROM t WHERE k = 1"),
        "SELECT JSON DISTINCT k FROM t WHERE k = ?"
    );
}

#[test]
fn arithmetic_negation_casts_and_functions_stay_inline() {
    let q = "UPDATE t SET a = 1 + 2, b = - 3, c = (bigint) 4, d = blobAsText(0x61), \
             e = ks.f('x', 5), f = -5, g = 2 * ?, h = CAST(1 AS text) WHERE k = token(6)";
    assert_eq!(
        text(q),
        "UPDATE t SET a = 1 + 2, b = - 3, c = (bigint) 4, d = blobAsText(0x61), \
         e = ks.f('x', 5), f = ?, g = 2 * ?, h = CAST(1 AS text) WHERE k = token(6)"
    );
    assert_eq!(
        lit(q),
        vec![
            Slot::Literal(L::Integer("-5")),
            Slot::ClientMarker { index: 0 }
        ]
    );
}

#[test]
fn null_is_bound_only_as_a_whole_insert_or_set_value() {
    assert_eq!(
        text("INSERT INTO t (k, v) VALUES (1, null)"),
        "INSERT INTO t (k, v) VALUES (?, ?)"
    );
    assert_eq!(
        text(
            "UPDATE t SET v = NULL, l[1] = null, m['a'] = null, u.f = null WHERE k = 1 IF v = null"
        ),
        "UPDATE t SET v = ?, l[?] = NULL, m[?] = NULL, u.f = NULL WHERE k = ? IF v = NULL"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE k = null AND c IN (1, null)"),
        "SELECT * FROM t WHERE k = NULL AND c IN (?, NULL)"
    );
    assert_eq!(
        text("UPDATE t SET l = null + l WHERE k = 1"),
        "UPDATE t SET l = NULL + l WHERE k = ?"
    );
}

// ---- UPDATE forms -------------------------------------------------------------------------

#[test]
fn counter_and_collection_updates() {
    assert_eq!(
        text("UPDATE c SET n = n + 1, m = m - 2, o += 3, p -= 4 WHERE k = 'a'"),
        "UPDATE c SET n = n + ?, m = m - ?, o += ?, p -= ? WHERE k = ?"
    );
    // `c -1` is one INTEGER token after the column: rewritten as an addition of -1, which is
    // what the server does with it. `c 5` is accepted by the server the same way.
    let q = "UPDATE c SET n = n -1, o = o 5 WHERE k = 'a'";
    assert_eq!(text(q), "UPDATE c SET n = n + ?, o = o + ? WHERE k = ?");
    assert_eq!(lit(q)[0], Slot::Literal(L::Integer("-1")));
    assert_eq!(lit(q)[1], Slot::Literal(L::Integer("5")));
    assert_eq!(
        text("UPDATE t SET l = [1] + l, s = s + {'x'}, m = m - {'k'} WHERE k = 1"),
        "UPDATE t SET l = ? + l, s = s + ?, m = m - ? WHERE k = ?"
    );
    assert_eq!(
        text("UPDATE t SET l[0] = 5, m['k'] = 'v', u.street = 'x', u.\"Zip\" = 1 WHERE k = 1"),
        "UPDATE t SET l[?] = ?, m[?] = ?, u.street = ?, u.\"Zip\" = ? WHERE k = ?"
    );
    assert_eq!(
        unsupported("UPDATE t SET a = b WHERE k = 1"),
        "unsupported SET expression"
    );
    assert_eq!(
        unsupported("UPDATE t SET a = a -1.5 WHERE k = 1"),
        "unsupported SET expression"
    );
}

#[test]
fn using_limit_and_timestamps() {
    assert_eq!(
        text("INSERT INTO t (k) VALUES (1) IF NOT EXISTS USING TTL 86400 AND TIMESTAMP 123"),
        "INSERT INTO t (k) VALUES (?) IF NOT EXISTS USING TTL ? AND TIMESTAMP ?"
    );
    assert_eq!(
        text("UPDATE t USING TIMESTAMP 5 AND TTL ? SET v = 1 WHERE k = 1"),
        "UPDATE t USING TIMESTAMP ? AND TTL ? SET v = ? WHERE k = ?"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE k = 1 PER PARTITION LIMIT 2 LIMIT 10 ALLOW FILTERING"),
        "SELECT * FROM t WHERE k = ? PER PARTITION LIMIT ? LIMIT ? ALLOW FILTERING"
    );
    assert_eq!(
        text("SELECT * FROM t LIMIT 10 BYPASS CACHE"),
        "SELECT * FROM t LIMIT ? BYPASS CACHE"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE k = 1 USING TIMEOUT 10s"),
        "SELECT * FROM t WHERE k = ? USING TIMEOUT 10s"
    );
    // intValue takes an INTEGER or a marker only: anything else is left to the server.
    assert_eq!(
        unsupported("SELECT * FROM t LIMIT 1.5"),
        "expected an integer or a marker"
    );
    assert_eq!(
        unsupported("INSERT INTO t (k) VALUES (1) USING TTL '5'"),
        "expected an integer or a marker"
    );
}

// ---- WHERE ---------------------------------------------------------------------------------

#[test]
fn in_lists_become_one_list_marker() {
    let q = "SELECT * FROM t WHERE k IN (1, 2, 3) AND c IN ('a')";
    // A one-term list stays one (see `form.rs`).
    assert_eq!(text(q), "SELECT * FROM t WHERE k IN ? AND c IN (?)");
    assert_eq!(
        lit(q),
        vec![
            Slot::Literal(L::List(vec![
                L::Integer("1"),
                L::Integer("2"),
                L::Integer("3")
            ])),
            Slot::Literal(s("a")),
        ]
    );
    // Other lengths of two or more, same text.
    assert_eq!(
        text("SELECT * FROM t WHERE k IN (9, 8) AND c IN ('x')"),
        text(q)
    );
    assert_ne!(
        text("SELECT * FROM t WHERE k IN (9) AND c IN ('x')"),
        text(q)
    );
    // With a marker or a call inside: item by item.
    assert_eq!(
        text("SELECT * FROM t WHERE k IN (1, ?, now(), 2)"),
        "SELECT * FROM t WHERE k IN (?, ?, now(), ?)"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE k IN () AND c = 1"),
        "SELECT * FROM t WHERE k IN () AND c = ?"
    );
    assert_eq!(
        lit("SELECT * FROM t WHERE k IN :ks AND c = 1")[0],
        Slot::ClientNamed { name: "ks" }
    );
    assert_eq!(
        text("SELECT * FROM t WHERE k NOT IN (1, 2)"),
        "SELECT * FROM t WHERE k NOT IN ?"
    );
}

#[test]
fn tuple_relations() {
    let q = "SELECT * FROM t WHERE p = 'a' AND (c1, c2) > (1, 'x') AND (c1, c2) <= (5, 'z')";
    assert_eq!(
        text(q),
        "SELECT * FROM t WHERE p = ? AND (c1, c2) > ? AND (c1, c2) <= ?"
    );
    assert_eq!(
        lit(q)[1],
        Slot::Literal(L::Tuple(vec![L::Integer("1"), s("x")]))
    );
    let q = "SELECT * FROM t WHERE p = 'a' AND (c1, c2) IN ((1, 'x'), (2, 'y'))";
    assert_eq!(text(q), "SELECT * FROM t WHERE p = ? AND (c1, c2) IN ?");
    assert_eq!(
        lit(q)[1],
        Slot::Literal(L::List(vec![
            L::Tuple(vec![L::Integer("1"), s("x")]),
            L::Tuple(vec![L::Integer("2"), s("y")]),
        ]))
    );
    // A tuple stays a tuple when not every item is a literal tuple: the server takes tuples
    // or markers, never a mix, and the shape must fail exactly when the original does.
    assert_eq!(
        text("SELECT * FROM t WHERE (a, b) IN ((1, 2), ?)"),
        "SELECT * FROM t WHERE (a, b) IN ((?, ?), ?)"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE (a, b) IN ((1, ?), (3, 4))"),
        "SELECT * FROM t WHERE (a, b) IN ((?, ?), (?, ?))"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE (a, b) = (1, ?)"),
        "SELECT * FROM t WHERE (a, b) = (?, ?)"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE (a) IN ((1), (2))"),
        "SELECT * FROM t WHERE (a) IN ?"
    );
}

#[test]
fn other_relations() {
    assert_eq!(
        text("SELECT * FROM t WHERE token(k, j) > -100 AND token(k, j) <= token(1, 2)"),
        "SELECT * FROM t WHERE TOKEN(k, j) > ? AND TOKEN(k, j) <= token(1, 2)"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE s CONTAINS 'a' AND m CONTAINS KEY 'k' AND m['k'] = 1 AND t LIKE 'ab%' AND v IS NOT NULL"),
        "SELECT * FROM t WHERE s CONTAINS ? AND m CONTAINS KEY ? AND m[?] = ? AND t LIKE ? AND v IS NOT NULL"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE c BETWEEN 1 AND 5 AND d != 3"),
        "SELECT * FROM t WHERE c BETWEEN ? AND ? AND d != ?"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE (k = 1) AND s NOT CONTAINS 'x'"),
        "SELECT * FROM t WHERE (k = ?) AND s NOT CONTAINS ?"
    );
    assert_eq!(
        text("SELECT k FROM t ORDER BY v ANN OF [1.0, 2.0, 3.0] LIMIT 5"),
        "SELECT k FROM t ORDER BY v ANN OF ? LIMIT ?"
    );
    assert_eq!(
        text("SELECT * FROM t WHERE p = 1 GROUP BY p, floor(c, 5) ORDER BY c DESC LIMIT 2"),
        "SELECT * FROM t WHERE p = ? GROUP BY p, floor(c, 5) ORDER BY c DESC LIMIT ?"
    );
    assert_eq!(
        unsupported("SELECT * FROM t WHERE expr(idx, 'q') AND k = 1"),
        "custom index expression"
    );
}

#[test]
fn lwt_conditions() {
    assert_eq!(
        text("UPDATE t SET v = 1 WHERE k = 1 IF v = 2 AND l[0] > 3 AND u.f IN (4, 5) AND m CONTAINS 'x' AND w != 6"),
        "UPDATE t SET v = ? WHERE k = ? IF v = ? AND l[?] > ? AND u.f IN ? AND m CONTAINS ? AND w != ?"
    );
    assert_eq!(
        text("DELETE FROM t WHERE k = 1 IF EXISTS"),
        "DELETE FROM t WHERE k = ? IF EXISTS"
    );
    // `exists` is also a column name.
    assert_eq!(
        text("DELETE FROM t WHERE k = 1 IF exists = 2"),
        "DELETE FROM t WHERE k = ? IF exists = ?"
    );
    assert_eq!(
        text("DELETE l[1], m['x'], u.f, v FROM t WHERE k = 1"),
        "DELETE l[?], m[?], u.f, v FROM t WHERE k = ?"
    );
}

#[test]
fn json_insert() {
    let q = "INSERT INTO t JSON '{\"k\": 1, \"v\": \"it''s\"}' DEFAULT NULL";
    assert_eq!(text(q), "INSERT INTO t JSON ? DEFAULT NULL");
    assert_eq!(
        lit(q),
        vec![Slot::Literal(s("{\"k\": 1, \"v\": \"it's\"}"))]
    );
    assert_eq!(
        text("INSERT INTO t JSON $${\"k\": 1}$$ IF NOT EXISTS"),
        "INSERT INTO t JSON ? IF NOT EXISTS"
    );
    assert_eq!(
        unsupported("INSERT INTO t JSON 5"),
        "JSON value is not a string"
    );
}

#[test]
fn batches_have_one_bind_list() {
    let q = "BEGIN UNLOGGED BATCH USING TIMESTAMP 5\n  INSERT INTO t (k, v) VALUES (1, ?);\n  \
             UPDATE t SET v = 2 WHERE k = :k\n  DELETE FROM t WHERE k = 3;\nAPPLY BATCH;";
    let sh = shape(q);
    assert_eq!(
        sh.text,
        "BEGIN UNLOGGED BATCH USING TIMESTAMP ? INSERT INTO t (k, v) VALUES (?, ?); \
         UPDATE t SET v = ? WHERE k = :k; DELETE FROM t WHERE k = ?; APPLY BATCH"
    );
    assert_eq!(
        sh.slots,
        vec![
            Slot::Literal(L::Integer("5")),
            Slot::Literal(L::Integer("1")),
            Slot::ClientMarker { index: 0 },
            Slot::Literal(L::Integer("2")),
            Slot::ClientNamed { name: "k" },
            Slot::Literal(L::Integer("3")),
        ]
    );
    assert_eq!(
        text("begin counter batch update c set n = n + 1 where k = 'a' apply batch"),
        "BEGIN COUNTER BATCH UPDATE c SET n = n + ? WHERE k = ?; APPLY BATCH"
    );
    // One optional `;` per statement, as in the grammar.
    assert_eq!(
        unsupported("BEGIN BATCH DELETE FROM t WHERE k = 1;; APPLY BATCH"),
        "unexpected token in batch"
    );
    assert_eq!(
        unsupported("BEGIN BATCH SELECT * FROM t WHERE k = 1 APPLY BATCH"),
        "unexpected token in batch"
    );
}

// ---- client markers ------------------------------------------------------------------------

#[test]
fn client_markers_interleave() {
    let q = "UPDATE t SET a = ?, b = 1, c = :c, d = ? WHERE k = 'x' AND j = ?";
    assert_eq!(
        text(q),
        "UPDATE t SET a = ?, b = ?, c = :c, d = ? WHERE k = ? AND j = ?"
    );
    assert_eq!(
        lit(q),
        vec![
            Slot::ClientMarker { index: 0 },
            Slot::Literal(L::Integer("1")),
            Slot::ClientNamed { name: "c" },
            Slot::ClientMarker { index: 1 },
            Slot::Literal(s("x")),
            Slot::ClientMarker { index: 2 },
        ]
    );
    let sh = shape("SELECT * FROM t WHERE k = : \"Key\" AND c = 1");
    assert_eq!(sh.text, "SELECT * FROM t WHERE k = :\"Key\" AND c = ?");
    assert_eq!(sh.slots[0], Slot::ClientNamed { name: "\"Key\"" });
    assert_eq!(sh.slots[0].resolved_name().as_deref(), Some("Key"));
    assert_eq!(
        Slot::ClientNamed { name: "AbC" }.resolved_name().as_deref(),
        Some("abc")
    );
    assert_eq!(sh.literal_count(), 1);
    assert_eq!(sh.client_marker_count(), 1);
}

// ---- canonical text ------------------------------------------------------------------------

#[test]
fn canonical_text() {
    let a = "select  \"MyCol\", Other\n\tFROM   Ks.\"Tbl\"   -- comment\n  where K = 1 /* x */ and c>=2;;";
    assert_eq!(
        text(a),
        "SELECT \"MyCol\", Other FROM Ks.\"Tbl\" WHERE K = ? AND c >= ?"
    );
    let b = "SELECT \"MyCol\",Other FROM Ks.\"Tbl\" WHERE K=99 AND c >= -7";
    assert_eq!(text(a), text(b));
    // Identifier case is kept: these are other statements.
    assert_ne!(
        text(a),
        text("SELECT \"mycol\", Other FROM Ks.\"Tbl\" WHERE K = 1 AND c >= 2")
    );
    assert_ne!(
        text(a),
        text("SELECT \"MyCol\", other FROM Ks.\"Tbl\" WHERE K = 1 AND c >= 2")
    );
    assert_eq!(
        text("insert into t(a,b)values(1,2)"),
        "INSERT INTO t (a, b) VALUES (?, ?)"
    );
    // The text lexes back to the same tokens.
    let t = text("SELECT a, m[1..2], b.c, d . e FROM t WHERE x = 1 - -1 AND y = 2.");
    assert_eq!(
        t,
        "SELECT a, m[1 .. 2], b.c, d.e FROM t WHERE x = 1 - -1 AND y = ?"
    );
    assert!(crate::cql::lexer::tokenize(&t).is_ok());
}

#[test]
fn errors_and_unsupported_input() {
    assert!(matches!(
        normalize(b"SELECT * FROM t WHERE k = '\xff'"),
        Err(NormalizeError::Lex(LexError::InvalidUtf8 { offset: 27 }))
    ));
    assert!(matches!(
        normalize(b"SELECT * FROM t WHERE k = 1 -- no newline"),
        Err(NormalizeError::Lex(LexError::UnterminatedComment { .. }))
    ));
    assert_eq!(
        unsupported("SELECT * FROM t WHERE k = 1 garbage"),
        "unexpected token"
    );
    assert_eq!(
        unsupported("SELECT * FROM t WHERE k = ('a') 'b'"),
        "ambiguous cast"
    );
    assert_eq!(
        unsupported("SELECT * FROM t WHERE k ORDER 1"),
        "unsupported relation operator"
    );
    assert_eq!(unsupported("SELECT * t WHERE k = 1"), "no FROM");
    assert_eq!(
        unsupported("SELECT (int) :x, {(1, 2): :y} FROM t WHERE k = 1"),
        "ambiguous colon"
    );
    let deep = format!(
        "SELECT * FROM t WHERE k = {}1{}",
        "[".repeat(200),
        "]".repeat(200)
    );
    assert_eq!(unsupported(&deep), "nested too deeply");
    let deep = format!(
        "SELECT * FROM t WHERE {}k = 1{}",
        "(".repeat(200),
        ")".repeat(200)
    );
    assert_eq!(unsupported(&deep), "nested too deeply");
    let deep = format!(
        "SELECT * FROM t WHERE k = f({}1{})",
        "(".repeat(100),
        ")".repeat(100)
    );
    assert_eq!(unsupported(&deep), "nested too deeply");
    let many = format!(
        "SELECT * FROM t WHERE k = 1 AND c IN ({})",
        vec!["?"; 70_000].join(",")
    );
    assert_eq!(unsupported(&many), "too many markers");
    let many = format!(
        "SELECT * FROM t WHERE k IN ({})",
        vec!["1"; 70_000].join(",")
    );
    assert_eq!(shape(&many).slots.len(), 1);
    let Normalized::NotCandidate(n) = normalize_str("SELECT * FROM t WHERE k ORDER 1").unwrap()
    else {
        panic!()
    };
    assert_eq!(n.kind(), StatementKind::Select);
    assert_eq!(n.reason(), "unsupported relation operator");
}

#[test]
fn md5_is_of_keyspace_and_text() {
    let sh = shape("SELECT a FROM t WHERE k = 1");
    assert_eq!(sh.text, "SELECT a FROM t WHERE k = ?");
    // md5("SELECT a FROM t WHERE k = ?") and md5("ksSELECT a FROM t WHERE k = ?").
    let expect = |s: &str| -> [u8; 16] { Md5::digest(s.as_bytes()).into() };
    assert_eq!(sh.fingerprint(None), expect("SELECT a FROM t WHERE k = ?"));
    assert_eq!(
        sh.fingerprint(Some("ks")),
        expect("ksSELECT a FROM t WHERE k = ?")
    );
}

#[test]
fn fingerprint_depends_on_keyspace_and_text_only() {
    let sh = shape("SELECT a FROM t WHERE k = 1");
    // Same text from other literals: same key.
    assert_eq!(
        sh.fingerprint(Some("ks")),
        shape("SELECT a FROM t WHERE k = 2").fingerprint(Some("ks"))
    );
    assert_ne!(sh.fingerprint(Some("ks")), sh.fingerprint(Some("other")));
    assert_ne!(
        sh.fingerprint(None),
        shape("SELECT b FROM t WHERE k = 1").fingerprint(None)
    );
}

#[test]
fn hash_is_of_keyspace_and_text() {
    let a = shape("SELECT a FROM t WHERE k = 1");
    let b = shape("SELECT a FROM t WHERE k = 2");
    assert_eq!(a.hash(Some("ks")), b.hash(Some("ks")));
    assert_eq!(a.hash(None), ShapeHash::of(None, &a.text));
    assert_ne!(a.hash(Some("ks")), a.hash(Some("other")));
    assert_ne!(a.hash(Some("ks")), a.hash(None));
    assert_ne!(
        ShapeHash::of(Some("ab"), "c"),
        ShapeHash::of(Some("a"), "bc")
    );
    assert_eq!(a.fingerprint(Some("ks")), fingerprint(Some("ks"), &a.text));
}

#[test]
fn buffers_are_reused() {
    let mut text = String::new();
    let mut slots = Vec::new();
    for q in [
        "INSERT INTO t (a, b) VALUES (1, 'x')",
        "SELECT * FROM t WHERE k IN (1, 2)",
    ] {
        let owned = q.to_owned();
        let Ok(Normalized::Shape(sh)) = normalize_with(owned.as_bytes(), text, slots) else {
            panic!("{q}")
        };
        assert_eq!(sh, shape(q));
        let (cap_text, cap_slots) = (sh.text.capacity(), sh.slots.capacity());
        text = sh.text;
        slots = recycle_slots(sh.slots);
        assert_eq!((text.capacity(), slots.capacity()), (cap_text, cap_slots));
    }
}

// ---- property tests -------------------------------------------------------------------------

/// CQL text for a literal.
fn render_literal(out: &mut String, lit: &Literal<'_>) {
    fn seq<'x>(
        out: &mut String,
        open: &str,
        close: &str,
        items: impl Iterator<Item = &'x Literal<'x>>,
    ) {
        out.push_str(open);
        for (i, l) in items.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            render_literal(out, l);
        }
        out.push_str(close);
    }
    match lit {
        L::String(v) => {
            let _ = write!(out, "'{}'", v.replace('\'', "''"));
        }
        L::Integer(t) | L::Float(t) | L::Uuid(t) | L::Duration(t) => out.push_str(t),
        L::NaN => out.push_str("NaN"),
        L::Infinity { negative } => out.push_str(if *negative { "-Infinity" } else { "Infinity" }),
        L::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        L::Hex(h) => {
            let _ = write!(out, "0x{h}");
        }
        L::Null => out.push_str("null"),
        L::List(v) => seq(out, "[", "]", v.iter()),
        L::Set(v) => seq(out, "{", "}", v.iter()),
        L::Tuple(v) => seq(out, "(", ")", v.iter()),
        L::Map(v) => {
            out.push('{');
            for (i, (k, val)) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render_literal(out, k);
                out.push_str(": ");
                render_literal(out, val);
            }
            out.push('}');
        }
        L::Udt(v) => {
            out.push('{');
            for (i, (k, val)) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "\"{}\": ", k.replace('"', "\"\""));
                render_literal(out, val);
            }
            out.push('}');
        }
    }
}

/// The shape's text with each replaced literal written back in place of its marker.
fn render(sh: &Shape<'_>) -> String {
    let toks = crate::cql::lexer::tokenize(&sh.text).unwrap();
    let mut slots = sh.slots.iter();
    let mut out = String::new();
    let mut i = 0;
    while let Some(t) = toks.get(i) {
        out.push(' ');
        match t.kind {
            TokenKind::QMark => match slots.next().unwrap() {
                Slot::Literal(L::List(items)) if i > 0 && toks[i - 1].is_keyword("IN") => {
                    render_literal(&mut out, &L::Tuple(items.clone()));
                }
                Slot::Literal(l) => render_literal(&mut out, l),
                Slot::ClientMarker { .. } => out.push('?'),
                other => panic!("{other:?} for ?"),
            },
            TokenKind::Colon if matches!(sh.slots.get(sh.slots.len() - slots.len()), Some(Slot::ClientNamed { name }) if toks.get(i + 1).map(|n| n.text) == Some(*name)) =>
            {
                slots.next();
                out.push(':');
                out.push_str(toks[i + 1].text);
                i += 1;
            }
            _ => out.push_str(t.text),
        }
        i += 1;
    }
    assert!(slots.next().is_none());
    out
}

/// A random literal that becomes a marker in a value position.
pub(super) fn literal_strategy() -> impl Strategy<Value = String> {
    let scalar = prop_oneof![
        any::<String>().prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
        "[a-z ]{0,8}".prop_map(|s| format!("$${s}$$")),
        any::<i64>().prop_map(|i| i.to_string()),
        "-?[0-9]{1,30}",
        "-?[0-9]{1,5}\\.[0-9]{0,5}([eE][+-]?[0-9]{1,3})?",
        Just("true".to_owned()),
        Just("FALSE".to_owned()),
        Just("NaN".to_owned()),
        Just("-Infinity".to_owned()),
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9A-F]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "0x([0-9a-f]{2}){0,8}",
        "-?([0-9]{1,3}(y|mo|w|d|h|m|s|ms|us|ns)){1,3}",
        Just("P1Y2M3DT4H5M6S".to_owned()),
        Just("-P2W".to_owned()),
    ];
    scalar.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| format!("[{}]", v.join(", "))),
            proptest::collection::vec(inner.clone(), 1..4)
                .prop_map(|v| format!("{{{}}}", v.join(", "))),
            proptest::collection::vec((inner.clone(), inner.clone()), 1..3).prop_map(|v| format!(
                "{{{}}}",
                v.iter()
                    .map(|(k, x)| format!("{k}: {x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            proptest::collection::vec(inner.clone(), 1..4)
                .prop_map(|v| format!("({})", v.join(", "))),
            proptest::collection::vec(
                (
                    "[a-z][a-z0-9_]{0,4}".prop_filter("null is a constant", |k| k != "null"),
                    inner
                ),
                1..3
            )
            .prop_map(|v| format!(
                "{{{}}}",
                v.iter()
                    .map(|(k, x)| format!("{k}: {x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ]
    })
}

/// A term for a value position: mostly literals, sometimes a client marker or an inline term.
fn term_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => literal_strategy(),
        1 => Just("?".to_owned()),
        1 => "[a-z]{1,3}".prop_map(|n| format!(":{n}")),
        1 => Just("now()".to_owned()),
        1 => Just("1 + 2".to_owned()),
    ]
}

/// Statement templates with `{}` holes for terms.
pub(super) const TEMPLATES: &[&str] = &[
    "INSERT INTO ks.t (a, b, \"C\") VALUES ({}, {}, {}) USING TTL 5",
    "insert into t (a) values ({}) if not exists",
    "UPDATE t SET a = {}, b = b + {}, m[{}] = {} WHERE k = {} AND c IN ({}, {}) IF d = {}",
    "SELECT a, 'x' FROM t WHERE k = {} AND (c, d) > ({}, {}) AND e CONTAINS {} LIMIT 10",
    "DELETE m[{}] FROM t /* c */ WHERE k IN ({}) AND c >= {}",
    "BEGIN BATCH INSERT INTO t (a, b) VALUES ({}, {}); UPDATE t SET c = {} WHERE k = {} APPLY BATCH",
];

pub(super) fn fill(template: &str, terms: &[String]) -> String {
    let mut out = String::new();
    let mut parts = template.split("{}");
    let mut terms = terms.iter().cycle();
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    for p in parts {
        out.push_str(terms.next().map_or("1", String::as_str));
        out.push_str(p);
    }
    out
}

pub(super) fn cqlish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just(" ".to_owned()),
        Just("SELECT".to_owned()),
        Just("INSERT INTO t (a) VALUES".to_owned()),
        Just("UPDATE t SET".to_owned()),
        Just("WHERE".to_owned()),
        Just("AND".to_owned()),
        Just("IN".to_owned()),
        Just("FROM t".to_owned()),
        Just("BEGIN BATCH".to_owned()),
        Just("APPLY BATCH".to_owned()),
        Just("IF".to_owned()),
        Just("LIMIT".to_owned()),
        Just("null".to_owned()),
        Just("token".to_owned()),
        "[a-z]{1,3}",
        "[(){}\\[\\],;:?=<>+*%.-]",
        "[0-9]{1,2}",
        Just("'s'".to_owned()),
    ];
    proptest::collection::vec(piece, 0..30).prop_map(|v| v.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(800))]

    #[test]
    fn never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = normalize(&bytes);
    }

    #[test]
    fn never_panics_on_cqlish_text(src in cqlish()) {
        if let Ok(Normalized::Shape(sh)) = normalize_str(&src) {
            // A shape always lexes, and has exactly one slot per marker.
            let toks = crate::cql::lexer::tokenize(&sh.text).unwrap();
            let q = toks.iter().filter(|t| t.kind == TokenKind::QMark).count();
            prop_assert!(q <= sh.slots.len());
        }
    }

    #[test]
    fn rendered_shape_normalizes_to_the_same_shape(
        template in proptest::sample::select(TEMPLATES),
        terms in proptest::collection::vec(term_strategy(), 8),
    ) {
        let src = fill(template, &terms);
        let sh = match normalize_str(&src) {
            Ok(Normalized::Shape(sh)) => sh,
            // Only client markers and inline terms were drawn.
            Ok(Normalized::NotCandidate(NotCandidate::NoLiterals { .. })) => return Ok(()),
            other => return Err(TestCaseError::fail(format!("{src:?}: {other:?}"))),
        };
        let rendered = render(&sh);
        let again = normalize_str(&rendered);
        match again {
            Ok(Normalized::Shape(sh2)) => {
                prop_assert_eq!(&sh2.text, &sh.text, "{} / {}", src, rendered);
                prop_assert_eq!(&sh2.slots, &sh.slots);
            }
            other => return Err(TestCaseError::fail(format!("{rendered:?}: {other:?}"))),
        }
    }

    #[test]
    fn other_literal_values_give_the_same_text(
        template in proptest::sample::select(TEMPLATES),
        a in proptest::collection::vec(literal_strategy(), 8),
        b in proptest::collection::vec(literal_strategy(), 8),
    ) {
        let sa = shape_text(&fill(template, &a));
        let sb = shape_text(&fill(template, &b));
        prop_assert_eq!(sa, sb);
    }
}

fn shape_text(src: &str) -> String {
    match normalize_str(src) {
        Ok(Normalized::Shape(s)) => s.text,
        other => panic!("{src:?}: {other:?}"),
    }
}
