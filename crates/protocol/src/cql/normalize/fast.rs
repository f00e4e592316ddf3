//! The single-pass normalizer: the common forms of INSERT, UPDATE, DELETE, SELECT and text
//! batches in one pass over the statement, with no token vector: fixed keywords, punctuation
//! and names are checked at the [`Cursor`], only values are lexed whole, and the canonical text
//! is copied from the statement in runs ([`RunWriter`]).
//!
//! It covers what applications send over and over: column lists, constants, collection
//! literals made of constants, `IN` lists, client markers, `USING TTL/TIMESTAMP`, `IF [NOT]
//! EXISTS` and simple conditions, `LIMIT`, `ORDER BY`, `ALLOW FILTERING`. On anything else —
//! a function call, arithmetic, a tuple, a UDT literal, JSON, a lexing error — it gives up and
//! [`super::parser`], which handles the whole grammar, decides.
//!
//! An INSERT written in the canonical layout first tries the lane of `lane.rs`, which reads
//! its head without per-token bookkeeping.
//!
//! Contract: whenever it answers, the answer is exactly what [`super::parser`] gives for the
//! same text (same shape text byte for byte, same slots, same kind). Each function below mirrors
//! the parser function of the same name restricted to the constructs listed, and gives up
//! wherever the parser would look further; the differential tests (`differential_tests.rs`)
//! and the `normalize` fuzz target check the contract.

use std::borrow::Cow;

use super::canonical::Piece;
use super::constant::constant_literal;
use super::cursor::{Cursor, FResult, GiveUp};
use super::lane;
use super::parser::is_relop;
use super::terms;
use super::writer::RunWriter;
use super::{Normalized, NotCandidate, Shape, Slot, StatementKind};
use crate::cql::lexer::{scan, Span, Token, TokenKind};
use crate::cql::Literal;

/// Normalizes `src` if it is in the single pass's subset, writing the shape text into `text`
/// and the slots into `slots` (both cleared first). `Err`: not in the subset; the buffers come
/// back cleared, for the full parser.
pub(super) fn normalize<'a>(
    src: &'a str,
    text: String,
    mut slots: Vec<Slot<'a>>,
) -> Result<Normalized<'a>, (String, Vec<Slot<'a>>)> {
    slots.clear();
    let mut p = Fast {
        c: Cursor::new(src),
        w: RunWriter::new(src, text),
        slots,
        positional: 0,
        literals: 0,
    };
    match p.statement() {
        Ok(kind) if p.literals == 0 => {
            let Fast { w, mut slots, .. } = p;
            slots.clear();
            let mut text = w.finish();
            text.clear();
            // The buffers are not part of the answer: dropped here unless reused.
            drop((text, slots));
            Ok(Normalized::NotCandidate(NotCandidate::NoLiterals { kind }))
        }
        Ok(kind) => Ok(Normalized::Shape(Shape {
            kind,
            text: p.w.finish(),
            slots: p.slots,
        })),
        Err(GiveUp) => {
            let mut text = p.w.finish();
            text.clear();
            let mut slots = p.slots;
            slots.clear();
            Err((text, slots))
        }
    }
}

struct Fast<'a> {
    c: Cursor<'a>,
    w: RunWriter<'a>,
    slots: Vec<Slot<'a>>,
    /// The client's positional markers seen so far.
    positional: u16,
    /// Literal slots so far.
    literals: u32,
}

impl<'a> Fast<'a> {
    // ---- output ---------------------------------------------------------------------------

    /// The keyword `kw`, which must come next, written in upper case.
    #[inline(always)]
    fn kw(&mut self, kw: &'static str) -> FResult<()> {
        if self.try_kw(kw)? {
            Ok(())
        } else {
            Err(GiveUp)
        }
    }

    /// The keyword `kw` written in upper case if it comes next.
    #[inline(always)]
    fn try_kw(&mut self, kw: &'static str) -> FResult<bool> {
        let Some(k) = self.c.keyword(kw)? else {
            return Ok(false);
        };
        if k.upper {
            self.w.verbatim(k.start, k.end, Piece::Word);
        } else {
            self.w.respell(k.end, kw, Piece::Word);
        }
        Ok(true)
    }

    /// The one-byte token `b` written as `piece` if it comes next.
    #[inline(always)]
    fn try_punct(&mut self, b: u8, piece: Piece) -> FResult<bool> {
        let Some(at) = self.c.single(b)? else {
            return Ok(false);
        };
        self.w.verbatim(at, at + 1, piece);
        Ok(true)
    }

    /// The one-byte token `b`, which must come next, written as `piece`.
    #[inline(always)]
    fn punct(&mut self, b: u8, piece: Piece) -> FResult<()> {
        if self.try_punct(b, piece)? {
            Ok(())
        } else {
            Err(GiveUp)
        }
    }

    /// `item (, item)* )` after a `(`.
    #[inline(always)]
    fn parenthesized(&mut self, mut item: impl FnMut(&mut Self) -> FResult<()>) -> FResult<()> {
        loop {
            item(self)?;
            let piece = match self.c.peek()? {
                b',' => Piece::Comma,
                b')' => Piece::Close,
                _ => return Err(GiveUp),
            };
            let at = self.c.pos();
            self.w.verbatim(at, at + 1, piece);
            self.c.set_pos(at + 1);
            if piece == Piece::Close {
                return Ok(());
            }
        }
    }

    /// Writes the token `t` as it is, as `piece`, and moves past it.
    #[inline(always)]
    fn copy(&mut self, t: Span, piece: Piece) {
        self.w.verbatim(t.start, t.end, piece);
        self.c.set_pos(t.end);
    }

    /// A name, which must come next, written as `piece`; its text.
    #[inline(always)]
    fn name(&mut self, piece: Piece) -> FResult<Span> {
        let t = self.c.peek_name()?.ok_or(GiveUp)?;
        self.copy(t, piece);
        // The parser leaves statements with the token `expr(` alone (custom index expressions).
        if self.c.is(t, "EXPR") && self.c.peek()? == b'(' {
            return Err(GiveUp);
        }
        Ok(t)
    }

    /// `[ks '.'] name`
    #[inline(always)]
    fn table_name(&mut self) -> FResult<()> {
        self.name(Piece::Name)?;
        if let Some(at) = self.c.dot()? {
            self.w.verbatim(at, at + 1, Piece::Dot);
            self.name(Piece::Name)?;
        }
        Ok(())
    }

    /// The literal of a constant token or `null`.
    #[inline(always)]
    fn literal(&self, t: Span) -> Option<Literal<'a>> {
        constant_literal(&Token {
            kind: t.kind,
            text: self.c.text(t.start, t.end),
            offset: t.start,
        })
    }

    // ---- slots ----------------------------------------------------------------------------

    /// Replaces the statement text `start..end` by a marker bound to `lit`.
    #[inline(always)]
    fn literal_slot(&mut self, start: usize, end: usize, lit: Literal<'a>) {
        let _ = start;
        self.w.marker(end);
        self.slots.push(Slot::Literal(lit));
        self.literals += 1;
    }

    /// A client marker (`?` or `: name`) if one comes next; moves past it.
    fn client_marker(&mut self) -> FResult<bool> {
        match self.c.peek()? {
            b'?' => {
                let index = self.positional;
                self.positional = index.checked_add(1).ok_or(GiveUp)?;
                self.punct(b'?', Piece::Word)?;
                self.slots.push(Slot::ClientMarker { index });
                Ok(true)
            }
            b':' => {
                self.punct(b':', Piece::MarkerColon)?;
                let t = self.name(Piece::Word)?;
                let name = self.c.text(t.start, t.end);
                self.slots.push(Slot::ClientNamed { name });
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    // ---- statements -----------------------------------------------------------------------

    /// The whole statement, with its trailing semicolons; its kind.
    fn statement(&mut self) -> FResult<StatementKind> {
        let first = self.c.peek_word()?.ok_or(GiveUp)?;
        // The kinds of `StatementKind::of_first_token` the single pass handles.
        let kind = if self.c.is(first, "INSERT") {
            self.insert()?;
            StatementKind::Insert
        } else if self.c.is(first, "UPDATE") {
            self.update()?;
            StatementKind::Update
        } else if self.c.is(first, "SELECT") {
            self.select()?;
            StatementKind::Select
        } else if self.c.is(first, "DELETE") {
            self.delete()?;
            StatementKind::Delete
        } else if self.c.is(first, "BEGIN") {
            self.batch()?;
            StatementKind::Batch
        } else {
            return Err(GiveUp);
        };
        // `statement ';'*`: trailing semicolons are not part of the shape.
        while self.c.single(b';')?.is_some() {}
        if !self.c.at_end()? || self.slots.len() > usize::from(u16::MAX) {
            return Err(GiveUp);
        }
        Ok(kind)
    }

    /// `SELECT (* | name, ...) FROM table [WHERE ...] [ORDER BY ...] [PER PARTITION LIMIT n]
    /// [LIMIT n] [ALLOW FILTERING] [BYPASS CACHE] [USING ...]`
    fn select(&mut self) -> FResult<()> {
        self.kw("SELECT")?;
        // The selection stays as written: names, `*` and commas only here.
        let mut empty = true;
        loop {
            match self.c.peek()? {
                b'*' => self.punct(b'*', Piece::Word)?,
                b',' => self.punct(b',', Piece::Comma)?,
                b'"' => {
                    let t = self.c.peek_name()?.ok_or(GiveUp)?;
                    self.copy(t, Piece::Callee);
                }
                _ => {
                    let t = self.c.peek_word()?.ok_or(GiveUp)?;
                    if t.kind != TokenKind::Ident {
                        return Err(GiveUp);
                    }
                    if self.c.is(t, "FROM") {
                        break;
                    }
                    self.copy(t, Piece::Callee);
                }
            }
            empty = false;
        }
        if empty {
            return Err(GiveUp);
        }
        self.kw("FROM")?;
        self.table_name()?;
        loop {
            if self.try_kw("WHERE")? {
                self.where_clause()?;
            } else if self.try_kw("ORDER")? {
                self.kw("BY")?;
                self.order_by()?;
            } else if self.try_kw("PER")? {
                self.kw("PARTITION")?;
                self.kw("LIMIT")?;
                self.int_value()?;
            } else if self.try_kw("LIMIT")? {
                self.int_value()?;
            } else if self.try_kw("ALLOW")? {
                self.kw("FILTERING")?;
            } else if self.try_kw("BYPASS")? {
                self.kw("CACHE")?;
            } else if self.try_kw("USING")? {
                self.using()?;
            } else if self.c.peek_keyword("GROUP")?.is_some() {
                return Err(GiveUp);
            } else {
                return Ok(());
            }
        }
    }

    /// `ORDER BY c [ASC | DESC] (, ...)*` (after `BY`)
    fn order_by(&mut self) -> FResult<()> {
        loop {
            self.name(Piece::Name)?;
            if self.c.peek_keyword("ANN")?.is_some() {
                return Err(GiveUp);
            }
            if !self.try_kw("ASC")? {
                self.try_kw("DESC")?;
            }
            if !self.try_punct(b',', Piece::Comma)? {
                return Ok(());
            }
        }
    }

    /// `INSERT INTO table '(' names ')' VALUES '(' terms ')'` and the modification tail.
    fn insert(&mut self) -> FResult<()> {
        if self.c.pos() == 0 {
            // A statement written in the canonical layout takes the lane.
            if let Some(head) = lane::insert_head(self.c.src(), &mut self.slots) {
                let literals = head.values - head.client_markers;
                self.literals += u32::try_from(literals).map_err(|_| GiveUp)?;
                self.positional = u16::try_from(head.client_markers).map_err(|_| GiveUp)?;
                match head.stop {
                    lane::Stop::Done(end) => {
                        self.w.insert_head(head.prefix, head.values, end, true);
                        self.c.set_pos(end);
                    }
                    lane::Stop::At(next) => {
                        self.w.insert_head(head.prefix, head.values, next, false);
                        self.c.set_pos(next);
                        self.parenthesized(|p| p.value_term(true))?;
                    }
                }
                return self.modification_tail();
            }
        }
        self.kw("INSERT")?;
        self.kw("INTO")?;
        self.table_name()?;
        self.punct(b'(', Piece::Open)?;
        self.parenthesized(|p| p.name(Piece::Name).map(drop))?;
        self.kw("VALUES")?;
        self.punct(b'(', Piece::Open)?;
        // A whole INSERT value: a bound null writes the same tombstone as `null`.
        self.parenthesized(|p| p.value_term(true))?;
        self.modification_tail()
    }

    /// `USING`, `WHERE` and `IF` clauses after the body of INSERT, UPDATE and DELETE.
    fn modification_tail(&mut self) -> FResult<()> {
        loop {
            if self.try_kw("USING")? {
                self.using()?;
            } else if self.try_kw("WHERE")? {
                self.where_clause()?;
            } else if self.try_kw("IF")? {
                self.if_clause()?;
            } else {
                return Ok(());
            }
        }
    }

    /// `UPDATE table [USING ...] SET ops WHERE ... [IF ...]`
    fn update(&mut self) -> FResult<()> {
        self.kw("UPDATE")?;
        self.table_name()?;
        if self.try_kw("USING")? {
            self.using()?;
        }
        self.kw("SET")?;
        loop {
            self.set_op()?;
            if !self.try_punct(b',', Piece::Comma)? {
                break;
            }
        }
        self.modification_tail()
    }

    /// `c = ...`, `c += t`, `c -= t`.
    fn set_op(&mut self) -> FResult<()> {
        self.name(Piece::Name)?;
        if self.try_punct(b'=', Piece::Word)? {
            return self.set_rhs();
        }
        let t = self.c.token()?.ok_or(GiveUp)?;
        if !matches!(t.kind, TokenKind::PlusEq | TokenKind::MinusEq) {
            return Err(GiveUp);
        }
        self.copy(t, Piece::Word);
        self.value_term(false)
    }

    /// The right of `c = ...`: `t`, `c + t`, `c - t`, or `c -1`.
    fn set_rhs(&mut self) -> FResult<()> {
        if self.c.peek_name()?.is_none() {
            return self.value_term(true);
        }
        self.name(Piece::Name)?;
        let t = self.c.token()?.ok_or(GiveUp)?;
        match t.kind {
            TokenKind::Plus | TokenKind::Minus => {
                self.copy(t, Piece::Word);
                self.value_term(false)
            }
            TokenKind::Integer => {
                // `c = c -1` is an addition of the integer: `c + ?` bound to it.
                self.w.insert("+", Piece::Word);
                let lit = Literal::Integer(self.c.text(t.start, t.end));
                self.literal_slot(t.start, t.end, lit);
                Ok(())
            }
            _ => Err(GiveUp),
        }
    }

    /// `DELETE [name, ...] FROM table [USING TIMESTAMP t] WHERE ... [IF ...]`
    fn delete(&mut self) -> FResult<()> {
        self.kw("DELETE")?;
        if self.c.peek_keyword("FROM")?.is_none() {
            loop {
                self.element_ref()?;
                if !self.try_punct(b',', Piece::Comma)? {
                    break;
                }
            }
        }
        self.kw("FROM")?;
        self.table_name()?;
        self.modification_tail()
    }

    /// `BEGIN [UNLOGGED | COUNTER] BATCH [USING ...] (stmt [;])* APPLY BATCH`
    fn batch(&mut self) -> FResult<()> {
        self.kw("BEGIN")?;
        if !self.try_kw("UNLOGGED")? {
            self.try_kw("COUNTER")?;
        }
        self.kw("BATCH")?;
        if self.try_kw("USING")? {
            self.using()?;
        }
        loop {
            if self.try_kw("APPLY")? {
                return self.kw("BATCH");
            }
            if self.c.peek_keyword("INSERT")?.is_some() {
                self.insert()?;
            } else if self.c.peek_keyword("UPDATE")?.is_some() {
                self.update()?;
            } else if self.c.peek_keyword("DELETE")?.is_some() {
                self.delete()?;
            } else {
                return Err(GiveUp);
            }
            // One optional `;` after each statement; the canonical text always has it.
            if !self.try_punct(b';', Piece::Semi)? {
                self.w.insert(";", Piece::Semi);
            }
        }
    }

    /// `(TTL n | TIMESTAMP n) (AND ...)*` after `USING`.
    fn using(&mut self) -> FResult<()> {
        loop {
            if !self.try_kw("TTL")? && !self.try_kw("TIMESTAMP")? {
                return Err(GiveUp);
            }
            self.int_value()?;
            if !self.try_kw("AND")? {
                return Ok(());
            }
        }
    }

    /// An INTEGER token or a client marker (LIMIT, TTL, TIMESTAMP).
    fn int_value(&mut self) -> FResult<()> {
        if self.client_marker()? {
            return Ok(());
        }
        let t = self.c.token()?.ok_or(GiveUp)?;
        if t.kind != TokenKind::Integer {
            return Err(GiveUp);
        }
        let lit = Literal::Integer(self.c.text(t.start, t.end));
        self.literal_slot(t.start, t.end, lit);
        Ok(())
    }

    /// `EXISTS`, `NOT EXISTS` or `cond (AND cond)*` after `IF`.
    fn if_clause(&mut self) -> FResult<()> {
        if self.try_kw("NOT")? {
            // `IF not = 1` tests a column named `not`: the parser's business.
            return self.kw("EXISTS");
        }
        if let Some(k) = self.c.peek_keyword("EXISTS")? {
            // `exists` is also a column name: it is the keyword unless a condition follows.
            let mut after = Cursor::new(self.c.src());
            after.set_pos(k.end);
            let condition = match after.peek()? {
                b'=' | b'<' | b'>' | b'!' | b'[' | b'.' => true,
                _ => {
                    after.peek_keyword("IN")?.is_some() || after.peek_keyword("CONTAINS")?.is_some()
                }
            };
            if condition {
                return Err(GiveUp);
            }
            return self.kw("EXISTS");
        }
        loop {
            self.element_ref()?;
            if !self.relation_operator()? {
                if self.try_kw("IN")? {
                    self.in_values()?;
                } else if self.c.peek_keyword("CONTAINS")?.is_some() {
                    self.contains()?;
                } else {
                    return Err(GiveUp);
                }
            }
            if !self.try_kw("AND")? {
                return Ok(());
            }
        }
    }

    /// A column named in DELETE or an LWT condition (element and field access are left to
    /// the parser).
    fn element_ref(&mut self) -> FResult<()> {
        self.name(Piece::Name)?;
        if matches!(self.c.peek()?, b'[' | b'.') {
            return Err(GiveUp);
        }
        Ok(())
    }

    /// `relation (AND relation)*` with single-column relations.
    fn where_clause(&mut self) -> FResult<()> {
        loop {
            self.name(Piece::Name)?;
            // `token(...)`, a function call or worse.
            if self.c.peek()? == b'(' {
                return Err(GiveUp);
            }
            self.single_column_rhs()?;
            if !self.try_kw("AND")? {
                return Ok(());
            }
        }
    }

    /// A comparison operator and its term, if one comes next.
    fn relation_operator(&mut self) -> FResult<bool> {
        match self.c.peek()? {
            b'=' => self.punct(b'=', Piece::Word)?,
            b'<' | b'>' | b'!' => {
                let t = self.c.token()?.ok_or(GiveUp)?;
                if !is_relop(t.kind) {
                    return Err(GiveUp);
                }
                self.copy(t, Piece::Word);
            }
            _ => return Ok(false),
        }
        self.value_term(false)?;
        Ok(true)
    }

    /// What follows the column of a single-column relation.
    fn single_column_rhs(&mut self) -> FResult<()> {
        if self.relation_operator()? {
            return Ok(());
        }
        if self.try_kw("IN")? {
            self.in_values()
        } else if self.c.peek_keyword("CONTAINS")?.is_some() {
            self.contains()
        } else if self.try_kw("LIKE")? {
            self.value_term(false)
        } else if self.try_kw("BETWEEN")? {
            self.value_term(false)?;
            self.kw("AND")?;
            self.value_term(false)
        } else if self.try_kw("IS")? {
            self.kw("NOT")?;
            self.kw("NULL")
        } else {
            Err(GiveUp)
        }
    }

    /// `CONTAINS [KEY] term`
    fn contains(&mut self) -> FResult<()> {
        self.kw("CONTAINS")?;
        self.try_kw("KEY")?;
        self.value_term(false)
    }

    /// The values after `IN`: a client marker, `()`, or a list of constants, which becomes
    /// one marker bound to the list; a list of one constant stays a list of one term, `(?)`
    /// (the form rule of [`super::form`]).
    fn in_values(&mut self) -> FResult<()> {
        if self.client_marker()? {
            return Ok(());
        }
        let open = self.c.single(b'(')?.ok_or(GiveUp)?;
        if let Some(close) = self.c.single(b')')? {
            self.w.verbatim(open, open + 1, Piece::Open);
            self.w.verbatim(close, close + 1, Piece::Close);
            return Ok(());
        }
        let (mut items, end) = terms::sequence(&mut self.c, b')')?;
        if items.len() == 1 {
            let item = items.pop().ok_or(GiveUp)?;
            self.w.verbatim(open, open + 1, Piece::Open);
            self.literal_slot(open, end - 1, item);
            self.w.verbatim(end - 1, end, Piece::Close);
            return Ok(());
        }
        self.literal_slot(open, end, Literal::List(items));
        Ok(())
    }

    // ---- terms ----------------------------------------------------------------------------

    /// A term where a value is expected: one `?` for a constant or a collection of constants
    /// (`null` only when `null_ok`, else it stays inline), the client's marker as it is.
    /// Anything followed by an arithmetic operator is left to the parser.
    #[inline(always)]
    fn value_term(&mut self, null_ok: bool) -> FResult<()> {
        let start = self.c.peek()?;
        let at = self.c.pos();
        match start {
            b'[' => {
                self.c.set_pos(at + 1);
                let (items, end) = terms::sequence(&mut self.c, b']')?;
                self.value_end()?;
                self.literal_slot(at, end, Literal::List(items));
            }
            b'{' => {
                self.c.set_pos(at + 1);
                let (lit, end) = terms::brace(&mut self.c)?;
                self.value_end()?;
                self.literal_slot(at, end, lit);
            }
            b'?' | b':' => {
                if !self.client_marker()? {
                    return Err(GiveUp);
                }
                self.value_end()?;
            }
            b'\'' => {
                // The most common constant, decoded here: what `constant_literal` makes of a
                // `'...'` token, without looking for `''` a second time.
                let (end, escaped) =
                    scan::scan_doubled_escapes(self.c.src().as_bytes(), at, b'\'').ok_or(GiveUp)?;
                self.c.set_pos(end);
                self.value_end()?;
                let inner = self.c.text(at + 1, end - 1);
                let value = if escaped {
                    Cow::Owned(inner.replace("''", "'"))
                } else {
                    Cow::Borrowed(inner)
                };
                self.literal_slot(at, end, Literal::String(value));
            }
            _ => {
                let t = self.c.token_here()?.ok_or(GiveUp)?;
                let lit = self.literal(t).ok_or(GiveUp)?;
                self.value_end()?;
                if matches!(lit, Literal::Null) && !null_ok {
                    self.w.respell(t.end, "NULL", Piece::Word);
                } else {
                    self.literal_slot(t.start, t.end, lit);
                }
            }
        }
        Ok(())
    }

    /// After a whole value: arithmetic goes to the parser.
    #[inline(always)]
    fn value_end(&mut self) -> FResult<()> {
        if self.c.operator_follows()? {
            return Err(GiveUp);
        }
        Ok(())
    }
}
