//! Fuzz target for the CQL lexer and normalizer: any bytes must give tokens or an error, never
//! a panic, and a shape must be self-consistent.
//!
//! Checked on every input:
//! - lexing never panics; tokens are the exact input slices at their offsets, in order, and
//!   what lies between them is whitespace or comments;
//! - normalizing never panics;
//! - wherever the single-pass normalizer answers, the full parser gives the same answer;
//! - a shape's text lexes, holds one marker per slot, and normalizes again to a statement
//!   with nothing left to replace (the canonical text is a fixed point);
//! - the other readers of statement text never panic: the tables a statement names and the
//!   table a SELECT reads (`source_table`, and the proxy's topology `table_of`), whether it
//!   is conditional, marker names, fingerprints; a SELECT whose table is found passes the
//!   cheap "may be a SELECT" test that guards the lexer.
#![no_main]

use autoprep_protocol::cql::conditional::is_conditional;
use autoprep_protocol::cql::idempotent::{is_idempotent, may_repeat};
use autoprep_protocol::cql::lexer::{Lexer, TokenKind};
use autoprep_protocol::cql::normalize::resolve_identifier;
use autoprep_protocol::cql::normalize::{
    both_passes, normalize, normalize_str, Normalized, NotCandidate,
};
use autoprep_protocol::cql::source_table::{may_be_select, selected_table, statement_tables};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if selected_table(data).is_some() {
        assert!(
            may_be_select(data),
            "a SELECT's table found past the cheap test"
        );
    }
    let _ = autoprep::topology::table_of(data, Some("system"));
    if let Ok(src) = std::str::from_utf8(data) {
        if let Some(tables) = statement_tables(src) {
            for t in tables {
                let _ = (t.keyspace, t.table);
            }
        }
        let _ = is_conditional(src);
        let _ = resolve_identifier(src);
    }
    if let Ok(lexer) = Lexer::from_bytes(data) {
        let src = lexer.source();
        let mut at = 0;
        for tok in lexer {
            let Ok(tok) = tok else { break };
            assert!(tok.offset >= at, "tokens out of order");
            assert_eq!(src.get(tok.offset..tok.end()), Some(tok.text));
            let gap = src.get(at..tok.offset).unwrap_or_default();
            assert!(
                gap.trim_start().is_empty()
                    || gap.contains("--")
                    || gap.contains("//")
                    || gap.contains("/*"),
                "unexplained gap {gap:?}"
            );
            at = tok.end();
        }
    }

    if let Ok(src) = std::str::from_utf8(data) {
        let (fast, full) = both_passes(src);
        if let Some(fast) = fast {
            assert_eq!(Ok(fast), full, "single pass and parser differ on {src:?}");
        }
    }

    let Ok(Normalized::Shape(shape)) = normalize(data) else {
        return;
    };
    let toks = autoprep_protocol::cql::lexer::tokenize(&shape.text).expect("shape text lexes");
    let qmarks = toks.iter().filter(|t| t.kind == TokenKind::QMark).count();
    let colons = toks.iter().filter(|t| t.kind == TokenKind::Colon).count();
    assert!(qmarks <= shape.slots.len() && shape.slots.len() <= qmarks + colons);
    assert!(!shape.slots.is_empty());
    for slot in &shape.slots {
        let _ = slot.resolved_name();
    }
    assert_eq!(shape.fingerprint(Some("ks")), shape.fingerprint(Some("ks")));
    let _ = shape.hash(None);
    // The proxy reads idempotence once from the shape: markers in the literals' places
    // change no rule's verdict.
    assert_eq!(
        is_idempotent(data),
        is_idempotent(shape.text.as_bytes()),
        "idempotence differs between {:?} and its shape {:?}",
        String::from_utf8_lossy(data),
        shape.text
    );
    assert_eq!(may_repeat(data), may_repeat(shape.text.as_bytes()));
    assert_eq!(
        shape.literal_count() + shape.client_marker_count(),
        shape.slots.len()
    );
    match normalize_str(&shape.text) {
        Ok(Normalized::NotCandidate(NotCandidate::NoLiterals { kind })) => {
            assert_eq!(kind, shape.kind)
        }
        other => panic!("{:?} renormalized to {other:?}", shape.text),
    }
});
