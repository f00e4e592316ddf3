//! The [`Literal`] a constant token stands for, shared by both normalizer passes.

use std::borrow::Cow;

use crate::cql::lexer::{keyword_eq, Token, TokenKind};
use crate::cql::Literal;

/// The literal of a constant token (`TokenKind::is_constant`) or of `null`; `None` for any
/// other token.
#[inline]
pub(super) fn constant_literal<'a>(t: &Token<'a>) -> Option<Literal<'a>> {
    Some(match t.kind {
        TokenKind::String => Literal::String(string_value(t.text)),
        TokenKind::Integer => Literal::Integer(t.text),
        TokenKind::Float => Literal::Float(t.text),
        TokenKind::Boolean => Literal::Boolean(keyword_eq(t.text, "TRUE")),
        TokenKind::NaN => Literal::NaN,
        TokenKind::Infinity => Literal::Infinity {
            negative: t.text.starts_with('-'),
        },
        TokenKind::Uuid => Literal::Uuid(t.text),
        TokenKind::Hex => Literal::Hex(t.text.get(2..)?),
        TokenKind::Duration => Literal::Duration(t.text),
        TokenKind::Ident if keyword_eq(t.text, "NULL") => Literal::Null,
        _ => return None,
    })
}

/// `'...'` or `$$...$$` to its value: borrowed from the statement unless it holds a `''`
/// escape.
pub(super) fn string_value(text: &str) -> Cow<'_, str> {
    if let Some(inner) = text.strip_prefix("$$").and_then(|t| t.strip_suffix("$$")) {
        return Cow::Borrowed(inner);
    }
    let inner = text
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .unwrap_or(text);
    // A quote inside means an escaped `''`. A plain loop: literals are short, and both
    // `str::contains` and memchr cost more in setup than the scan itself.
    if inner.bytes().any(|b| b == b'\'') {
        Cow::Owned(inner.replace("''", "'"))
    } else {
        Cow::Borrowed(inner)
    }
}
