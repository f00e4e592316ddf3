//! The full parser behind [`super::normalize`], for every statement the single pass
//! ([`super::fast`]) leaves to it: it walks the tokens of one DML statement following
//! Cassandra's `Parser.g` closely enough to know, for each literal, whether it sits in a
//! `value` position where a marker is equivalent, and writes the canonical text as it goes.
//!
//! Two scans do not emit: [`Parser::scan_term`] finds where a term ends and whether it is a
//! plain value (constant, collection, tuple, UDT, marker, `null`) or anything more complex,
//! and [`Parser::literal_at`] builds the [`Literal`] for a value made only of literals. The
//! emitting functions then decide between one `?`, element-wise replacement and inline text.

use std::cell::Cell;

use super::canonical::{space_before, Piece};
use super::constant::{constant_literal, string_value};
use super::{NormalizeError, Normalized, NotCandidate, Shape, Slot, StatementKind};
use crate::cql::lexer::{keyword_eq, Lexer, Token, TokenKind};
use crate::cql::Literal;

/// Nesting limit for brackets and terms: deeper input is left alone rather than risking the
/// stack.
const MAX_DEPTH: u32 = 48;

/// Reserved words that may follow a complete term (so they are never a function name).
const FOLLOWS_TERM: &[&str] = &[
    "AND", "IF", "WHERE", "USING", "LIMIT", "ORDER", "GROUP", "PER", "ALLOW", "APPLY", "INSERT",
    "UPDATE", "DELETE", "BEGIN", "FROM", "SET", "BYPASS",
];

/// Tokens kept on the stack before spilling to the heap.
const INLINE_TOKENS: usize = 64;

const EMPTY_TOKEN: Token<'static> = Token {
    kind: TokenKind::Semicolon,
    text: "",
    offset: 0,
};

/// Where and why the parser gave up.
#[derive(Debug, Clone, Copy)]
struct BailInfo {
    offset: usize,
    reason: &'static str,
}

/// The parser gave up; the details are in [`Parser::bailed`]. Zero-sized so that every
/// `PResult<()>` travels in a register.
#[derive(Debug, Clone, Copy)]
struct Bail;

type PResult<T> = Result<T, Bail>;

/// What a term is, for the replacement decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A `value`: constant, `null`, marker, collection / tuple / UDT literal.
    Value,
    /// A function call, cast, arithmetic or negation: kept inline.
    Complex,
}

/// Normalizes `src`, writing the shape into `out` and `slots` (both cleared first).
pub(super) fn normalize<'a>(
    src: &'a str,
    mut out: String,
    mut slots: Vec<Slot<'a>>,
) -> Result<Normalized<'a>, NormalizeError> {
    // Short statements (nearly all of them) keep their tokens on the stack: the heap vector
    // is used only past `INLINE_TOKENS`, which saves an allocation per request.
    let mut inline = [EMPTY_TOKEN; INLINE_TOKENS];
    let mut heap: Vec<Token<'_>> = Vec::new();
    let mut count = 0usize;
    // While lexing: an upper bound on the markers (so the slot vector never grows) and the
    // `expr(` check.
    let mut marker_bound = 0usize;
    let mut expr_at = None;
    let mut lexer = Lexer::new(src);
    while let Some(t) = lexer.next_token()? {
        match t.kind {
            TokenKind::QMark | TokenKind::Colon => marker_bound += 1,
            TokenKind::Ident if t.text.len() == 4 => {
                if keyword_eq(t.text, "NULL") {
                    marker_bound += 1;
                } else if keyword_eq(t.text, "EXPR") {
                    expr_at = Some(count);
                }
            }
            TokenKind::LParen if expr_at.is_some_and(|i| i + 1 == count) => {
                // Cassandra's grammar has a literal token `expr(` (custom index expressions):
                // canonical spacing could glue or split it, so leave those statements alone.
                let first = inline.first().filter(|_| count > 0);
                let kind = StatementKind::of_first_token(first);
                return Ok(unsupported(kind, t.offset, "custom index expression"));
            }
            k if k.is_constant() => marker_bound += 1,
            _ => {}
        }
        if let Some(slot) = inline.get_mut(count) {
            *slot = t;
        } else {
            if heap.is_empty() {
                heap.reserve(src.len() / 4);
                heap.extend_from_slice(&inline);
            }
            heap.push(t);
        }
        count += 1;
    }
    let toks: &[Token<'_>] = if count <= INLINE_TOKENS {
        inline.get(..count).unwrap_or(&[])
    } else {
        &heap
    };

    // `statement ';'*`: trailing semicolons are not part of the statement.
    let mut end = toks.len();
    while end > 0 && toks.get(end - 1).map(|t| t.kind) == Some(TokenKind::Semicolon) {
        end -= 1;
    }
    let toks = toks.get(..end).unwrap_or(&[]);

    let kind = StatementKind::of_first_token(toks.first());
    match kind {
        StatementKind::Other => return Ok(Normalized::NotCandidate(NotCandidate::NotDml)),
        StatementKind::Use => return Ok(Normalized::NotCandidate(use_statement(src, toks))),
        _ => {}
    }

    let mut p = Parser {
        toks,
        src_len: src.len(),
        pos: 0,
        out: {
            out.clear();
            out.reserve(src.len() + 16);
            out
        },
        slots: {
            slots.clear();
            slots.reserve(marker_bound);
            slots
        },
        positional: 0,
        literals: 0,
        last: None,
        bailed: Cell::new(None),
    };
    let parsed = match kind {
        StatementKind::Select => p.select(),
        StatementKind::Insert => p.insert(),
        StatementKind::Update => p.update(),
        StatementKind::Delete => p.delete(),
        _ => p.batch(),
    };
    if parsed.and_then(|()| p.finish()).is_err() {
        let b = p.bailed.get().unwrap_or(BailInfo {
            offset: 0,
            reason: "unsupported",
        });
        return Ok(unsupported(kind, b.offset, b.reason));
    }
    if p.literals == 0 {
        return Ok(Normalized::NotCandidate(NotCandidate::NoLiterals { kind }));
    }
    Ok(Normalized::Shape(Shape {
        kind,
        text: p.out,
        slots: p.slots,
    }))
}

fn unsupported(kind: StatementKind, offset: usize, reason: &'static str) -> Normalized<'static> {
    Normalized::NotCandidate(NotCandidate::Unsupported {
        kind,
        offset,
        reason,
    })
}

/// `USE ks`: the keyspace as the server resolves it.
fn use_statement(src: &str, toks: &[Token<'_>]) -> NotCandidate {
    match toks {
        [_, name] if matches!(name.kind, TokenKind::Ident | TokenKind::QuotedIdent) => {
            NotCandidate::Use {
                keyspace: super::resolve_identifier(name.text).into_owned(),
            }
        }
        _ => NotCandidate::Unsupported {
            kind: StatementKind::Use,
            offset: toks.get(1).map_or(src.len(), |t| t.offset),
            reason: "malformed USE",
        },
    }
}

/// A comparison operator of a relation (`=`, `!=`, `<`, `<=`, `>`, `>=`).
#[inline]
pub(super) fn is_relop(k: TokenKind) -> bool {
    matches!(
        k,
        TokenKind::Eq
            | TokenKind::Ne
            | TokenKind::Lt
            | TokenKind::Le
            | TokenKind::Gt
            | TokenKind::Ge
    )
}

struct Parser<'t, 'a> {
    toks: &'t [Token<'a>],
    src_len: usize,
    pos: usize,
    out: String,
    slots: Vec<Slot<'a>>,
    /// The client's positional markers seen so far.
    positional: u32,
    /// Literal slots so far.
    literals: u32,
    last: Option<Piece>,
    bailed: Cell<Option<BailInfo>>,
}

impl<'t, 'a> Parser<'t, 'a> {
    // ---- token access -------------------------------------------------------------------

    #[inline]
    fn tok(&self, i: usize) -> Option<&'t Token<'a>> {
        self.toks.get(i)
    }

    #[inline]
    fn kind(&self, i: usize) -> Option<TokenKind> {
        self.toks.get(i).map(|t| t.kind)
    }

    #[inline]
    fn kw_at(&self, i: usize, kw: &str) -> bool {
        self.toks.get(i).is_some_and(|t| t.is_keyword(kw))
    }

    #[inline]
    fn at_kw(&self, kw: &str) -> bool {
        self.kw_at(self.pos, kw)
    }

    /// A token that can be a column, table, field or function name. `null` is excluded so that
    /// it is always read as the constant.
    #[inline]
    fn is_name(&self, i: usize) -> bool {
        self.toks.get(i).is_some_and(|t| match t.kind {
            TokenKind::QuotedIdent => true,
            TokenKind::Ident => !keyword_eq(t.text, "NULL"),
            _ => false,
        })
    }

    #[inline]
    fn is_null(&self, i: usize) -> bool {
        self.kw_at(i, "NULL")
    }

    #[cold]
    fn bail_at(&self, i: usize, reason: &'static str) -> Bail {
        // The first reason wins: outer callers may bail again on the way out.
        if self.bailed.get().is_none() {
            self.bailed.set(Some(BailInfo {
                offset: self.toks.get(i).map_or(self.src_len, |t| t.offset),
                reason,
            }));
        }
        Bail
    }

    fn bail(&self, reason: &'static str) -> Bail {
        self.bail_at(self.pos, reason)
    }

    fn finish(&self) -> PResult<()> {
        if self.pos < self.toks.len() {
            return Err(self.bail("unexpected token"));
        }
        if self.slots.len() > usize::from(u16::MAX) {
            return Err(self.bail("too many markers"));
        }
        Ok(())
    }

    // ---- canonical text -------------------------------------------------------------------

    #[inline]
    fn put(&mut self, text: &str, piece: Piece) {
        if space_before(
            self.last,
            piece,
            text.as_bytes().first().copied().unwrap_or(0),
        ) {
            self.out.push(' ');
        }
        // Punctuation is one ASCII byte: push it rather than call memcpy.
        match text.as_bytes() {
            [b] if b.is_ascii() => self.out.push(char::from(*b)),
            _ => self.out.push_str(text),
        }
        self.last = Some(piece);
    }

    /// Writes the keyword at `pos` in its canonical upper-case spelling and moves past it.
    fn kw(&mut self, canonical: &'static str) {
        self.put(canonical, Piece::Word);
        self.pos += 1;
    }

    fn expect_kw(&mut self, canonical: &'static str) -> PResult<()> {
        if self.at_kw(canonical) {
            self.kw(canonical);
            Ok(())
        } else {
            Err(self.bail("expected a keyword"))
        }
    }

    fn punct_piece(kind: TokenKind) -> Piece {
        match kind {
            TokenKind::LParen | TokenKind::LBracket | TokenKind::LBrace => Piece::Open,
            TokenKind::RParen | TokenKind::RBracket | TokenKind::RBrace => Piece::Close,
            TokenKind::Comma => Piece::Comma,
            TokenKind::Semicolon => Piece::Semi,
            TokenKind::Dot => Piece::Dot,
            _ => Piece::Word,
        }
    }

    /// Writes the token at `pos` if it has kind `kind`, and moves past it.
    fn expect(&mut self, kind: TokenKind) -> PResult<()> {
        match self.tok(self.pos) {
            Some(t) if t.kind == kind => {
                self.put(t.text, Self::punct_piece(kind));
                self.pos += 1;
                Ok(())
            }
            _ => Err(self.bail("unexpected token")),
        }
    }

    /// Writes the token at `pos` verbatim as `piece` and moves past it.
    fn copy(&mut self, piece: Piece) -> PResult<()> {
        let t = self
            .tok(self.pos)
            .ok_or_else(|| self.bail("unexpected end"))?;
        self.put(t.text, piece);
        self.pos += 1;
        Ok(())
    }

    fn name(&mut self) -> PResult<()> {
        if !self.is_name(self.pos) {
            return Err(self.bail("expected a name"));
        }
        self.copy(Piece::Name)
    }

    /// `[ks '.'] name`
    fn table_name(&mut self) -> PResult<()> {
        self.name()?;
        if self.kind(self.pos) == Some(TokenKind::Dot) {
            self.expect(TokenKind::Dot)?;
            self.name()?;
        }
        Ok(())
    }

    // ---- slots ----------------------------------------------------------------------------

    fn literal_slot(&mut self, lit: Literal<'a>) {
        self.put("?", Piece::Word);
        self.slots.push(Slot::Literal(lit));
        self.literals += 1;
    }

    fn positional_slot(&mut self, at: usize) -> PResult<()> {
        let index =
            u16::try_from(self.positional).map_err(|_| self.bail_at(at, "too many markers"))?;
        self.positional += 1;
        self.put("?", Piece::Word);
        self.slots.push(Slot::ClientMarker { index });
        Ok(())
    }

    fn named_slot(&mut self, name: &'a str) {
        self.put(":", Piece::MarkerColon);
        self.put(name, Piece::Word);
        self.slots.push(Slot::ClientNamed { name });
    }

    /// A client marker at `pos` (`?` or `: name`), if there is one; moves past it.
    fn client_marker(&mut self) -> PResult<bool> {
        match self.kind(self.pos) {
            Some(TokenKind::QMark) => {
                self.positional_slot(self.pos)?;
                self.pos += 1;
                Ok(true)
            }
            Some(TokenKind::Colon) if self.is_name(self.pos + 1) => {
                let name = self.tok(self.pos + 1).map_or("", |t| t.text);
                self.named_slot(name);
                self.pos += 2;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    // ---- statements -----------------------------------------------------------------------

    /// `SELECT selectors FROM table [WHERE ...] [GROUP BY ...] [ORDER BY ...]
    /// [PER PARTITION LIMIT n] [LIMIT n] [ALLOW FILTERING] [BYPASS CACHE] [USING TIMEOUT t]`
    fn select(&mut self) -> PResult<()> {
        self.kw("SELECT");
        let start = self.pos;
        let from = self.find_at_depth0(start, &["FROM"])?;
        if from == start {
            return Err(self.bail("empty selection"));
        }
        // The selection clause stays as written (its client markers are still slots).
        self.inline(start, from)?;
        self.kw("FROM");
        self.table_name()?;
        loop {
            if self.at_kw("WHERE") {
                self.kw("WHERE");
                self.where_clause()?;
            } else if self.at_kw("GROUP") && self.kw_at(self.pos + 1, "BY") {
                self.kw("GROUP");
                self.kw("BY");
                let start = self.pos;
                let end = self.find_at_depth0(
                    start,
                    &["ORDER", "PER", "LIMIT", "ALLOW", "BYPASS", "USING"],
                )?;
                self.inline(start, end)?;
            } else if self.at_kw("ORDER") && self.kw_at(self.pos + 1, "BY") {
                self.kw("ORDER");
                self.kw("BY");
                self.order_by()?;
            } else if self.at_kw("PER") {
                self.kw("PER");
                self.expect_kw("PARTITION")?;
                self.expect_kw("LIMIT")?;
                self.int_value()?;
            } else if self.at_kw("LIMIT") {
                self.kw("LIMIT");
                self.int_value()?;
            } else if self.at_kw("ALLOW") {
                self.kw("ALLOW");
                self.expect_kw("FILTERING")?;
            } else if self.at_kw("BYPASS") {
                self.kw("BYPASS");
                self.expect_kw("CACHE")?;
            } else if self.at_kw("USING") {
                self.using()?;
            } else {
                return Ok(());
            }
        }
    }

    /// Index of the first of `kws` at bracket depth 0 from `start`, or the end of the tokens
    /// when `kws` are clause keywords that may be absent (anything but `FROM`).
    fn find_at_depth0(&self, start: usize, kws: &[&str]) -> PResult<usize> {
        let mut depth = 0u32;
        let mut i = start;
        while let Some(t) = self.tok(i) {
            match t.kind {
                TokenKind::LParen | TokenKind::LBracket | TokenKind::LBrace => depth += 1,
                TokenKind::RParen | TokenKind::RBracket | TokenKind::RBrace => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| self.bail_at(i, "unbalanced brackets"))?;
                }
                TokenKind::Semicolon => return Err(self.bail_at(i, "unexpected semicolon")),
                TokenKind::Ident if depth == 0 && kws.iter().any(|k| t.is_keyword(k)) => {
                    return Ok(i)
                }
                _ => {}
            }
            i += 1;
        }
        if depth != 0 {
            return Err(self.bail_at(i, "unbalanced brackets"));
        }
        if kws.first() == Some(&"FROM") {
            return Err(self.bail_at(i, "no FROM"));
        }
        Ok(i)
    }

    /// `ORDER BY c [ANN OF term] [ASC | DESC] (, ...)*`
    fn order_by(&mut self) -> PResult<()> {
        loop {
            self.name()?;
            if self.at_kw("ANN") && self.kw_at(self.pos + 1, "OF") {
                self.kw("ANN");
                self.kw("OF");
                self.value_term(false, 0)?;
            }
            if self.at_kw("ASC") {
                self.kw("ASC");
            } else if self.at_kw("DESC") {
                self.kw("DESC");
            }
            if self.kind(self.pos) != Some(TokenKind::Comma) {
                return Ok(());
            }
            self.expect(TokenKind::Comma)?;
        }
    }

    /// `INSERT INTO table ( '(' cols ')' VALUES '(' terms ')' | JSON value [DEFAULT NULL|UNSET] )
    /// [IF NOT EXISTS] [USING ...]`
    fn insert(&mut self) -> PResult<()> {
        self.kw("INSERT");
        self.expect_kw("INTO")?;
        self.table_name()?;
        if self.kind(self.pos) == Some(TokenKind::LParen) {
            self.expect(TokenKind::LParen)?;
            loop {
                self.name()?;
                if self.kind(self.pos) == Some(TokenKind::RParen) {
                    break;
                }
                self.expect(TokenKind::Comma)?;
            }
            self.expect(TokenKind::RParen)?;
            self.expect_kw("VALUES")?;
            self.expect(TokenKind::LParen)?;
            loop {
                // A whole INSERT value: a bound null writes the same tombstone as `null`.
                self.value_term(true, 0)?;
                if self.kind(self.pos) == Some(TokenKind::RParen) {
                    break;
                }
                self.expect(TokenKind::Comma)?;
            }
            self.expect(TokenKind::RParen)?;
        } else if self.at_kw("JSON") {
            self.kw("JSON");
            if !self.client_marker()? {
                match self.tok(self.pos) {
                    Some(t) if t.kind == TokenKind::String => {
                        self.literal_slot(Literal::String(string_value(t.text)));
                        self.pos += 1;
                    }
                    _ => return Err(self.bail("JSON value is not a string")),
                }
            }
            if self.at_kw("DEFAULT") {
                self.kw("DEFAULT");
                if self.at_kw("NULL") {
                    self.kw("NULL");
                } else {
                    self.expect_kw("UNSET")?;
                }
            }
        } else {
            return Err(self.bail("expected column list or JSON"));
        }
        self.modification_tail()
    }

    /// The clauses that may follow the body of INSERT, UPDATE and DELETE, in any order (the
    /// server checks the order; the shape keeps it).
    fn modification_tail(&mut self) -> PResult<()> {
        loop {
            if self.at_kw("USING") {
                self.using()?;
            } else if self.at_kw("WHERE") {
                self.kw("WHERE");
                self.where_clause()?;
            } else if self.at_kw("IF") {
                self.if_clause()?;
            } else {
                return Ok(());
            }
        }
    }

    /// `UPDATE table [USING ...] SET ops WHERE ... [IF ...]`
    fn update(&mut self) -> PResult<()> {
        self.kw("UPDATE");
        self.table_name()?;
        if self.at_kw("USING") {
            self.using()?;
        }
        self.expect_kw("SET")?;
        loop {
            self.set_op()?;
            if self.kind(self.pos) != Some(TokenKind::Comma) {
                break;
            }
            self.expect(TokenKind::Comma)?;
        }
        self.modification_tail()
    }

    /// One `SET` operation.
    fn set_op(&mut self) -> PResult<()> {
        self.name()?;
        match self.kind(self.pos) {
            Some(TokenKind::Eq) => {
                self.expect(TokenKind::Eq)?;
                self.set_rhs()
            }
            Some(TokenKind::PlusEq | TokenKind::MinusEq) => {
                self.copy(Piece::Word)?;
                self.value_term(false, 0)
            }
            Some(TokenKind::LBracket) => {
                self.expect(TokenKind::LBracket)?;
                self.value_term(false, 0)?;
                self.expect(TokenKind::RBracket)?;
                self.expect(TokenKind::Eq)?;
                self.value_term(false, 0)
            }
            Some(TokenKind::Dot) => {
                self.expect(TokenKind::Dot)?;
                self.name()?;
                self.expect(TokenKind::Eq)?;
                self.value_term(false, 0)
            }
            _ => Err(self.bail("unsupported SET operation")),
        }
    }

    /// The right of `c = ...`: `t`, `c + t`, `c - t`, `t + c`, or the `c -1` / `c 5` forms.
    fn set_rhs(&mut self) -> PResult<()> {
        let at = self.pos;
        if self.is_name(at) {
            match self.kind(at + 1) {
                Some(TokenKind::Plus | TokenKind::Minus) => {
                    self.name()?;
                    self.copy(Piece::Word)?;
                    return self.value_term(false, 0);
                }
                Some(TokenKind::Integer) => {
                    // `c = c -1` lexes as `c`, INTEGER(-1) and the server reads it as an
                    // addition of the integer; `c + ?` bound to it is the same operation.
                    self.name()?;
                    let t = self
                        .tok(self.pos)
                        .ok_or_else(|| self.bail("unexpected end"))?;
                    self.put("+", Piece::Word);
                    self.literal_slot(Literal::Integer(t.text));
                    self.pos += 1;
                    return Ok(());
                }
                // A function call: an ordinary term.
                Some(TokenKind::LParen | TokenKind::Dot) => {}
                _ => return Err(self.bail("unsupported SET expression")),
            }
        }
        // `t + c` (prepend): the term then `+` and a column name that is not a call.
        let (end, _) = self.scan_term(at, 0)?;
        let prepend = self.kind(end) == Some(TokenKind::Plus) && self.is_name(end + 1);
        self.value_term(!prepend, 0)?;
        if prepend {
            self.copy(Piece::Word)?;
            self.name()?;
        }
        Ok(())
    }

    /// `DELETE [ops] FROM table [USING TIMESTAMP t] WHERE ... [IF ...]`
    fn delete(&mut self) -> PResult<()> {
        self.kw("DELETE");
        if !self.at_kw("FROM") {
            loop {
                self.element_ref()?;
                if self.kind(self.pos) != Some(TokenKind::Comma) {
                    break;
                }
                self.expect(TokenKind::Comma)?;
            }
        }
        self.expect_kw("FROM")?;
        self.table_name()?;
        self.modification_tail()
    }

    /// `BEGIN [UNLOGGED | COUNTER] BATCH [USING ...] (stmt [;])* APPLY BATCH`
    fn batch(&mut self) -> PResult<()> {
        self.kw("BEGIN");
        if self.at_kw("UNLOGGED") {
            self.kw("UNLOGGED");
        } else if self.at_kw("COUNTER") {
            self.kw("COUNTER");
        }
        self.expect_kw("BATCH")?;
        if self.at_kw("USING") {
            self.using()?;
        }
        loop {
            if self.at_kw("APPLY") {
                self.kw("APPLY");
                return self.expect_kw("BATCH");
            }
            if self.at_kw("INSERT") {
                self.insert()?;
            } else if self.at_kw("UPDATE") {
                self.update()?;
            } else if self.at_kw("DELETE") {
                self.delete()?;
            } else {
                return Err(self.bail("unexpected token in batch"));
            }
            // The grammar allows one optional `;` after each statement: the canonical text
            // always has it, and a second one stays an error.
            if self.kind(self.pos) == Some(TokenKind::Semicolon) {
                self.pos += 1;
            }
            self.put(";", Piece::Semi);
        }
    }

    /// `USING (TTL n | TIMESTAMP n | TIMEOUT t) (AND ...)*`
    fn using(&mut self) -> PResult<()> {
        self.kw("USING");
        loop {
            if self.at_kw("TTL") {
                self.kw("TTL");
                self.int_value()?;
            } else if self.at_kw("TIMESTAMP") {
                self.kw("TIMESTAMP");
                self.int_value()?;
            } else if self.at_kw("TIMEOUT") {
                // ScyllaDB: the duration stays inline.
                self.kw("TIMEOUT");
                let start = self.pos;
                let (end, _) = self.scan_term(start, 0)?;
                self.inline(start, end)?;
            } else {
                return Err(self.bail("unsupported USING option"));
            }
            if !self.at_kw("AND") {
                return Ok(());
            }
            self.kw("AND");
        }
    }

    /// `intValue`: an INTEGER token or a marker (LIMIT, TTL, TIMESTAMP).
    fn int_value(&mut self) -> PResult<()> {
        if self.client_marker()? {
            return Ok(());
        }
        match self.tok(self.pos) {
            Some(t) if t.kind == TokenKind::Integer => {
                self.literal_slot(Literal::Integer(t.text));
                self.pos += 1;
                Ok(())
            }
            _ => Err(self.bail("expected an integer or a marker")),
        }
    }

    /// `IF EXISTS`, `IF NOT EXISTS` or `IF cond (AND cond)*`.
    fn if_clause(&mut self) -> PResult<()> {
        self.kw("IF");
        if self.at_kw("NOT") && self.kw_at(self.pos + 1, "EXISTS") {
            self.kw("NOT");
            self.kw("EXISTS");
            return Ok(());
        }
        // `exists` is also a valid column name: it is the keyword unless a condition follows.
        if self.at_kw("EXISTS") {
            let next = self.tok(self.pos + 1);
            let condition = next.is_some_and(|t| {
                is_relop(t.kind)
                    || matches!(t.kind, TokenKind::LBracket | TokenKind::Dot)
                    || t.is_keyword("IN")
                    || t.is_keyword("CONTAINS")
            });
            if !condition {
                self.kw("EXISTS");
                return Ok(());
            }
        }
        loop {
            self.condition()?;
            if !self.at_kw("AND") {
                return Ok(());
            }
            self.kw("AND");
        }
    }

    /// A column, an element of it (`c[term]`) or a UDT field (`c.f`): what DELETE removes and
    /// what an LWT condition tests.
    fn element_ref(&mut self) -> PResult<()> {
        self.name()?;
        match self.kind(self.pos) {
            Some(TokenKind::LBracket) => {
                self.expect(TokenKind::LBracket)?;
                self.value_term(false, 0)?;
                self.expect(TokenKind::RBracket)?;
            }
            Some(TokenKind::Dot) => {
                self.expect(TokenKind::Dot)?;
                self.name()?;
            }
            _ => {}
        }
        Ok(())
    }

    /// One LWT condition (`columnCondition`).
    fn condition(&mut self) -> PResult<()> {
        self.element_ref()?;
        match self.tok(self.pos) {
            Some(t) if is_relop(t.kind) => {
                self.copy(Piece::Word)?;
                self.value_term(false, 0)
            }
            Some(t) if t.is_keyword("IN") => {
                self.kw("IN");
                self.in_values(None)
            }
            Some(t) if t.is_keyword("CONTAINS") => {
                self.kw("CONTAINS");
                if self.at_kw("KEY") {
                    self.kw("KEY");
                }
                self.value_term(false, 0)
            }
            _ => Err(self.bail("unsupported condition")),
        }
    }

    /// `relation (AND relation)*`
    fn where_clause(&mut self) -> PResult<()> {
        loop {
            self.relation(0)?;
            if !self.at_kw("AND") {
                return Ok(());
            }
            self.kw("AND");
        }
    }

    fn relation(&mut self, depth: u32) -> PResult<()> {
        if depth > MAX_DEPTH {
            return Err(self.bail("nested too deeply"));
        }
        let at = self.pos;
        match self.kind(at) {
            Some(TokenKind::LParen) => {
                let tuple = self.is_name(at + 1)
                    && matches!(
                        self.kind(at + 2),
                        Some(TokenKind::Comma | TokenKind::RParen)
                    );
                if tuple {
                    let arity = self.tuple_of_names()?;
                    self.multi_column_rhs(arity)
                } else {
                    self.expect(TokenKind::LParen)?;
                    self.relation(depth + 1)?;
                    self.expect(TokenKind::RParen)
                }
            }
            _ if self.at_kw("TOKEN") && self.kind(at + 1) == Some(TokenKind::LParen) => {
                self.put("TOKEN", Piece::Callee);
                self.pos += 1;
                self.tuple_of_names()?;
                if self.at_kw("BETWEEN") {
                    return self.between();
                }
                match self.kind(self.pos) {
                    Some(k) if is_relop(k) => {
                        self.copy(Piece::Word)?;
                        self.value_term(false, 0)
                    }
                    _ => Err(self.bail("unsupported token relation")),
                }
            }
            _ if self.is_name(at) => {
                self.name()?;
                self.single_column_rhs()
            }
            _ => Err(self.bail("unsupported relation")),
        }
    }

    /// What follows the column of a single-column relation.
    fn single_column_rhs(&mut self) -> PResult<()> {
        let Some(t) = self.tok(self.pos) else {
            return Err(self.bail("unexpected end"));
        };
        if is_relop(t.kind) {
            self.copy(Piece::Word)?;
            return self.value_term(false, 0);
        }
        if t.kind == TokenKind::LBracket {
            self.expect(TokenKind::LBracket)?;
            self.value_term(false, 0)?;
            self.expect(TokenKind::RBracket)?;
            return match self.kind(self.pos) {
                Some(k) if is_relop(k) => {
                    self.copy(Piece::Word)?;
                    self.value_term(false, 0)
                }
                _ => Err(self.bail("unsupported element relation")),
            };
        }
        if t.is_keyword("NOT") {
            self.kw("NOT");
            if self.at_kw("IN") {
                self.kw("IN");
                return self.in_values(None);
            }
            if !self.at_kw("CONTAINS") {
                return Err(self.bail("unsupported NOT relation"));
            }
        }
        if self.at_kw("IN") {
            self.kw("IN");
            return self.in_values(None);
        }
        if self.at_kw("CONTAINS") {
            self.kw("CONTAINS");
            if self.at_kw("KEY") {
                self.kw("KEY");
            }
            return self.value_term(false, 0);
        }
        if self.at_kw("LIKE") {
            self.kw("LIKE");
            return self.value_term(false, 0);
        }
        if self.at_kw("BETWEEN") {
            return self.between();
        }
        if self.at_kw("IS") {
            self.kw("IS");
            self.expect_kw("NOT")?;
            return self.expect_kw("NULL");
        }
        Err(self.bail("unsupported relation operator"))
    }

    /// `BETWEEN term AND term`; `arity` for the tuples of a multi-column relation.
    fn between_values(&mut self, arity: Option<usize>) -> PResult<()> {
        self.kw("BETWEEN");
        self.relation_value(arity)?;
        self.expect_kw("AND")?;
        self.relation_value(arity)
    }

    fn between(&mut self) -> PResult<()> {
        self.between_values(None)
    }

    /// The right-hand side of a relation: a term, or for a multi-column relation of `arity`
    /// columns a marker or a tuple literal of exactly that many elements (see
    /// [`Parser::tuple_literal_fits`]).
    fn relation_value(&mut self, arity: Option<usize>) -> PResult<()> {
        if let Some(n) = arity {
            self.tuple_literal_fits(self.pos, n)?;
        }
        self.value_term(false, 0)
    }

    /// The form rule for multi-column relations (see [`super::form`]): the server checks the
    /// arity of a *literal* tuple against the columns ("Expected 2 elements in value tuple,
    /// but got 1") but accepts a shorter *bound* tuple, so a tuple literal of another arity
    /// must never become a marker; such a statement goes through as written, and the client
    /// gets the server's own error. Anything but a marker or a tuple literal is left to the
    /// server as well.
    fn tuple_literal_fits(&self, at: usize, arity: usize) -> PResult<()> {
        match self.kind(at) {
            Some(TokenKind::QMark | TokenKind::Colon) => Ok(()),
            Some(TokenKind::LParen) => {
                let (end, _) = self.scan_term(at, 0)?;
                if self.items_between(at, end)? == arity {
                    Ok(())
                } else {
                    Err(self.bail_at(at, "tuple arity"))
                }
            }
            _ => Err(self.bail_at(at, "multi-column value")),
        }
    }

    /// How many comma-separated items the bracketed group `open..end` holds.
    fn items_between(&self, open: usize, end: usize) -> PResult<usize> {
        let mut i = open + 1;
        let mut n = 0;
        while i + 1 < end {
            let (next, _) = self.scan_term(i, 0)?;
            n += 1;
            i = next;
            if self.kind(i) == Some(TokenKind::Comma) {
                i += 1;
            }
        }
        Ok(n)
    }

    /// `'(' name (',' name)* ')'`; how many names.
    fn tuple_of_names(&mut self) -> PResult<usize> {
        self.expect(TokenKind::LParen)?;
        let mut n = 0;
        loop {
            self.name()?;
            n += 1;
            if self.kind(self.pos) == Some(TokenKind::RParen) {
                self.expect(TokenKind::RParen)?;
                return Ok(n);
            }
            self.expect(TokenKind::Comma)?;
        }
    }

    /// What follows `(a, b)` (of `arity` columns) in a relation.
    fn multi_column_rhs(&mut self, arity: usize) -> PResult<()> {
        if self.at_kw("NOT") && self.kw_at(self.pos + 1, "IN") {
            self.kw("NOT");
        }
        if self.at_kw("IN") {
            self.kw("IN");
            return self.in_values(Some(arity));
        }
        if self.at_kw("BETWEEN") {
            return self.between_values(Some(arity));
        }
        match self.kind(self.pos) {
            Some(k) if is_relop(k) => {
                self.copy(Piece::Word)?;
                self.relation_value(Some(arity))
            }
            _ => Err(self.bail("unsupported multi-column relation")),
        }
    }

    /// The values after `IN`: a marker, or `'(' terms ')'` which becomes one `?` bound to a list
    /// when every item is a literal, or `(?)` when it is a list of one literal (the server
    /// takes a one-term list as `=`, whatever the term; a bound list is an IN whatever its
    /// length: see [`super::form`]). For a multi-column relation of `arity` columns
    /// (`Some`) the items must be tuple literals of that arity (the grammar takes tuples of
    /// literals or markers only, never a mix).
    fn in_values(&mut self, arity: Option<usize>) -> PResult<()> {
        let multi = arity.is_some();
        if self.client_marker()? {
            return Ok(());
        }
        let open = self.pos;
        if self.kind(open) != Some(TokenKind::LParen) {
            return Err(self.bail("expected IN values"));
        }
        if self.kind(open + 1) == Some(TokenKind::RParen) {
            // `IN ()`: nothing to bind.
            self.expect(TokenKind::LParen)?;
            return self.expect(TokenKind::RParen);
        }
        // Try the whole list as literals.
        let mut items = Vec::new();
        let mut i = open + 1;
        let mut pure = true;
        loop {
            if let Some(n) = arity {
                // Every tuple keeps its arity check, replaced or not.
                if self.kind(i) == Some(TokenKind::LParen) {
                    self.tuple_literal_fits(i, n)?;
                }
            }
            let (end, class) = self.scan_term(i, 0)?;
            if pure {
                let lit = if class == Class::Value
                    && (!multi || self.kind(i) == Some(TokenKind::LParen))
                {
                    self.literal_at(i, 0).filter(|&(_, e)| e == end)
                } else {
                    None
                };
                match lit {
                    Some((l, _)) if l != Literal::Null => items.push(l),
                    _ => pure = false,
                }
            }
            i = end;
            match self.kind(i) {
                Some(TokenKind::Comma) => i += 1,
                Some(TokenKind::RParen) => break,
                _ => return Err(self.bail_at(i, "malformed IN list")),
            }
        }
        if pure {
            if items.len() == 1 {
                self.expect(TokenKind::LParen)?;
                let item = items.pop().unwrap_or(Literal::Null);
                self.literal_slot(item);
                self.put(")", Piece::Close);
            } else {
                self.literal_slot(Literal::List(items));
            }
            self.pos = i + 1;
            return Ok(());
        }
        // Item by item.
        self.expect(TokenKind::LParen)?;
        loop {
            if multi && self.kind(self.pos) == Some(TokenKind::LParen) {
                // Keep each tuple a tuple: replacing a whole tuple by a marker could turn an
                // invalid mix of tuples and markers into a valid list of markers.
                self.elements(TokenKind::RParen, 1)?;
            } else if multi {
                if !self.client_marker()? {
                    let start = self.pos;
                    let (end, _) = self.scan_term(start, 0)?;
                    self.inline(start, end)?;
                }
            } else {
                self.value_term(false, 0)?;
            }
            if self.kind(self.pos) == Some(TokenKind::RParen) {
                return self.expect(TokenKind::RParen);
            }
            self.expect(TokenKind::Comma)?;
        }
    }

    // ---- terms ----------------------------------------------------------------------------

    /// Emits the term at `pos`: one `?` if it is a value made of literals only (a `null`
    /// only when `null_ok`), element by element if it is a collection / tuple / UDT with
    /// other parts, inline otherwise.
    fn value_term(&mut self, null_ok: bool, depth: u32) -> PResult<()> {
        let start = self.pos;
        // Fast path for the common case, a lone constant (not an arithmetic operand).
        if let Some(t) = self.tok(start) {
            let operator_follows = matches!(
                self.kind(start + 1),
                Some(
                    TokenKind::Plus
                        | TokenKind::Minus
                        | TokenKind::Star
                        | TokenKind::Slash
                        | TokenKind::Percent
                )
            );
            if t.kind.is_constant() && !operator_follows {
                if let Some((lit, end)) = self.literal_at(start, depth) {
                    self.literal_slot(lit);
                    self.pos = end;
                    return Ok(());
                }
            }
        }
        let (end, class) = self.scan_term(start, depth)?;
        if class == Class::Complex {
            return self.inline(start, end);
        }
        match self.literal_at(start, depth) {
            Some((Literal::Null, e)) if e == end && !null_ok => {
                self.put("NULL", Piece::Word);
                self.pos = end;
            }
            Some((lit, e)) if e == end => {
                self.literal_slot(lit);
                self.pos = end;
            }
            _ => self.composite(depth)?,
        }
        if self.pos != end {
            return Err(self.bail("term mismatch"));
        }
        Ok(())
    }

    /// A value that is not all literals: a client marker, a tuple or UDT literal whose
    /// elements are emitted one by one, or a list / set / map literal, which stays inline
    /// (Cassandra 5 rejects markers inside collection literals: "bind variables are not
    /// supported inside collection literals"; tuples, UDTs and vectors accept them, but a
    /// vector cannot be told from a list here).
    fn composite(&mut self, depth: u32) -> PResult<()> {
        if self.client_marker()? {
            return Ok(());
        }
        let at = self.pos;
        match self.kind(at) {
            Some(TokenKind::LParen) => self.elements(TokenKind::RParen, depth + 1),
            Some(TokenKind::LBrace)
                if self.is_name(at + 1) && self.kind(at + 2) == Some(TokenKind::Colon) =>
            {
                self.udt_elements(depth + 1)
            }
            _ => {
                let (end, _) = self.scan_term(at, depth)?;
                self.inline(at, end)
            }
        }
    }

    /// `open term (, term)* close` with each term emitted by [`Self::value_term`].
    fn elements(&mut self, close: TokenKind, depth: u32) -> PResult<()> {
        self.copy(Piece::Open)?;
        if self.kind(self.pos) == Some(close) {
            return self.copy(Piece::Close);
        }
        loop {
            self.value_term(false, depth)?;
            match self.kind(self.pos) {
                Some(TokenKind::Comma) => self.copy(Piece::Comma)?,
                Some(k) if k == close => return self.copy(Piece::Close),
                _ => return Err(self.bail("malformed literal")),
            }
        }
    }

    /// `{ field: v, ... }` with values emitted by [`Self::value_term`].
    fn udt_elements(&mut self, depth: u32) -> PResult<()> {
        self.copy(Piece::Open)?;
        loop {
            self.name()?;
            if self.kind(self.pos) != Some(TokenKind::Colon) {
                return Err(self.bail("malformed UDT literal"));
            }
            self.copy(Piece::MapColon)?;
            self.value_term(false, depth)?;
            match self.kind(self.pos) {
                Some(TokenKind::Comma) => self.copy(Piece::Comma)?,
                Some(TokenKind::RBrace) => return self.copy(Piece::Close),
                _ => return Err(self.bail("malformed UDT literal")),
            }
        }
    }

    /// Where the term starting at `i` ends, and its class (`term` in `Parser.g`: sums and
    /// products of optionally negated simple terms). A `+` followed by a bare column name is
    /// left out: that is the prepend form `c = t + c`.
    fn scan_term(&self, i: usize, depth: u32) -> PResult<(usize, Class)> {
        let (mut j, mut class) = self.scan_group(i, depth)?;
        loop {
            match self.kind(j) {
                Some(TokenKind::Star | TokenKind::Slash | TokenKind::Percent) => {}
                Some(TokenKind::Plus | TokenKind::Minus) => {
                    let bare_name = self.is_name(j + 1)
                        && !matches!(self.kind(j + 2), Some(TokenKind::LParen | TokenKind::Dot));
                    if bare_name {
                        return Ok((j, class));
                    }
                }
                _ => return Ok((j, class)),
            }
            let (k, _) = self.scan_group(j + 1, depth)?;
            j = k;
            class = Class::Complex;
        }
    }

    /// `['-'] simpleTerm`
    fn scan_group(&self, i: usize, depth: u32) -> PResult<(usize, Class)> {
        if self.kind(i) == Some(TokenKind::Minus) {
            let (end, _) = self.scan_simple(i + 1, depth)?;
            return Ok((end, Class::Complex));
        }
        self.scan_simple(i, depth)
    }

    /// `simpleTerm`: a value, a function call, a cast.
    fn scan_simple(&self, i: usize, depth: u32) -> PResult<(usize, Class)> {
        if depth > MAX_DEPTH {
            return Err(self.bail_at(i, "nested too deeply"));
        }
        let Some(t) = self.tok(i) else {
            return Err(self.bail_at(i, "expected a term"));
        };
        match t.kind {
            k if k.is_constant() => Ok((i + 1, Class::Value)),
            TokenKind::QMark => Ok((i + 1, Class::Value)),
            TokenKind::Colon if self.is_name(i + 1) => Ok((i + 2, Class::Value)),
            TokenKind::Ident if self.is_null(i) => Ok((i + 1, Class::Value)),
            TokenKind::Ident | TokenKind::QuotedIdent => {
                // A function call `[ks .] f ( ... )`, `CAST ( ... )` included.
                let open = match (self.kind(i + 1), self.kind(i + 3)) {
                    (Some(TokenKind::LParen), _) => i + 1,
                    (Some(TokenKind::Dot), Some(TokenKind::LParen)) if self.is_name(i + 2) => i + 3,
                    _ => return Err(self.bail_at(i, "name in term position")),
                };
                Ok((self.skip_balanced(open)?, Class::Complex))
            }
            TokenKind::LBracket => {
                let end = self.scan_sequence(i + 1, TokenKind::RBracket, depth)?;
                Ok((end, Class::Value))
            }
            TokenKind::LParen => self.scan_paren(i, depth),
            TokenKind::LBrace => self.scan_brace(i, depth),
            _ => Err(self.bail_at(i, "expected a term")),
        }
    }

    /// `term (, term)* close`, or just `close`; the offset past `close`.
    fn scan_sequence(&self, mut i: usize, close: TokenKind, depth: u32) -> PResult<usize> {
        if self.kind(i) == Some(close) {
            return Ok(i + 1);
        }
        loop {
            let (end, _) = self.scan_term(i, depth + 1)?;
            match self.kind(end) {
                Some(TokenKind::Comma) => i = end + 1,
                Some(k) if k == close => return Ok(end + 1),
                _ => return Err(self.bail_at(end, "malformed literal")),
            }
        }
    }

    /// After `(`: a type cast `(type) simpleTerm` or a tuple literal.
    fn scan_paren(&self, i: usize, depth: u32) -> PResult<(usize, Class)> {
        let first = i + 1;
        let cast = self.is_name(first)
            && matches!(
                self.kind(first + 1),
                Some(TokenKind::RParen | TokenKind::Lt | TokenKind::Dot)
            );
        if cast {
            let close = self.skip_type(first)?;
            let (end, _) = self.scan_simple(close + 1, depth + 1)?;
            return Ok((end, Class::Complex));
        }
        if self.kind(first) == Some(TokenKind::RParen) {
            return Err(self.bail_at(i, "empty parentheses"));
        }
        // `('custom.Type') x` casts to a custom type; `('a')` is a one-element tuple. Tell them
        // apart by what follows, and give up when it could be either.
        if self.kind(first) == Some(TokenKind::String)
            && self.kind(first + 1) == Some(TokenKind::RParen)
        {
            let next = self.tok(first + 2);
            let term_follows = next.is_some_and(|t| {
                t.kind.is_constant()
                    || matches!(
                        t.kind,
                        TokenKind::QMark
                            | TokenKind::LParen
                            | TokenKind::LBracket
                            | TokenKind::LBrace
                            | TokenKind::QuotedIdent
                    )
                    || (t.kind == TokenKind::Ident
                        && !FOLLOWS_TERM.iter().any(|k| t.is_keyword(k))
                        && matches!(
                            self.kind(first + 3),
                            Some(TokenKind::LParen | TokenKind::Dot)
                        ))
                    || t.is_keyword("NULL")
                    // `('t') :x` casts a named marker; in `{('a'): f()}` the colon separates a
                    // map entry (a bare name is not a term, so a call must follow).
                    || (t.kind == TokenKind::Colon
                        && self.is_name(first + 3)
                        && !matches!(
                            self.kind(first + 4),
                            Some(TokenKind::LParen | TokenKind::Dot)
                        ))
            });
            if term_follows {
                return Err(self.bail_at(i, "ambiguous cast"));
            }
        }
        let end = self.scan_sequence(first, TokenKind::RParen, depth)?;
        Ok((end, Class::Value))
    }

    /// After `{`: an empty collection, a UDT literal, a map or a set.
    fn scan_brace(&self, i: usize, depth: u32) -> PResult<(usize, Class)> {
        let first = i + 1;
        if self.kind(first) == Some(TokenKind::RBrace) {
            return Ok((first + 1, Class::Value));
        }
        if self.is_name(first) && self.kind(first + 1) == Some(TokenKind::Colon) {
            let mut j = first;
            loop {
                if !self.is_name(j) || self.kind(j + 1) != Some(TokenKind::Colon) {
                    return Err(self.bail_at(j, "malformed UDT literal"));
                }
                let (end, _) = self.scan_term(j + 2, depth + 1)?;
                match self.kind(end) {
                    Some(TokenKind::Comma) => j = end + 1,
                    Some(TokenKind::RBrace) => return Ok((end + 1, Class::Value)),
                    _ => return Err(self.bail_at(end, "malformed UDT literal")),
                }
            }
        }
        let (mut k_end, _) = self.scan_term(first, depth + 1)?;
        if self.kind(k_end) != Some(TokenKind::Colon) {
            // A set: continue after the first element (scanning it again would be exponential
            // in the nesting depth).
            return match self.kind(k_end) {
                Some(TokenKind::RBrace) => Ok((k_end + 1, Class::Value)),
                Some(TokenKind::Comma) => {
                    let end = self.scan_sequence(k_end + 1, TokenKind::RBrace, depth)?;
                    Ok((end, Class::Value))
                }
                _ => Err(self.bail_at(k_end, "malformed set literal")),
            };
        }
        loop {
            if self.kind(k_end) != Some(TokenKind::Colon) {
                return Err(self.bail_at(k_end, "malformed map literal"));
            }
            let (v_end, _) = self.scan_term(k_end + 1, depth + 1)?;
            match self.kind(v_end) {
                Some(TokenKind::Comma) => k_end = self.scan_term(v_end + 1, depth + 1)?.0,
                Some(TokenKind::RBrace) => return Ok((v_end + 1, Class::Value)),
                _ => return Err(self.bail_at(v_end, "malformed map literal")),
            }
        }
    }

    /// A type inside a cast, from `i` to the closing `)`; the index of that `)`.
    fn skip_type(&self, mut i: usize) -> PResult<usize> {
        let mut angle = 0u32;
        loop {
            match self.tok(i) {
                None => return Err(self.bail_at(i, "unterminated cast")),
                Some(t) => match t.kind {
                    TokenKind::RParen if angle == 0 => return Ok(i),
                    TokenKind::Lt => angle += 1,
                    TokenKind::Gt => {
                        angle = angle
                            .checked_sub(1)
                            .ok_or_else(|| self.bail_at(i, "malformed type"))?;
                    }
                    TokenKind::Ident
                    | TokenKind::QuotedIdent
                    | TokenKind::String
                    | TokenKind::Integer
                    | TokenKind::Comma
                    | TokenKind::Dot => {}
                    _ => return Err(self.bail_at(i, "malformed type")),
                },
            }
            i += 1;
        }
    }

    /// From the opening bracket at `open`, the index past its matching close.
    fn skip_balanced(&self, open: usize) -> PResult<usize> {
        // A bit stack of the open brackets' kinds (2 bits each) bounds the nesting at 32.
        let mut stack: u64 = 0;
        let mut depth = 0u32;
        let mut i = open;
        loop {
            let Some(t) = self.tok(i) else {
                return Err(self.bail_at(i, "unbalanced brackets"));
            };
            let code = match t.kind {
                TokenKind::LParen | TokenKind::RParen => 1u64,
                TokenKind::LBracket | TokenKind::RBracket => 2,
                TokenKind::LBrace | TokenKind::RBrace => 3,
                TokenKind::Semicolon => return Err(self.bail_at(i, "unexpected semicolon")),
                _ => 0,
            };
            match t.kind {
                TokenKind::LParen | TokenKind::LBracket | TokenKind::LBrace => {
                    if depth >= 32 {
                        return Err(self.bail_at(i, "nested too deeply"));
                    }
                    stack = (stack << 2) | code;
                    depth += 1;
                }
                TokenKind::RParen | TokenKind::RBracket | TokenKind::RBrace => {
                    if depth == 0 || stack & 3 != code {
                        return Err(self.bail_at(i, "unbalanced brackets"));
                    }
                    stack >>= 2;
                    depth -= 1;
                    if depth == 0 {
                        return Ok(i + 1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The literal for the value at `i` and the index past it, if the value is made of
    /// literals only. `null` is returned at the top level only; inside a collection, tuple or
    /// UDT it makes the value not a literal (its elements are then bound one by one).
    fn literal_at(&self, i: usize, depth: u32) -> Option<(Literal<'a>, usize)> {
        if depth > MAX_DEPTH {
            return None;
        }
        let t = self.tok(i)?;
        let lit = match t.kind {
            TokenKind::LBracket => {
                let (items, end) = self.literal_items(i + 1, TokenKind::RBracket, depth)?;
                return Some((Literal::List(items), end));
            }
            TokenKind::LParen => {
                if self.kind(i + 1) == Some(TokenKind::RParen) {
                    return None;
                }
                let (items, end) = self.literal_items(i + 1, TokenKind::RParen, depth)?;
                return Some((Literal::Tuple(items), end));
            }
            TokenKind::LBrace => return self.literal_brace(i, depth),
            _ => constant_literal(t)?,
        };
        Some((lit, i + 1))
    }

    /// Literal elements up to `close`; `None` if one is not a literal or is `null`.
    fn literal_items(
        &self,
        mut i: usize,
        close: TokenKind,
        depth: u32,
    ) -> Option<(Vec<Literal<'a>>, usize)> {
        let mut items = Vec::new();
        if self.kind(i) == Some(close) {
            return Some((items, i + 1));
        }
        loop {
            let (lit, end) = self.nested_literal(i, depth)?;
            items.push(lit);
            match self.kind(end) {
                Some(TokenKind::Comma) => i = end + 1,
                Some(k) if k == close => return Some((items, end + 1)),
                _ => return None,
            }
        }
    }

    fn nested_literal(&self, i: usize, depth: u32) -> Option<(Literal<'a>, usize)> {
        match self.literal_at(i, depth + 1)? {
            (Literal::Null, _) => None,
            found => Some(found),
        }
    }

    fn literal_brace(&self, i: usize, depth: u32) -> Option<(Literal<'a>, usize)> {
        let first = i + 1;
        if self.kind(first) == Some(TokenKind::RBrace) {
            return Some((Literal::Map(Vec::new()), first + 1));
        }
        if self.is_name(first) && self.kind(first + 1) == Some(TokenKind::Colon) {
            let mut fields = Vec::new();
            let mut j = first;
            loop {
                let name = self.tok(j).filter(|_| self.is_name(j))?;
                if self.kind(j + 1) != Some(TokenKind::Colon) {
                    return None;
                }
                let (v, end) = self.nested_literal(j + 2, depth)?;
                fields.push((super::resolve_identifier(name.text), v));
                match self.kind(end) {
                    Some(TokenKind::Comma) => j = end + 1,
                    Some(TokenKind::RBrace) => return Some((Literal::Udt(fields), end + 1)),
                    _ => return None,
                }
            }
        }
        let (k, k_end) = self.nested_literal(first, depth)?;
        if self.kind(k_end) != Some(TokenKind::Colon) {
            // A set: continue after the first element rather than reading it again.
            let mut items = vec![k];
            return match self.kind(k_end) {
                Some(TokenKind::RBrace) => Some((Literal::Set(items), k_end + 1)),
                Some(TokenKind::Comma) => {
                    let (rest, end) = self.literal_items(k_end + 1, TokenKind::RBrace, depth)?;
                    if rest.is_empty() {
                        return None; // `{1,}`
                    }
                    items.extend(rest);
                    Some((Literal::Set(items), end))
                }
                _ => None,
            };
        }
        let mut entries = Vec::new();
        let (mut key, mut j) = (k, k_end);
        loop {
            if self.kind(j) != Some(TokenKind::Colon) {
                return None;
            }
            let (v, v_end) = self.nested_literal(j + 1, depth)?;
            entries.push((key, v));
            match self.kind(v_end) {
                Some(TokenKind::Comma) => {
                    let (k2, k2_end) = self.nested_literal(v_end + 1, depth)?;
                    key = k2;
                    j = k2_end;
                }
                Some(TokenKind::RBrace) => return Some((Literal::Map(entries), v_end + 1)),
                _ => return None,
            }
        }
    }

    // ---- inline text ----------------------------------------------------------------------

    /// Writes tokens `start..end` as they are, recording the client's markers. A `:` followed
    /// by a name is a named marker where a term may start, and a map / UDT separator after a
    /// complete term; after `)` it could be either (`(int) :x` vs `{(1, 2): f()}`), so the
    /// statement is left alone.
    fn inline(&mut self, start: usize, end: usize) -> PResult<()> {
        let mut i = start;
        while i < end {
            let Some(t) = self.tok(i) else { break };
            match t.kind {
                TokenKind::QMark => self.positional_slot(i)?,
                TokenKind::Colon if i + 1 < end && self.is_name(i + 1) => {
                    let prev = if i == start { None } else { self.tok(i - 1) };
                    let marker = match prev {
                        None => true,
                        Some(p) => match p.kind {
                            TokenKind::RParen => {
                                return Err(self.bail_at(i, "ambiguous colon"));
                            }
                            k if k.is_constant() => false,
                            TokenKind::QMark
                            | TokenKind::RBracket
                            | TokenKind::RBrace
                            | TokenKind::QuotedIdent => false,
                            TokenKind::Ident => p.is_keyword("JSON") || p.is_keyword("DISTINCT"),
                            _ => true,
                        },
                    };
                    if marker {
                        let name = self.tok(i + 1).map_or("", |n| n.text);
                        self.named_slot(name);
                        i += 2;
                        continue;
                    }
                    self.put(":", Piece::MapColon);
                }
                TokenKind::Colon => self.put(":", Piece::MapColon),
                TokenKind::Semicolon => return Err(self.bail_at(i, "unexpected semicolon")),
                TokenKind::Ident | TokenKind::QuotedIdent => self.put(t.text, Piece::Callee),
                k => self.put(t.text, Self::punct_piece(k)),
            }
            i += 1;
        }
        self.pos = end;
        Ok(())
    }
}
