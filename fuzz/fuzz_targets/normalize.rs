//! Fuzz target for the CQL lexer and normalizer: any bytes must give tokens or an error, never
//! a panic, and a shape must be self-consistent.
//!
//! Checked on every input:
//! - lexing never panics; tokens are the exact input slices at their offsets, in order, and
//!   what lies between them is whitespace or comments;
//! - normalizing never panics;
//! - wherever the single-pass normalizer answers, the full parser gives the same answer;
//! - a shape's text lexes, holds one marker per slot, and normalizes again to a statement
//!   with nothing left to replace (the canonical text is a fixed point).
#![no_main]

use autoprep_protocol::cql::lexer::{Lexer, TokenKind};
use autoprep_protocol::cql::normalize::{
    both_passes, normalize, normalize_str, NotCandidate, Normalized,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(lexer) = Lexer::from_bytes(data) {
        let src = lexer.source();
        let mut at = 0;
        for tok in lexer {
            let Ok(tok) = tok else { break };
            assert!(tok.offset >= at, "tokens out of order");
            assert_eq!(src.get(tok.offset..tok.end()), Some(tok.text));
            let gap = src.get(at..tok.offset).unwrap_or_default();
            assert!(
                gap.trim_start().is_empty() || gap.contains("--") || gap.contains("//") || gap.contains("/*"),
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
    match normalize_str(&shape.text) {
        Ok(Normalized::NotCandidate(NotCandidate::NoLiterals { kind })) => {
            assert_eq!(kind, shape.kind)
        }
        other => panic!("{:?} renormalized to {other:?}", shape.text),
    }
});
