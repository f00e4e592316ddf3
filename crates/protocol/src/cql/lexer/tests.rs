//! Unit tests of the lexer: one group per token kind, the error cases, and property tests
//! (totality, and tokens plus skipped text covering the input).

use super::*;
use proptest::prelude::*;
use TokenKind::*;

fn kinds(src: &str) -> Vec<(TokenKind, &str)> {
    tokenize(src)
        .unwrap_or_else(|e| panic!("{src:?}: {e}"))
        .into_iter()
        .map(|t| (t.kind, t.text))
        .collect()
}

fn one(src: &str) -> TokenKind {
    let toks = kinds(src);
    assert_eq!(toks.len(), 1, "{src:?} gave {toks:?}");
    assert_eq!(toks[0].1, src);
    toks[0].0
}

fn err(src: &str) -> LexError {
    match tokenize(src) {
        Ok(t) => panic!("{src:?} lexed as {t:?}"),
        Err(e) => e,
    }
}

#[test]
fn keywords_and_identifiers() {
    assert_eq!(one("SELECT"), Ident);
    assert_eq!(one("sElEcT"), Ident);
    assert_eq!(one("a_1"), Ident);
    assert_eq!(one("ColumnName"), Ident);
    let t = tokenize("select").unwrap();
    assert!(t[0].is_keyword("SELECT"));
    assert!(!t[0].is_keyword("SELECTS"));
    // Identifiers cannot start with `_` or a digit.
    assert!(matches!(
        err("_a"),
        LexError::UnexpectedChar { offset: 0, ch: '_' }
    ));
    assert!(matches!(
        err("12ab"),
        LexError::MalformedConstant { offset: 0 }
    ));
}

#[test]
fn quoted_identifiers() {
    assert_eq!(one(r#""MyCol""#), QuotedIdent);
    assert_eq!(one(r#""a""b""#), QuotedIdent);
    assert_eq!(one(r#""""#), QuotedIdent); // the empty name
    assert_eq!(one(r#""""""#), QuotedIdent); // a name that is one quote
    assert_eq!(one(r#""with space and 'quote'""#), QuotedIdent);
    assert_eq!(
        kinds(r#""" "x""#),
        vec![(QuotedIdent, r#""""#), (QuotedIdent, r#""x""#)]
    );
    assert!(matches!(
        err(r#""abc"#),
        LexError::UnterminatedQuotedIdent { offset: 0 }
    ));
    assert!(matches!(
        err(r#"a """"#),
        LexError::UnterminatedQuotedIdent { offset: 2 }
    ));
}

#[test]
fn strings() {
    assert_eq!(one("'abc'"), String);
    assert_eq!(one("''"), String);
    assert_eq!(one("'it''s'"), String);
    assert_eq!(one("''''"), String);
    assert_eq!(one("'multi\nline -- not a comment'"), String);
    assert_eq!(one("'héllo wörld ✓'"), String);
    assert_eq!(one("'back\\slash'"), String);
    assert_eq!(one("$$raw 'string' \"x\" $ $$"), String);
    assert_eq!(one("$$$$"), String);
    assert_eq!(kinds("$$a$$ $$b$$").len(), 2);
    assert!(matches!(
        err("'abc"),
        LexError::UnterminatedString { offset: 0 }
    ));
    assert!(matches!(
        err("x 'it''"),
        LexError::UnterminatedString { offset: 2 }
    ));
    assert!(matches!(
        err("$$abc$"),
        LexError::UnterminatedString { offset: 0 }
    ));
    assert!(matches!(
        err("$abc"),
        LexError::UnexpectedChar { offset: 0, ch: '$' }
    ));
}

#[test]
fn integers_and_the_adjacent_minus() {
    assert_eq!(one("0"), Integer);
    assert_eq!(one("007"), Integer);
    assert_eq!(one("-12"), Integer);
    assert_eq!(one("99999999999999999999999999"), Integer);
    assert_eq!(kinds("- 1"), vec![(Minus, "-"), (Integer, "1")]);
    assert_eq!(kinds("c -1"), vec![(Ident, "c"), (Integer, "-1")]);
    assert_eq!(kinds("5-1"), vec![(Integer, "5"), (Integer, "-1")]);
    assert_eq!(
        kinds("c - -1"),
        vec![(Ident, "c"), (Minus, "-"), (Integer, "-1")]
    );
}

#[test]
fn floats() {
    for f in [
        "1.", "1.5", "1e5", "1E+5", "1e-5", "-1.5e-3", "0.0", "1.e5", "-0.5",
    ] {
        assert_eq!(one(f), Float, "{f}");
    }
    assert_eq!(kinds(".5"), vec![(Dot, "."), (Integer, "5")]);
    assert_eq!(
        kinds("1..2"),
        vec![(Integer, "1"), (Range, ".."), (Integer, "2")]
    );
    assert_eq!(
        kinds("1...2"),
        vec![(Float, "1."), (Range, ".."), (Integer, "2")]
    );
    assert!(matches!(
        err("1e"),
        LexError::MalformedConstant { offset: 0 }
    ));
    assert!(matches!(
        err("1.5x"),
        LexError::MalformedConstant { offset: 0 }
    ));
    assert!(matches!(
        err("1e5e"),
        LexError::MalformedConstant { offset: 0 }
    ));
}

#[test]
fn nan_and_infinity() {
    for w in ["NaN", "nan", "NAN", "-NaN", "-nan"] {
        assert_eq!(one(w), NaN, "{w}");
    }
    for w in ["Infinity", "infinity", "-Infinity", "-INFINITY"] {
        assert_eq!(one(w), Infinity, "{w}");
    }
    assert_eq!(kinds("-nanx"), vec![(Minus, "-"), (Ident, "nanx")]);
    assert_eq!(kinds("NaNs"), vec![(Ident, "NaNs")]);
    assert_eq!(kinds("- NaN"), vec![(Minus, "-"), (NaN, "NaN")]);
}

#[test]
fn booleans() {
    for w in ["true", "FALSE", "True", "fAlSe"] {
        assert_eq!(one(w), Boolean, "{w}");
    }
    assert_eq!(one("trueish"), Ident);
}

#[test]
fn uuids() {
    assert_eq!(one("550e8400-e29b-41d4-a716-446655440000"), Uuid);
    assert_eq!(one("550E8400-E29B-41D4-A716-446655440000"), Uuid);
    assert_eq!(one("deadbeef-0000-1111-2222-333344445555"), Uuid);
    // Not quite a UUID: an integer and negative integers, or identifiers.
    assert_eq!(
        kinds("12345678-1234"),
        vec![(Integer, "12345678"), (Integer, "-1234")]
    );
    assert_eq!(
        kinds("deadbeef-1"),
        vec![(Ident, "deadbeef"), (Integer, "-1")]
    );
    assert!(matches!(
        err("550e8400-e29b-41d4-a716-446655440000x"),
        LexError::MalformedConstant { offset: 0 }
    ));
}

#[test]
fn blobs() {
    assert_eq!(one("0x"), Hex);
    assert_eq!(one("0X00ff"), Hex);
    assert_eq!(one("0xABC"), Hex); // odd length lexes, the server rejects it later
    assert!(matches!(
        err("0xfg"),
        LexError::MalformedConstant { offset: 0 }
    ));
    assert!(matches!(
        err("-0x1"),
        LexError::MalformedConstant { offset: 0 }
    ));
}

#[test]
fn durations_unit_form() {
    for d in [
        "1y",
        "2mo",
        "3w",
        "4d",
        "5h",
        "6m",
        "7s",
        "8ms",
        "9us",
        "10µs",
        "11ns",
        "1h30m",
        "1Y2MO3W4D5H6M7S8MS9US10NS",
        "-2d",
        "12h30m15s500ms",
        "1µs",
    ] {
        assert_eq!(one(d), Duration, "{d}");
    }
    assert!(matches!(
        err("1x"),
        LexError::MalformedConstant { offset: 0 }
    ));
    assert!(matches!(
        err("1hx"),
        LexError::MalformedConstant { offset: 0 }
    ));
    assert!(matches!(
        err("1mos"),
        LexError::MalformedConstant { offset: 0 }
    ));
    assert!(matches!(
        err("1µ"),
        LexError::MalformedConstant { offset: 0 }
    ));
}

#[test]
fn durations_iso_form() {
    for d in [
        "P1Y",
        "P1Y2M",
        "P1Y2M3D",
        "P1M",
        "P1D",
        "PT1H",
        "PT1H2M3S",
        "PT2M",
        "PT3S",
        "P1Y2M3DT4H5M6S",
        "P2W",
        "-P2W",
        "-P1D",
        "-PT1H",
        "P0001-02-03T04:05:06",
        "-P0001-02-03T04:05:06",
    ] {
        assert_eq!(one(d), Duration, "{d}");
    }
    // Designators are upper case only, in order, and something must follow P / T.
    for w in [
        "p1d", "P1d", "P", "PT", "P1", "P1D1Y", "P1W2D", "P1YT", "Pxyz", "P1Dx",
    ] {
        assert_eq!(one(w), Ident, "{w}");
    }
    assert_eq!(kinds("-Pxyz"), vec![(Minus, "-"), (Ident, "Pxyz")]);
}

#[test]
fn markers_punctuation_and_operators() {
    assert_eq!(
        kinds("? :name ( ) [ ] { } , ; . .. = != < <= > >= + - * / % += -="),
        vec![
            (QMark, "?"),
            (Colon, ":"),
            (Ident, "name"),
            (LParen, "("),
            (RParen, ")"),
            (LBracket, "["),
            (RBracket, "]"),
            (LBrace, "{"),
            (RBrace, "}"),
            (Comma, ","),
            (Semicolon, ";"),
            (Dot, "."),
            (Range, ".."),
            (Eq, "="),
            (Ne, "!="),
            (Lt, "<"),
            (Le, "<="),
            (Gt, ">"),
            (Ge, ">="),
            (Plus, "+"),
            (Minus, "-"),
            (Star, "*"),
            (Slash, "/"),
            (Percent, "%"),
            (PlusEq, "+="),
            (MinusEq, "-="),
        ]
    );
    assert_eq!(
        kinds("a=-1"),
        vec![(Ident, "a"), (Eq, "="), (Integer, "-1")]
    );
    assert_eq!(
        kinds("c-=1"),
        vec![(Ident, "c"), (MinusEq, "-="), (Integer, "1")]
    );
    assert!(matches!(
        err("a ! b"),
        LexError::UnexpectedChar { offset: 2, ch: '!' }
    ));
    assert!(matches!(
        err("a & b"),
        LexError::UnexpectedChar { offset: 2, ch: '&' }
    ));
    assert!(matches!(
        err("a\u{a0}b"),
        LexError::UnexpectedChar {
            offset: 1,
            ch: '\u{a0}'
        }
    ));
    assert!(matches!(
        err("a\u{c}b"),
        LexError::UnexpectedChar { offset: 1, .. }
    ));
}

#[test]
fn comments_and_whitespace() {
    assert_eq!(
        kinds("a -- one\nb // two\r\nc /* three\n */ d\t\r\n"),
        vec![(Ident, "a"), (Ident, "b"), (Ident, "c"), (Ident, "d")]
    );
    assert_eq!(kinds("/* a /* b */ c"), vec![(Ident, "c")]); // not nested
    assert_eq!(kinds("/**/x"), vec![(Ident, "x")]);
    assert_eq!(
        kinds("1/2"),
        vec![(Integer, "1"), (Slash, "/"), (Integer, "2")]
    );
    // A line comment must end with a line end, as in Cassandra's lexer.
    assert!(matches!(
        err("a -- end"),
        LexError::UnterminatedComment { offset: 2 }
    ));
    assert!(matches!(
        err("a // end"),
        LexError::UnterminatedComment { offset: 2 }
    ));
    assert!(matches!(
        err("a /* end"),
        LexError::UnterminatedComment { offset: 2 }
    ));
    assert!(matches!(
        err("a /*/"),
        LexError::UnterminatedComment { offset: 2 }
    ));
    assert_eq!(kinds(""), vec![]);
    assert_eq!(kinds(" \t\r\n"), vec![]);
}

#[test]
fn offsets_and_text() {
    let src = "INSERT INTO t (a) VALUES ('x''y', -1.5)";
    for t in tokenize(src).unwrap() {
        assert_eq!(&src[t.offset..t.end()], t.text);
    }
    let t = tokenize("  héllo").unwrap_err();
    assert_eq!(t.offset(), 3); // 'é' is not a CQL letter
}

#[test]
fn utf8_is_checked() {
    assert!(matches!(
        Lexer::from_bytes(b"SELECT '\xff'"),
        Err(LexError::InvalidUtf8 { offset: 8 })
    ));
    let lexer = from_bytes(b"SELECT 1").unwrap();
    assert_eq!(lexer.count(), 2);
}

#[test]
fn iterator_stops_after_an_error() {
    let mut lexer = Lexer::new("a 'b");
    assert!(matches!(lexer.next(), Some(Ok(_))));
    assert!(matches!(lexer.next(), Some(Err(_))));
    assert!(lexer.next().is_none());
}

/// The bytes between tokens must be whitespace and complete comments only.
fn gap_is_skippable(gap: &str) -> bool {
    let mut rest = gap;
    loop {
        rest = rest.trim_start_matches([' ', '\t', '\r', '\n']);
        if rest.is_empty() {
            return true;
        }
        if rest.starts_with("--") || rest.starts_with("//") {
            match rest.find(['\n', '\r']) {
                Some(i) => rest = &rest[i + 1..],
                None => return false,
            }
        } else if let Some(body) = rest.strip_prefix("/*") {
            match body.find("*/") {
                Some(i) => rest = &body[i + 2..],
                None => return false,
            }
        } else {
            return false;
        }
    }
}

fn check_cover(src: &str) {
    let mut at = 0;
    for tok in Lexer::new(src) {
        let Ok(tok) = tok else { return };
        assert!(tok.offset >= at);
        assert!(gap_is_skippable(&src[at..tok.offset]), "{src:?}");
        assert_eq!(&src[tok.offset..tok.end()], tok.text);
        assert!(!tok.text.is_empty());
        at = tok.end();
    }
    // If lexing succeeded, the tail must be skippable too.
    if tokenize(src).is_ok() {
        assert!(gap_is_skippable(&src[at..]), "{src:?}");
    }
}

/// Strings made of CQL-ish pieces, to reach the interesting paths more often than random text.
fn cqlish() -> impl Strategy<Value = std::string::String> {
    let piece = prop_oneof![
        Just(" ".to_owned()),
        Just("\n".to_owned()),
        Just("'".to_owned()),
        Just("''".to_owned()),
        Just("\"".to_owned()),
        Just("$$".to_owned()),
        Just("$".to_owned()),
        Just("-".to_owned()),
        Just("--".to_owned()),
        Just("/*".to_owned()),
        Just("*/".to_owned()),
        Just("//".to_owned()),
        Just(".".to_owned()),
        Just("0x".to_owned()),
        Just("P".to_owned()),
        Just("T".to_owned()),
        Just("e".to_owned()),
        Just("µs".to_owned()),
        Just("550e8400-e29b-41d4-a716-446655440000".to_owned()),
        Just("deadbeef-".to_owned()),
        Just("12345678-".to_owned()),
        Just("P0001-02-03T04:05:06".to_owned()),
        Just("PT1H".to_owned()),
        Just("P1Y2M3DT4H5M6S".to_owned()),
        Just("NaN".to_owned()),
        Just("Infinity".to_owned()),
        Just("true".to_owned()),
        Just("FALSE".to_owned()),
        Just("1h30m".to_owned()),
        Just("1.5e-3".to_owned()),
        Just("..".to_owned()),
        "[0-9]{1,3}".prop_map(|s| s),
        "[a-zA-Z_]{1,4}".prop_map(|s| s),
        "[(){}\\[\\],;:?=<>!+*%]".prop_map(|s| s),
        any::<char>().prop_map(|c| c.to_string()),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn total_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(lexer) = Lexer::from_bytes(&bytes) {
            for t in lexer {
                let _ = t;
            }
        }
    }

    #[test]
    fn tokens_cover_random_text(src in any::<std::string::String>()) {
        check_cover(&src);
    }

    #[test]
    fn tokens_cover_cqlish_text(src in cqlish()) {
        check_cover(&src);
    }

    #[test]
    fn same_tokens_as_the_reference_lexer_on_cqlish_text(src in cqlish()) {
        prop_assert_eq!(tokenize(&src), super::reference::tokenize(&src));
    }

    #[test]
    fn same_tokens_as_the_reference_lexer_on_random_text(src in any::<std::string::String>()) {
        prop_assert_eq!(tokenize(&src), super::reference::tokenize(&src));
    }

    #[test]
    fn same_tokens_as_the_reference_lexer_on_ascii(src in "[ -~\t\n\r]{0,40}") {
        prop_assert_eq!(tokenize(&src), super::reference::tokenize(&src));
    }
}
