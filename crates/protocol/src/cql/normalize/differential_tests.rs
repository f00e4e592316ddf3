//! The single pass against the full parser: wherever the single pass answers, its answer must
//! be the parser's, byte for byte. Statements come from the corpus, from a generator of the
//! forms the single pass handles (with random case, spacing, comments and terms, valid or not),
//! and from random token soup.

use super::{both_passes, normalize_str, Normalized};
use proptest::prelude::*;

/// Asserts the contract for one statement; true if the single pass answered.
fn agree(src: &str) -> bool {
    let (fast, full) = both_passes(src);
    match fast {
        Some(f) => {
            assert_eq!(Ok(f), full, "single pass and parser differ on {src:?}");
            true
        }
        None => false,
    }
}

/// Statements applications send over and over: the single pass must take them.
const COMMON: &[&str] = &[
    "INSERT INTO metrics.sensor_data (sensor_id, ts, temperature, humidity, status) \
     VALUES ('sensor-0017', '2026-01-02 03:04:05+0000', 21.5, 48, 'ok')",
    "insert into t (a, b) values (?, 'x') using ttl 60 and timestamp 123",
    "INSERT INTO t (k, l, s, m) VALUES (1, [1, 2], {'a'}, {1: 'x'}) IF NOT EXISTS;",
    "UPDATE t USING TTL 5 SET a = 1, c = c + 2, d = d -1, l = l - [1] WHERE k = 'x' IF EXISTS",
    "UPDATE t SET v = null WHERE k IN (1, 2, 3) AND c >= 5 IF v = 3",
    "DELETE FROM t WHERE k = 5",
    "DELETE a, b FROM ks.t USING TIMESTAMP 5 WHERE k = ? AND c IS NOT NULL",
    "SELECT * FROM t WHERE k = 1 AND c > 2 ORDER BY c DESC LIMIT 10 ALLOW FILTERING",
    "SELECT a, \"B\" FROM t WHERE k IN ('a', 'b') AND m CONTAINS KEY 3 PER PARTITION LIMIT 2",
    "SELECT a FROM t WHERE k BETWEEN 1 AND 5 AND s LIKE 'x%'",
    "BEGIN UNLOGGED BATCH USING TIMESTAMP 1 INSERT INTO t (a) VALUES (1); \
     UPDATE t SET b = 'x' WHERE a = 2 APPLY BATCH",
    "INSERT INTO t (a, b) VALUES (:x, 1) -- trailing comment\n",
    // The canonical INSERT lane, whole and handing over to the single pass.
    "INSERT INTO ks.t (a, \"B\", c, d) VALUES (1, ?, [1, 2], {'k': 2.5})",
    "INSERT INTO t (a, b, c) VALUES (1, :x, 3)",
    "INSERT INTO t (a, b, c) VALUES (:x, 'it''s', $$y$$)",
    "INSERT INTO t (a, b) VALUES (null, -1) USING TTL 5;",
    "INSERT INTO t (a, b) VALUES (1, 2 ) IF NOT EXISTS",
];

#[test]
fn common_statements_take_the_single_pass() {
    for src in COMMON {
        assert!(agree(src), "left to the parser: {src:?}");
    }
}

#[test]
fn corpus_agrees() {
    let corpus = include_str!("../../../../../tests/corpus/dml.cql");
    let mut fast = 0;
    for line in corpus.lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let line = ["!no-literals ", "!unsupported ", "!error "]
            .iter()
            .fold(line, |l, p| l.strip_prefix(p).unwrap_or(l));
        let src = line.replace("\\n", "\n").replace("\\t", "\t");
        if agree(&src) {
            fast += 1;
        }
    }
    // Most of the corpus is in the single pass's subset.
    assert!(
        fast > 150,
        "only {fast} corpus statements took the single pass"
    );
}

#[test]
fn lane_names_agree() {
    // Names the canonical INSERT lane settles on their length and first letter, and the words
    // it leaves to the lexer, in every place of a canonical head.
    let names = [
        "humidity",
        "Humidity",
        "infinity",
        "Infinity",
        "INFINITE",
        "infinit",
        "nan",
        "NaN",
        "nul",
        "null",
        "NULL",
        "nulls",
        "true",
        "True",
        "tru",
        "truth",
        "false",
        "FALSE",
        "falsy",
        "fals",
        "P1D",
        "PT1H",
        "P1Y2M",
        "Pxyz",
        "PT",
        "P",
        "p1d",
        "deadbeef",
        "deadbeef-dead-beef-dead-beefdeadbeef",
        "c-1",
        "t",
        "tt",
        "ttt_",
        "i2345678",
        "abcdefgh",
        "abcdefghi",
        "\"Q\"",
    ];
    for n in names {
        for src in [
            format!("INSERT INTO {n} (a, b) VALUES (1, 'x')"),
            format!("INSERT INTO {n}.t (a, b) VALUES (1, 'x')"),
            format!("INSERT INTO ks.{n} (a, b) VALUES (1, 'x')"),
            format!("INSERT INTO t ({n}, b) VALUES (1, 'x')"),
            format!("INSERT INTO t (a, {n}) VALUES (1, 'x')"),
            format!("INSERT INTO t ({n}) VALUES ([1, 2])"),
        ] {
            agree(&src);
        }
    }
}

#[test]
fn lane_lists_agree() {
    // Lists the canonical INSERT lane reads itself and those it leaves to the general path.
    let lists = [
        "[1, 2, 3]",
        "[1]",
        "[]",
        "[ 1, 2]",
        "[1 , 2]",
        "[1,2]",
        "[1,  2]",
        "[1, 2 ]",
        "[-1, -2.5, -NaN]",
        "[--c\n1]",
        "[1, --c\n2]",
        "[/* c */1]",
        "[1, /**/2]",
        "[1, null]",
        "[null]",
        "[1, ?]",
        "[1, c]",
        "[1, [2]]",
        "['a''b', 'c']",
        "[1, 2] + [3]",
        "[1, 2,]",
        "[1, 2",
        "[1,",
        "[0x0A, 1h30m, P1D, true, NaN, -Infinity, 1e5]",
        "[550e8400-e29b-41d4-a716-446655440000, 550e8400-e29b-41d4-a716-44665544000g]",
        "[1, 2]3",
        "[1 2]",
        "[1, 'x]",
        "[1, -]",
        "[1, -1-2]",
    ];
    for l in lists {
        agree(&format!("INSERT INTO t (a) VALUES ({l})"));
        agree(&format!(
            "INSERT INTO t (a, b) VALUES ({l}, {l}) USING TTL 5"
        ));
        agree(&format!("INSERT INTO t (a, b) VALUES (1, {l})"));
    }
    assert!(agree("INSERT INTO t (a, b) VALUES ([1, 2], ['x'])"));
}

/// A keyword in a random case.
fn kw(word: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(word.to_owned()),
        Just(word.to_lowercase()),
        Just(word[..1].to_owned() + &word[1..].to_lowercase()),
    ]
}

/// What goes between two tokens.
fn gap() -> impl Strategy<Value = String> {
    prop_oneof![
        30 => Just(" ".to_owned()),
        1 => Just(String::new()),
        1 => Just("  ".to_owned()),
        1 => Just("\n\t".to_owned()),
        1 => Just(" /* c */ ".to_owned()),
        1 => Just("/**/".to_owned()),
        1 => Just(" -- c\n".to_owned()),
    ]
}

/// A name, sometimes one that is also a keyword or not a name at all.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        60 => "[a-z][a-z0-9_]{0,6}",
        1 => Just("\"Quoted \"\" Col\"".to_owned()),
        1 => Just("exists".to_owned()),
        1 => Just("expr".to_owned()),
        1 => Just("token".to_owned()),
        1 => Just("null".to_owned()),
        1 => Just("true".to_owned()),
        1 => Just("PT1H".to_owned()),
        1 => Just("deadbeef-dead-beef-dead-beefdeadbeef".to_owned()),
        // Words the lexer may classify as something else than an identifier, by their
        // length and first letter (the lane settles other words without the lexer).
        4 => "[tfniPT][a-zA-Z0-9_]{2,7}",
        1 => "[0-9a-fA-F]{8}",
        1 => Just("c-1".to_owned()),
    ]
}

/// A constant, or a list, set or map of constants.
fn flat_literal() -> impl Strategy<Value = String> {
    let scalar = prop_oneof![
        any::<String>().prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
        "'[a-z' ]{0,6}'",
        any::<i64>().prop_map(|i| i.to_string()),
        "-?[0-9]{1,5}\\.[0-9]{0,3}([eE][+-]?[0-9]{1,2})?",
        Just("true".to_owned()),
        Just("NaN".to_owned()),
        Just("-Infinity".to_owned()),
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9A-F]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "0x[0-9a-f]{0,6}",
        "[0-9]{1,2}(h|mo|ms|µs)",
        Just("P1Y2M".to_owned()),
    ];
    prop_oneof![
        6 => scalar.clone(),
        1 => list(scalar.clone(), 4).prop_map(|l| format!("[{l}]")),
        1 => Just("[]".to_owned()),
        1 => list(scalar.clone(), 4).prop_map(|l| format!("{{{l}}}")),
        1 => list((scalar.clone(), scalar).prop_map(|(k, v)| format!("{k}: {v}")), 3)
            .prop_map(|l| format!("{{{l}}}")),
        1 => Just("{}".to_owned()),
    ]
}

/// A term in a value position.
fn term() -> impl Strategy<Value = String> {
    prop_oneof![
        100 => flat_literal(),
        20 => super::tests::literal_strategy(),
        5 => Just("?".to_owned()),
        3 => Just(":n".to_owned()),
        1 => Just(": \"N\"".to_owned()),
        3 => Just("null".to_owned()),
        2 => Just("NULL".to_owned()),
        1 => Just("1 + 2".to_owned()),
        1 => Just("'a' - 1".to_owned()),
        1 => Just("- 1".to_owned()),
        1 => Just("-1".to_owned()),
        1 => Just("-NaN".to_owned()),
        1 => Just("now()".to_owned()),
        1 => Just("c".to_owned()),
        1 => Just("[1, ?]".to_owned()),
        1 => Just("[1,]".to_owned()),
        1 => Just("{1,}".to_owned()),
        1 => Just("{f: 1}".to_owned()),
        1 => Just("(1, 2)".to_owned()),
        1 => Just("'a''b'".to_owned()),
        1 => Just("1 /* x */ * 2".to_owned()),
        1 => Just("1 -- x\n".to_owned()),
        1 => Just("$$a'b$$".to_owned()),
    ]
}

fn list<S: Strategy<Value = String>>(item: S, max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(item, 1..max).prop_map(|v| v.join(", "))
}

fn relation() -> impl Strategy<Value = String> {
    (
        name(),
        prop_oneof![
            10 => Just("=".to_owned()),
            3 => Just("IN".to_owned()),
            1 => Just("<".to_owned()),
            1 => Just(">=".to_owned()),
            1 => Just("!=".to_owned()),
            1 => Just("in".to_owned()),
            1 => Just("CONTAINS".to_owned()),
            1 => Just("CONTAINS KEY".to_owned()),
            1 => Just("LIKE".to_owned()),
            1 => Just("IS NOT".to_owned()),
            1 => Just("==".to_owned()),
        ],
        prop_oneof![
            4 => term(),
            2 => list(term(), 4).prop_map(|l| format!("({l})")),
            1 => Just("()".to_owned()),
            1 => Just("BETWEEN 1 AND 2".to_owned()),
        ],
    )
        .prop_map(|(n, op, t)| format!("{n} {op} {t}"))
}

fn where_clause() -> impl Strategy<Value = String> {
    proptest::collection::vec(relation(), 1..3).prop_map(|v| format!("WHERE {}", v.join(" AND ")))
}

fn tail() -> impl Strategy<Value = String> {
    prop_oneof![
        10 => Just(String::new()),
        2 => Just("USING TTL 5".to_owned()),
        1 => Just("USING TTL ? AND TIMESTAMP 1".to_owned()),
        1 => Just("USING TIMEOUT 5s".to_owned()),
        2 => Just("IF NOT EXISTS".to_owned()),
        1 => Just("IF EXISTS".to_owned()),
        1 => Just("IF exists = 1".to_owned()),
        1 => Just("IF not = 1".to_owned()),
        2 => relation().prop_map(|r| format!("IF {r}")),
        1 => Just(";".to_owned()),
        1 => Just(";;".to_owned()),
        1 => Just("; x".to_owned()),
    ]
}

/// Statements of the single pass's forms, with holes filled at random.
fn statement() -> impl Strategy<Value = String> {
    let insert = (
        kw("INSERT"),
        kw("INTO"),
        name(),
        list(name(), 5),
        list(term(), 5),
        tail(),
    )
        .prop_map(|(i, n, t, c, v, tl)| format!("{i} {n} ks.{t} ({c}) VALUES ({v}) {tl}"));
    let update = (
        kw("UPDATE"),
        name(),
        list(
            (name(), prop_oneof![6 => Just("="), 1 => Just("+="), 1 => Just("= c +"), 1 => Just("= c"), 1 => Just("= c -")], term())
                .prop_map(|(n, o, t)| format!("{n} {o} {t}")),
            3,
        ),
        where_clause(),
        tail(),
    )
        .prop_map(|(u, t, s, w, tl)| format!("{u} {t} SET {s} {w} {tl}"));
    let delete = (
        kw("DELETE"),
        prop_oneof![Just(String::new()), list(name(), 3)],
        where_clause(),
    )
        .prop_map(|(d, c, w)| format!("{d} {c} FROM t {w}"));
    let select = (
        kw("SELECT"),
        prop_oneof![3 => Just("*".to_owned()), 3 => list(name(), 4), 1 => Just("count(*)".to_owned())],
        proptest::option::of(where_clause()),
        prop_oneof![
            4 => Just(String::new()),
            2 => Just("LIMIT 5".to_owned()),
            1 => Just("ORDER BY c DESC LIMIT ?".to_owned()),
            1 => Just("PER PARTITION LIMIT 1 ALLOW FILTERING".to_owned()),
            1 => Just("GROUP BY a".to_owned()),
            1 => Just("BYPASS CACHE".to_owned()),
        ],
    )
        .prop_map(|(s, sel, w, t)| format!("{s} {sel} FROM t {} {t}", w.unwrap_or_default()));
    let batch = (
        kw("BEGIN"),
        list(
            prop_oneof![
                "INSERT INTO t (a) VALUES (1)",
                "DELETE FROM t WHERE k = 'x'"
            ]
            .prop_map(String::from),
            3,
        ),
    )
        .prop_map(|(b, s)| format!("{b} BATCH {} APPLY BATCH", s.replace(", ", "; ")));
    prop_oneof![3 => insert, 2 => update, 1 => delete, 2 => select, 1 => batch]
}

/// Re-spaces a statement: every single space becomes a random gap.
fn respaced() -> impl Strategy<Value = String> {
    (statement(), proptest::collection::vec(gap(), 64)).prop_map(|(s, gaps)| {
        let mut out = String::new();
        for (i, part) in s.split(' ').enumerate() {
            if i > 0 {
                out.push_str(&gaps[i % gaps.len()]);
            }
            out.push_str(part);
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn generated_statements_agree(src in statement()) {
        agree(&src);
    }

    #[test]
    fn respaced_statements_agree(src in respaced()) {
        agree(&src);
    }

    #[test]
    fn template_statements_agree(
        template in proptest::sample::select(super::tests::TEMPLATES),
        terms in proptest::collection::vec(term(), 8),
    ) {
        agree(&super::tests::fill(template, &terms));
    }

    #[test]
    fn token_soup_agrees(src in super::tests::cqlish()) {
        agree(&src);
    }

    #[test]
    fn normalizing_a_shape_again_agrees(src in statement()) {
        if let Ok(Normalized::Shape(sh)) = normalize_str(&src) {
            agree(&sh.text);
        }
    }
}
