//! The CQL lexer: CQL text to tokens, following Cassandra's `Lexer.g` (see
//! `shared/docs/cql-facts.md` section 1).
//!
//! The lexer is total: every input gives either a sequence of tokens or a [`LexError`] with the
//! byte offset where lexing stopped, never a panic. Whitespace and comments are skipped; every
//! other byte of the input belongs to exactly one token, and a token's `text` is the exact slice
//! of the input it came from (strings keep their quotes, numbers their sign).
//!
//! Where Cassandra's lexer would produce something the parser can only reject (a number glued to
//! letters such as `12abc`, a line comment with no line end, a stray `$`), the lexer reports an
//! error instead of guessing: the caller then passes the statement through untouched and the
//! server reports its own error.
//!
//! Keywords are not distinguished from identifiers here: every unquoted word is a
//! [`TokenKind::Ident`] and [`Token::is_keyword`] compares case-insensitively. The exceptions are
//! the words that are constants (`true`, `false`, `NaN`, `Infinity`), which have their own kinds.
//! A named bind marker `:name` is two tokens, [`TokenKind::Colon`] and the name, because the
//! grammar allows whitespace between them and the same colon separates map entries.

use thiserror::Error;

/// One token: its kind, its exact text in the input, and the byte offset where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// What the token is.
    pub kind: TokenKind,
    /// The token's text, exactly as written (quotes, signs and case included).
    pub text: &'a str,
    /// Byte offset of the token in the input.
    pub offset: usize,
}

impl Token<'_> {
    /// True if the token is the unquoted word `kw` in any case (`kw` is given in upper case,
    /// ASCII).
    #[inline]
    pub fn is_keyword(&self, kw: &str) -> bool {
        self.kind == TokenKind::Ident && keyword_eq(self.text, kw)
    }

    /// Byte offset just past the token.
    #[inline]
    pub fn end(&self) -> usize {
        self.offset + self.text.len()
    }
}

/// A token without its text: its kind and where it lies in the input (what
/// [`Lexer::next_span`] gives, for callers that need the text of few tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// What the token is.
    pub kind: TokenKind,
    /// Byte offset of the token in the input.
    pub start: usize,
    /// Byte offset just past the token.
    pub end: usize,
}

/// `word == kw` ignoring ASCII case, for a keyword `kw` made of upper-case ASCII letters (and
/// `_`, which no word can confuse): clearing bit 5 maps exactly a letter's two cases onto the
/// upper one, so one AND per byte replaces two case conversions.
#[inline]
pub fn keyword_eq(word: &str, kw: &str) -> bool {
    debug_assert!(kw.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'));
    word.len() == kw.len()
        && word
            .bytes()
            .zip(kw.bytes())
            .fold(0u8, |acc, (w, k)| acc | ((w & !0x20) ^ k))
            == 0
}

/// The kinds of CQL tokens.
// 8 bytes wide so that `Token` has no padding: copies of a padded token went through
// partial stack stores and cost a store-forwarding stall per token (about a third of the
// lexing time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum TokenKind {
    /// An unquoted identifier or keyword: `LETTER (LETTER | DIGIT | _)*`.
    Ident,
    /// A quoted identifier `"..."` (with `""` for a quote), including the empty name `""`.
    QuotedIdent,
    /// A string constant: `'...'` with `''` for a quote, or `$$...$$`.
    String,
    /// An integer constant with its adjacent minus: `-?DIGIT+`.
    Integer,
    /// A floating-point constant: `1.`, `1.5`, `1e5`, `-1.5E-3`.
    Float,
    /// `true` or `false`, any case.
    Boolean,
    /// `NaN` or `-NaN`, any case.
    NaN,
    /// `Infinity` or `-Infinity`, any case.
    Infinity,
    /// An unquoted UUID `8-4-4-4-12` hex digits.
    Uuid,
    /// A blob constant: `0x` or `0X` followed by hex digits (possibly none).
    Hex,
    /// A duration constant, unit form (`1h30m`, `-2d`) or ISO 8601 form (`P1Y2M`, `PT1H`,
    /// `P2W`, `P0001-02-03T04:05:06`).
    Duration,
    /// `?`
    QMark,
    /// `:`
    Colon,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `;`
    Semicolon,
    /// `.`
    Dot,
    /// `..`
    Range,
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `/`
    Slash,
    /// `%`
    Percent,
    /// `+=`
    PlusEq,
    /// `-=`
    MinusEq,
}

impl TokenKind {
    /// True for the kinds that are constants in the grammar (`constant` in `Parser.g`).
    /// `null` is an [`TokenKind::Ident`] and is not included.
    #[inline]
    pub fn is_constant(self) -> bool {
        matches!(
            self,
            TokenKind::String
                | TokenKind::Integer
                | TokenKind::Float
                | TokenKind::Boolean
                | TokenKind::NaN
                | TokenKind::Infinity
                | TokenKind::Uuid
                | TokenKind::Hex
                | TokenKind::Duration
        )
    }
}

/// Why lexing stopped. Every variant carries the byte offset of the problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LexError {
    /// The input is not UTF-8; `offset` is where the first invalid sequence starts.
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// A `'...'` or `$$...$$` string has no closing delimiter.
    #[error("unterminated string starting at byte {offset}")]
    UnterminatedString {
        /// Byte offset of the opening delimiter.
        offset: usize,
    },
    /// A `"..."` identifier has no closing quote.
    #[error("unterminated quoted identifier starting at byte {offset}")]
    UnterminatedQuotedIdent {
        /// Byte offset of the opening quote.
        offset: usize,
    },
    /// A `/* */` comment has no end, or a `--` / `//` comment runs to the end of the input
    /// without a line end (Cassandra's lexer rejects that too).
    #[error("unterminated comment starting at byte {offset}")]
    UnterminatedComment {
        /// Byte offset of the comment's first character.
        offset: usize,
    },
    /// A number, UUID, blob or duration is malformed or glued to letters (`12abc`, `1e`, `0xg`).
    #[error("malformed constant at byte {offset}")]
    MalformedConstant {
        /// Byte offset of the constant's first character.
        offset: usize,
    },
    /// A character that starts no CQL token.
    #[error("unexpected character {ch:?} at byte {offset}")]
    UnexpectedChar {
        /// Byte offset of the character.
        offset: usize,
        /// The character.
        ch: char,
    },
}

impl LexError {
    /// Byte offset of the problem in the input.
    pub fn offset(&self) -> usize {
        match *self {
            LexError::InvalidUtf8 { offset }
            | LexError::UnterminatedString { offset }
            | LexError::UnterminatedQuotedIdent { offset }
            | LexError::UnterminatedComment { offset }
            | LexError::MalformedConstant { offset }
            | LexError::UnexpectedChar { offset, .. } => offset,
        }
    }
}

/// An iterator over the tokens of a CQL text. It yields `Err` at most once, then ends.
#[derive(Debug, Clone)]
pub struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

/// Checks that `input` is UTF-8 and returns a lexer over it.
pub fn from_bytes(input: &[u8]) -> Result<Lexer<'_>, LexError> {
    Lexer::from_bytes(input)
}

/// Lexes the whole of `src` into a vector of tokens.
pub fn tokenize(src: &str) -> Result<Vec<Token<'_>>, LexError> {
    let mut out = Vec::with_capacity(src.len() / 4 + 4);
    tokenize_into(src, &mut out)?;
    Ok(out)
}

/// Lexes the whole of `src`, appending the tokens to `out` (which is not cleared first).
pub fn tokenize_into<'a>(src: &'a str, out: &mut Vec<Token<'a>>) -> Result<(), LexError> {
    let mut lexer = Lexer::new(src);
    while let Some(tok) = lexer.next_token()? {
        out.push(tok);
    }
    Ok(())
}

impl<'a> Lexer<'a> {
    /// A lexer over `src`.
    pub fn new(src: &'a str) -> Self {
        Lexer { src, pos: 0 }
    }

    /// Checks that `input` is UTF-8 and returns a lexer over it.
    pub fn from_bytes(input: &'a [u8]) -> Result<Self, LexError> {
        match std::str::from_utf8(input) {
            Ok(src) => Ok(Lexer::new(src)),
            Err(e) => Err(LexError::InvalidUtf8 {
                offset: e.valid_up_to(),
            }),
        }
    }

    /// The text being lexed.
    pub fn source(&self) -> &'a str {
        self.src
    }

    /// The next token, `Ok(None)` at the end of the input. After an error the lexer is at the
    /// end of the input.
    #[inline(always)]
    pub fn next_token(&mut self) -> Result<Option<Token<'a>>, LexError> {
        let Some(span) = self.next_span()? else {
            return Ok(None);
        };
        // `get` keeps this panic-free even if a bug ever produced a non-boundary index.
        let text = self
            .src
            .get(span.start..span.end)
            .ok_or(LexError::MalformedConstant { offset: span.start })?;
        Ok(Some(Token {
            kind: span.kind,
            text,
            offset: span.start,
        }))
    }

    /// The next token as a [`Span`] (no text slice is made), `Ok(None)` at the end of the
    /// input. After an error the lexer is at the end of the input.
    #[inline(always)]
    pub fn next_span(&mut self) -> Result<Option<Span>, LexError> {
        let bytes = self.src.as_bytes();
        let lexed = scan::skip_trivia(bytes, self.pos).and_then(|start| {
            if start >= bytes.len() {
                return Ok(None);
            }
            scan::token(self.src, start).map(|(kind, end)| Some(Span { kind, start, end }))
        });
        match lexed {
            Ok(Some(span)) => {
                self.pos = span.end;
                Ok(Some(span))
            }
            Ok(None) => {
                self.pos = bytes.len();
                Ok(None)
            }
            Err(e) => {
                self.pos = bytes.len();
                Err(e)
            }
        }
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Result<Token<'a>, LexError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_token().transpose()
    }
}

impl std::iter::FusedIterator for Lexer<'_> {}

#[cfg(test)]
mod reference;
pub(crate) mod scan;
#[cfg(test)]
mod tests;
