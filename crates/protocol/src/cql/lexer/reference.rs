//! The lexer as it was before its rewrite for speed, kept as the oracle of a differential
//! property test (`tests.rs`): both must give the same tokens and errors on any input. The
//! check of ISO 8601 designator durations was not rewritten; both lexers share it.

use super::scan::is_iso_designators;
use super::{LexError, Token, TokenKind};

/// The reference lexer's state.
#[derive(Debug, Clone)]
pub(super) struct RefLexer<'a> {
    src: &'a str,
    pos: usize,
}

/// Lexes the whole of `src` with the reference lexer.
pub(super) fn tokenize(src: &str) -> Result<Vec<Token<'_>>, LexError> {
    let mut lexer = RefLexer::new(src);
    let mut out = Vec::new();
    while let Some(t) = lexer.next_token()? {
        out.push(t);
    }
    Ok(out)
}

/// Byte classes: one table load instead of a chain of range checks in the hot loops.
const IDENT: u8 = 1;
const DIGIT: u8 = 2;
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'_' {
            t[b] |= IDENT;
        }
        if c.is_ascii_digit() {
            t[b] |= DIGIT;
        }
        b += 1;
    }
    t
};

/// Tokens that are always exactly one byte, indexed by `SINGLE_CODE`.
const SINGLE: [TokenKind; 10] = [
    TokenKind::LParen,
    TokenKind::RParen,
    TokenKind::LBracket,
    TokenKind::RBracket,
    TokenKind::LBrace,
    TokenKind::RBrace,
    TokenKind::Comma,
    TokenKind::QMark,
    TokenKind::Star,
    TokenKind::Semicolon,
];

/// For each byte, its index in `SINGLE`, or `u8::MAX` (past the end) when the byte is not a
/// one-byte token on its own.
static SINGLE_CODE: [u8; 256] = {
    let mut t = [u8::MAX; 256];
    let bytes = *b"()[]{},?*;";
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = i as u8;
        i += 1;
    }
    t
};

#[inline(always)]
fn is_ident_byte(b: u8) -> bool {
    CLASS[usize::from(b)] & IDENT != 0
}

/// The UTF-8 encoding of `µ` (U+00B5), allowed in the duration unit `µs`.
const MICRO: [u8; 2] = [0xC2, 0xB5];

impl<'a> RefLexer<'a> {
    /// A lexer over `src`.
    pub fn new(src: &'a str) -> Self {
        RefLexer { src, pos: 0 }
    }

    #[inline]
    fn byte(&self, i: usize) -> u8 {
        // 0 past the end: no token class contains NUL, and loops that scan string contents
        // check the length explicitly, so a NUL in the input is never confused with the end.
        self.src.as_bytes().get(i).copied().unwrap_or(0)
    }

    /// The next token, `Ok(None)` at the end of the input. After an error the lexer is at the
    /// end of the input.
    #[inline(always)]
    pub fn next_token(&mut self) -> Result<Option<Token<'a>>, LexError> {
        let r = self.lex();
        if r.is_err() {
            self.pos = self.src.len();
        }
        r
    }

    #[inline(always)]
    fn token(&mut self, kind: TokenKind, start: usize, end: usize) -> Result<Token<'a>, LexError> {
        // `get` keeps this panic-free even if a bug ever produced a non-boundary index.
        let text = self
            .src
            .get(start..end)
            .ok_or(LexError::MalformedConstant { offset: start })?;
        self.pos = end;
        Ok(Token {
            kind,
            text,
            offset: start,
        })
    }

    fn unexpected(&self, offset: usize) -> LexError {
        let ch = self
            .src
            .get(offset..)
            .and_then(|s| s.chars().next())
            .unwrap_or('\u{FFFD}');
        LexError::UnexpectedChar { offset, ch }
    }

    #[inline(always)]
    fn lex(&mut self) -> Result<Option<Token<'a>>, LexError> {
        let len = self.src.len();
        loop {
            // Most tokens are preceded by exactly one space: skip it before the dispatch.
            while self.byte(self.pos) == b' ' {
                self.pos += 1;
            }
            if self.pos >= len {
                return Ok(None);
            }
            let start = self.pos;
            let b = self.byte(start);
            // The two most frequent cases first, with plain branches: an indirect jump through
            // the `match` table mispredicts on almost every token.
            if b.is_ascii_alphabetic() {
                return self.word(start).map(Some);
            }
            if let Some(&kind) = SINGLE.get(usize::from(SINGLE_CODE[usize::from(b)])) {
                return self.token(kind, start, start + 1).map(Some);
            }
            let kind = match b {
                b' ' | b'\t' | b'\r' | b'\n' => {
                    self.pos += 1;
                    continue;
                }
                b'-' => {
                    let n = self.byte(start + 1);
                    if n == b'-' {
                        self.line_comment(start)?;
                        continue;
                    }
                    if n.is_ascii_digit() {
                        return self.number(start, start + 1).map(Some);
                    }
                    if n == b'=' {
                        return self.token(TokenKind::MinusEq, start, start + 2).map(Some);
                    }
                    if n.is_ascii_alphabetic() {
                        if let Some(t) = self.negative_word(start)? {
                            return Ok(Some(t));
                        }
                    }
                    TokenKind::Minus
                }
                b'/' => match self.byte(start + 1) {
                    b'/' => {
                        self.line_comment(start)?;
                        continue;
                    }
                    b'*' => {
                        self.block_comment(start)?;
                        continue;
                    }
                    _ => TokenKind::Slash,
                },
                b'0'..=b'9' => return self.number(start, start).map(Some),
                b'a'..=b'z' | b'A'..=b'Z' => return self.word(start).map(Some),
                b'\'' => return self.quoted_string(start).map(Some),
                b'$' => return self.dollar_string(start).map(Some),
                b'"' => return self.quoted_ident(start).map(Some),
                b'?' => TokenKind::QMark,
                b':' => TokenKind::Colon,
                b'(' => TokenKind::LParen,
                b')' => TokenKind::RParen,
                b'[' => TokenKind::LBracket,
                b']' => TokenKind::RBracket,
                b'{' => TokenKind::LBrace,
                b'}' => TokenKind::RBrace,
                b',' => TokenKind::Comma,
                b';' => TokenKind::Semicolon,
                b'*' => TokenKind::Star,
                b'%' => TokenKind::Percent,
                b'=' => TokenKind::Eq,
                b'.' => {
                    if self.byte(start + 1) == b'.' {
                        return self.token(TokenKind::Range, start, start + 2).map(Some);
                    }
                    TokenKind::Dot
                }
                b'<' | b'>' | b'!' | b'+' => {
                    let eq = self.byte(start + 1) == b'=';
                    let kind = match (b, eq) {
                        (b'<', true) => TokenKind::Le,
                        (b'<', false) => TokenKind::Lt,
                        (b'>', true) => TokenKind::Ge,
                        (b'>', false) => TokenKind::Gt,
                        (b'+', true) => TokenKind::PlusEq,
                        (b'+', false) => TokenKind::Plus,
                        (_, true) => TokenKind::Ne,
                        (_, false) => return Err(self.unexpected(start)),
                    };
                    let end = if eq { start + 2 } else { start + 1 };
                    return self.token(kind, start, end).map(Some);
                }
                _ => return Err(self.unexpected(start)),
            };
            return self.token(kind, start, start + 1).map(Some);
        }
    }

    /// `--` or `//` up to and including a CR or LF. Cassandra requires the line end.
    fn line_comment(&mut self, start: usize) -> Result<(), LexError> {
        let rest = self.src.as_bytes().get(start + 2..).unwrap_or(&[]);
        match rest.iter().position(|&c| c == b'\n' || c == b'\r') {
            Some(i) => {
                self.pos = start + 2 + i + 1;
                Ok(())
            }
            None => Err(LexError::UnterminatedComment { offset: start }),
        }
    }

    /// `/* ... */`, not nested.
    fn block_comment(&mut self, start: usize) -> Result<(), LexError> {
        let rest = self.src.as_bytes().get(start + 2..).unwrap_or(&[]);
        match rest.windows(2).position(|w| w == b"*/") {
            Some(i) => {
                self.pos = start + 2 + i + 2;
                Ok(())
            }
            None => Err(LexError::UnterminatedComment { offset: start }),
        }
    }

    /// `'...'` with `''` standing for one quote.
    #[inline(always)]
    fn quoted_string(&mut self, start: usize) -> Result<Token<'a>, LexError> {
        let end = self
            .scan_doubled(start, b'\'')
            .ok_or(LexError::UnterminatedString { offset: start })?;
        self.token(TokenKind::String, start, end)
    }

    /// `"..."` with `""` standing for one quote; `""` alone is the empty name.
    fn quoted_ident(&mut self, start: usize) -> Result<Token<'a>, LexError> {
        let end = self
            .scan_doubled(start, b'"')
            .ok_or(LexError::UnterminatedQuotedIdent { offset: start })?;
        self.token(TokenKind::QuotedIdent, start, end)
    }

    /// Offset just past the closing `q` of a `q...q` run where `qq` is an escaped `q`.
    fn scan_doubled(&self, start: usize, q: u8) -> Option<usize> {
        let bytes = self.src.as_bytes();
        let mut i = start + 1;
        loop {
            let rel = bytes.get(i..)?.iter().position(|&c| c == q)?;
            i += rel;
            if bytes.get(i + 1) == Some(&q) {
                i += 2;
            } else {
                return Some(i + 1);
            }
        }
    }

    /// `$$...$$`: the content cannot contain `$$`.
    fn dollar_string(&mut self, start: usize) -> Result<Token<'a>, LexError> {
        if self.byte(start + 1) != b'$' {
            return Err(self.unexpected(start));
        }
        let rest = self.src.as_bytes().get(start + 2..).unwrap_or(&[]);
        match rest.windows(2).position(|w| w == b"$$") {
            Some(i) => self.token(TokenKind::String, start, start + 2 + i + 2),
            None => Err(LexError::UnterminatedString { offset: start }),
        }
    }

    /// End of the run of identifier bytes starting at `i`.
    #[inline(always)]
    fn ident_end(&self, i: usize) -> usize {
        self.run_end(i, IDENT)
    }

    /// End of the run of bytes of class `class` starting at `i`.
    #[inline(always)]
    fn run_end(&self, i: usize, class: u8) -> usize {
        let rest = self.src.as_bytes().get(i..).unwrap_or(&[]);
        i + rest
            .iter()
            .position(|&b| CLASS[usize::from(b)] & class == 0)
            .unwrap_or(rest.len())
    }

    /// A word starting with a letter: a UUID, an ISO duration, a constant word or an identifier.
    #[inline(always)]
    fn word(&mut self, start: usize) -> Result<Token<'a>, LexError> {
        if let Some(t) = self.try_uuid(start)? {
            return Ok(t);
        }
        if self.byte(start) == b'P' {
            if let Some(end) = self.iso_duration(start) {
                return self.token(TokenKind::Duration, start, end);
            }
        }
        let end = self.ident_end(start);
        let text = self.src.get(start..end).unwrap_or("");
        self.pos = end;
        Ok(Token {
            kind: constant_word(text),
            text,
            offset: start,
        })
    }

    /// After a `-` followed by a letter: `-NaN`, `-Infinity` or a negative ISO duration.
    /// `None` means the minus is an operator on its own.
    fn negative_word(&mut self, start: usize) -> Result<Option<Token<'a>>, LexError> {
        if self.byte(start + 1) == b'P' {
            if let Some(end) = self.iso_duration(start + 1) {
                return self.token(TokenKind::Duration, start, end).map(Some);
            }
        }
        let end = self.ident_end(start + 1);
        let word = self.src.get(start + 1..end).unwrap_or("");
        let kind = if word.eq_ignore_ascii_case("nan") {
            TokenKind::NaN
        } else if word.eq_ignore_ascii_case("infinity") {
            TokenKind::Infinity
        } else {
            return Ok(None);
        };
        self.token(kind, start, end).map(Some)
    }

    /// An unquoted UUID at `start`, if the 36 bytes there have the 8-4-4-4-12 hex shape.
    #[inline(always)]
    fn try_uuid(&mut self, start: usize) -> Result<Option<Token<'a>>, LexError> {
        // Cheap pre-check before the full shape test: the first dash.
        if self.byte(start + 8) != b'-' {
            return Ok(None);
        }
        let Some(b) = self.src.as_bytes().get(start..start + 36) else {
            return Ok(None);
        };
        let shape_ok = b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
        if !shape_ok {
            return Ok(None);
        }
        if is_ident_byte(self.byte(start + 36)) {
            return Err(LexError::MalformedConstant { offset: start });
        }
        self.token(TokenKind::Uuid, start, start + 36).map(Some)
    }

    /// End of an ISO 8601 duration starting with the `P` at `p`, if there is one there and it is
    /// not followed by more identifier bytes (then the whole word is an identifier).
    fn iso_duration(&self, p: usize) -> Option<usize> {
        let bytes = self.src.as_bytes();
        // Alternative format P0001-02-03T04:05:06.
        if let Some(alt) = bytes.get(p..p + 20) {
            const SHAPE: &[u8; 20] = b"P0000-00-00T00:00:00";
            let ok = alt.iter().zip(SHAPE.iter()).all(|(&c, &s)| {
                if s == b'0' {
                    c.is_ascii_digit()
                } else {
                    c == s
                }
            });
            if ok && !is_ident_byte(self.byte(p + 20)) {
                return Some(p + 20);
            }
        }
        let end = self.ident_end(p);
        let word = bytes.get(p..end)?;
        if is_iso_designators(word) {
            Some(end)
        } else {
            None
        }
    }

    /// A constant starting with a digit at `digits` (`start` is `digits - 1` when a minus
    /// precedes): UUID, blob, integer, float or unit-form duration.
    #[inline(always)]
    fn number(&mut self, start: usize, digits: usize) -> Result<Token<'a>, LexError> {
        if start == digits {
            if let Some(t) = self.try_uuid(start)? {
                return Ok(t);
            }
            if self.byte(start) == b'0' && matches!(self.byte(start + 1), b'x' | b'X') {
                let mut i = start + 2;
                while self.byte(i).is_ascii_hexdigit() {
                    i += 1;
                }
                if is_ident_byte(self.byte(i)) {
                    return Err(LexError::MalformedConstant { offset: start });
                }
                return self.token(TokenKind::Hex, start, i);
            }
        }
        let mut i = self.run_end(digits, DIGIT);
        let malformed = LexError::MalformedConstant { offset: start };
        match self.byte(i) {
            b'.' => {
                if self.byte(i + 1) == b'.' {
                    // `1..2` is INTEGER RANGE INTEGER, but `1...` is FLOAT(`1.`) RANGE.
                    if self.byte(i + 2) == b'.' {
                        return self.token(TokenKind::Float, start, i + 1);
                    }
                    return self.token(TokenKind::Integer, start, i);
                }
                i = self.run_end(i + 1, DIGIT);
                if matches!(self.byte(i), b'e' | b'E') {
                    i = self.exponent(i).ok_or(malformed)?;
                }
                if is_ident_byte(self.byte(i)) {
                    return Err(malformed);
                }
                self.token(TokenKind::Float, start, i)
            }
            b'e' | b'E' => {
                i = self.exponent(i).ok_or(malformed)?;
                if is_ident_byte(self.byte(i)) {
                    return Err(malformed);
                }
                self.token(TokenKind::Float, start, i)
            }
            c if c.is_ascii_alphabetic() || c == MICRO[0] => {
                let end = self.duration_units(i).ok_or(malformed)?;
                self.token(TokenKind::Duration, start, end)
            }
            b'_' => Err(malformed),
            _ => self.token(TokenKind::Integer, start, i),
        }
    }

    /// `e`/`E`, an optional sign and digits at `i`; the offset past them.
    fn exponent(&self, i: usize) -> Option<usize> {
        let mut j = i + 1;
        if matches!(self.byte(j), b'+' | b'-') {
            j += 1;
        }
        let first = j;
        while self.byte(j).is_ascii_digit() {
            j += 1;
        }
        (j > first).then_some(j)
    }

    /// The unit-form duration tail at `i` (just after the first digits): `UNIT (DIGIT+ UNIT)*`.
    fn duration_units(&self, mut i: usize) -> Option<usize> {
        loop {
            i += self.unit_len(i)?;
            let c = self.byte(i);
            if c.is_ascii_digit() {
                while self.byte(i).is_ascii_digit() {
                    i += 1;
                }
                continue;
            }
            if is_ident_byte(c) || c == MICRO[0] {
                return None;
            }
            return Some(i);
        }
    }

    /// Length in bytes of the duration unit at `i`, longest match first.
    fn unit_len(&self, i: usize) -> Option<usize> {
        let a = self.byte(i).to_ascii_lowercase();
        let b = self.byte(i + 1).to_ascii_lowercase();
        match (a, b) {
            (b'm', b'o') | (b'm', b's') | (b'u', b's') | (b'n', b's') => Some(2),
            (0xC2, 0xB5) if self.byte(i + 2).eq_ignore_ascii_case(&b's') => Some(3),
            (b'y' | b'w' | b'd' | b'h' | b'm' | b's', _) => Some(1),
            _ => None,
        }
    }
}

/// The kind of an unquoted word: the constants `true`, `false`, `NaN`, `Infinity` (any case)
/// have their own kinds, every other word is an identifier.
#[inline(always)]
fn constant_word(w: &str) -> TokenKind {
    // Dispatch on the length and first letter before comparing whole words.
    let first = w.as_bytes().first().map_or(0, |b| b.to_ascii_lowercase());
    match (w.len(), first) {
        (4, b't') if w.eq_ignore_ascii_case("true") => TokenKind::Boolean,
        (5, b'f') if w.eq_ignore_ascii_case("false") => TokenKind::Boolean,
        (3, b'n') if w.eq_ignore_ascii_case("nan") => TokenKind::NaN,
        (8, b'i') if w.eq_ignore_ascii_case("infinity") => TokenKind::Infinity,
        _ => TokenKind::Ident,
    }
}
