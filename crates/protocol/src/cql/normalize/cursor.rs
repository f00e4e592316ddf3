//! A cursor over a statement for the single-pass normalizer: it answers "is the next token
//! this keyword / this punctuation / a name" by looking at the bytes, and lexes a whole token
//! only where a value may be.
//!
//! Every answer is the lexer's: whitespace and comments are skipped by the lexer's own
//! [`scan::skip_trivia`], words are classified by [`scan::word`], other tokens come from
//! [`scan::token`]. The shortcuts are exact by construction:
//! - a punctuation byte from [`scan::single`] is a one-byte token whatever follows it;
//! - a keyword made of letters, matched in any case and followed by a byte that cannot
//!   continue an identifier, is the identifier token the lexer would give: no keyword the
//!   normalizer uses is a constant word, a UUID prefix or an ISO duration (checked by a test).
//!
//! A lexing error anywhere makes the caller give up: the full parser reports it.

use crate::cql::lexer::scan;
use crate::cql::lexer::{Span, TokenKind};

/// Lexing failed or the input is not in the single pass's subset.
#[derive(Debug)]
pub(super) struct GiveUp;

pub(super) type FResult<T> = Result<T, GiveUp>;

/// The words the single pass matches as keywords (see the module doc; checked by a test).
pub(super) const KEYWORDS: &[&str] = &[
    "INSERT",
    "INTO",
    "VALUES",
    "UPDATE",
    "SET",
    "DELETE",
    "FROM",
    "SELECT",
    "WHERE",
    "AND",
    "ORDER",
    "BY",
    "ASC",
    "DESC",
    "ANN",
    "GROUP",
    "PER",
    "PARTITION",
    "LIMIT",
    "ALLOW",
    "FILTERING",
    "BYPASS",
    "CACHE",
    "USING",
    "TTL",
    "TIMESTAMP",
    "IF",
    "NOT",
    "EXISTS",
    "IN",
    "CONTAINS",
    "KEY",
    "LIKE",
    "BETWEEN",
    "IS",
    "NULL",
    "BEGIN",
    "UNLOGGED",
    "COUNTER",
    "BATCH",
    "APPLY",
];

/// A keyword found by [`Cursor::keyword`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Keyword {
    pub(super) start: usize,
    pub(super) end: usize,
    /// Written exactly as its canonical upper-case spelling.
    pub(super) upper: bool,
}

/// The statement and a position in it, always at a token boundary or in whitespace.
pub(super) struct Cursor<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Cursor { src, pos: 0 }
    }

    /// A cursor at `pos` (a token boundary) of `src`.
    pub(super) fn at(src: &'a str, pos: usize) -> Self {
        Cursor { src, pos }
    }

    /// The statement.
    #[inline(always)]
    pub(super) fn src(&self) -> &'a str {
        self.src
    }

    /// The current offset (after [`Self::peek`], the start of the next token).
    #[inline(always)]
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves to `pos`, the end of a token the caller has examined.
    #[inline(always)]
    pub(super) fn set_pos(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// Skips whitespace and comments; the first byte of the next token (0 at the end).
    #[inline(always)]
    pub(super) fn peek(&mut self) -> FResult<u8> {
        let bytes = self.src.as_bytes();
        // Single spaces are by far the most common separator.
        while scan::at(bytes, self.pos) == b' ' {
            self.pos += 1;
        }
        let b = scan::at(bytes, self.pos);
        if matches!(b, b'\t' | b'\r' | b'\n' | b'-' | b'/') {
            self.pos = scan::skip_trivia(bytes, self.pos).map_err(|_| GiveUp)?;
            return Ok(scan::at(bytes, self.pos));
        }
        Ok(b)
    }

    /// True at the end of the statement (only whitespace and comments left).
    pub(super) fn at_end(&mut self) -> FResult<bool> {
        self.peek()?;
        Ok(self.pos >= self.src.len())
    }

    /// If the next token is the one-byte token `b` (`( ) [ ] { } , ? * ; : % =`), its offset;
    /// moves past it.
    #[inline(always)]
    pub(super) fn single(&mut self, b: u8) -> FResult<Option<usize>> {
        debug_assert!(scan::single(b).is_some());
        if self.peek()? != b {
            return Ok(None);
        }
        let at = self.pos;
        self.pos += 1;
        Ok(Some(at))
    }

    /// If the next token is `.` (not `..`), its offset; moves past it.
    pub(super) fn dot(&mut self) -> FResult<Option<usize>> {
        if self.peek()? != b'.' || scan::at(self.src.as_bytes(), self.pos + 1) == b'.' {
            return Ok(None);
        }
        let at = self.pos;
        self.pos += 1;
        Ok(Some(at))
    }

    /// The keyword `kw` if it is the next token, without moving: its extent and whether it is
    /// written in upper case.
    #[inline(always)]
    pub(super) fn peek_keyword(&mut self, kw: &str) -> FResult<Option<Keyword>> {
        debug_assert!(KEYWORDS.contains(&kw), "{kw} is not in KEYWORDS");
        self.peek()?;
        let bytes = self.src.as_bytes();
        let start = self.pos;
        let end = start + kw.len();
        let Some(word) = bytes.get(start..end) else {
            return Ok(None);
        };
        // Clearing bit 5 maps exactly a letter's two cases onto the upper one.
        let (mut folded, mut exact) = (0u8, 0u8);
        for (&c, k) in word.iter().zip(kw.bytes()) {
            folded |= (c & !0x20) ^ k;
            exact |= c ^ k;
        }
        if folded != 0 || scan::is_ident_byte(scan::at(bytes, end)) {
            return Ok(None);
        }
        Ok(Some(Keyword {
            start,
            end,
            upper: exact == 0,
        }))
    }

    /// The keyword `kw` if it is the next token; moves past it.
    #[inline(always)]
    pub(super) fn keyword(&mut self, kw: &str) -> FResult<Option<Keyword>> {
        let found = self.peek_keyword(kw)?;
        if let Some(k) = found {
            self.pos = k.end;
        }
        Ok(found)
    }

    /// The next token if it is a word (identifier, keyword, constant word, UUID or duration
    /// starting with a letter), without moving.
    #[inline(always)]
    pub(super) fn peek_word(&mut self) -> FResult<Option<Span>> {
        if !self.peek()?.is_ascii_alphabetic() {
            return Ok(None);
        }
        let start = self.pos;
        let (kind, end) = scan::word(self.src.as_bytes(), start).map_err(|_| GiveUp)?;
        Ok(Some(Span { kind, start, end }))
    }

    /// The next token if it is a name: an identifier other than `null`, or a quoted
    /// identifier; without moving.
    #[inline(always)]
    pub(super) fn peek_name(&mut self) -> FResult<Option<Span>> {
        let bytes = self.src.as_bytes();
        match self.peek()? {
            b'"' => {
                let start = self.pos;
                let end = scan::scan_doubled(bytes, start, b'"').ok_or(GiveUp)?;
                Ok(Some(Span {
                    kind: TokenKind::QuotedIdent,
                    start,
                    end,
                }))
            }
            b if b.is_ascii_alphabetic() => {
                let start = self.pos;
                let (kind, end) = scan::word(bytes, start).map_err(|_| GiveUp)?;
                let null = self.is(Span { kind, start, end }, "NULL");
                Ok((kind == TokenKind::Ident && !null).then_some(Span { kind, start, end }))
            }
            _ => Ok(None),
        }
    }

    /// The next token, whatever it is; moves past it. `None` at the end.
    #[inline(always)]
    pub(super) fn token(&mut self) -> FResult<Option<Span>> {
        self.peek()?;
        self.token_here()
    }

    /// [`Self::token`] right after [`Self::peek`] (the position is at the token).
    #[inline(always)]
    pub(super) fn token_here(&mut self) -> FResult<Option<Span>> {
        if self.pos >= self.src.len() {
            return Ok(None);
        }
        let start = self.pos;
        let (kind, end) = scan::token(self.src, start).map_err(|_| GiveUp)?;
        self.pos = end;
        Ok(Some(Span { kind, start, end }))
    }

    /// True if the next token continues a term as arithmetic (`+ - * / %`).
    #[inline(always)]
    pub(super) fn operator_follows(&mut self) -> FResult<bool> {
        Ok(match self.peek()? {
            // `/` is not a comment here: `peek` skipped comments.
            b'*' | b'%' | b'/' => true,
            b'+' => scan::at(self.src.as_bytes(), self.pos + 1) != b'=',
            // `-1`, `-NaN`, `-=` are other tokens.
            b'-' => scan::token(self.src, self.pos).map_err(|_| GiveUp)?.0 == TokenKind::Minus,
            _ => false,
        })
    }

    /// True if the token `t` is the unquoted word `kw` (upper case) in any case.
    #[inline(always)]
    pub(super) fn is(&self, t: Span, kw: &str) -> bool {
        t.kind == TokenKind::Ident
            && t.end - t.start == kw.len()
            && self.src.as_bytes().get(t.start..t.end).is_some_and(|w| {
                w.iter()
                    .zip(kw.bytes())
                    .fold(0u8, |acc, (&c, k)| acc | ((c & !0x20) ^ k))
                    == 0
            })
    }

    /// The text of `start..end`.
    #[inline(always)]
    pub(super) fn text(&self, start: usize, end: usize) -> &'a str {
        self.src.get(start..end).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cql::lexer::tokenize;

    #[test]
    fn keywords_lex_as_identifiers_in_any_case() {
        for kw in KEYWORDS {
            for spelling in [kw.to_string(), kw.to_lowercase()] {
                let toks = tokenize(&spelling).unwrap();
                assert_eq!(toks.len(), 1, "{spelling}");
                assert_eq!(toks[0].kind, TokenKind::Ident, "{spelling}");
                assert!(kw.bytes().all(|b| b.is_ascii_uppercase()), "{kw}");
            }
        }
    }

    #[test]
    fn shortcuts_agree_with_the_lexer() {
        let mut c = Cursor::new(" select/*x*/ -- y\n a.b ..");
        let k = c.keyword("SELECT").unwrap().unwrap();
        assert_eq!((k.start, k.end, k.upper), (1, 7, false));
        assert!(c.keyword("FROM").unwrap().is_none());
        assert_eq!(c.peek_name().unwrap().map(|s| s.start), Some(19));
        c.set_pos(20);
        assert_eq!(c.dot().unwrap(), Some(20));
        c.set_pos(22);
        assert_eq!(c.dot().unwrap(), None);
        assert!(Cursor::new("selected").keyword("SELECT").unwrap().is_none());
        assert!(Cursor::new("null").peek_name().unwrap().is_none());
        assert!(Cursor::new("true").peek_name().unwrap().is_none());
        assert!(Cursor::new("- 1").operator_follows().unwrap());
        assert!(!Cursor::new("-1").operator_follows().unwrap());
        assert!(!Cursor::new("+= 1").operator_follows().unwrap());
        assert!(!Cursor::new("-- c\n,").operator_follows().unwrap());
        assert!(Cursor::new("/* c */ / 2").operator_follows().unwrap());
    }
}
