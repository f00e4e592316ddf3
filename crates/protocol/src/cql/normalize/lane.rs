//! The canonical INSERT lane: `INSERT INTO t (c1, c2) VALUES (v1, v2)` written exactly in the
//! canonical layout (upper-case keywords, single spaces, `, ` between items) is checked byte
//! by byte and needs no per-token bookkeeping: its shape text is the statement up to
//! `VALUES (` followed by `?, ?, ...)`.
//!
//! Applications build their INSERTs this way, so most of them take this lane. A head written
//! otherwise sends the statement down the general single pass (`fast.rs`) from the start; a
//! value other than a constant, `null`, a collection of constants or `?` (a named marker, a
//! call, arithmetic) hands the values from there on to it. Every check here is the single pass's rule for the same tokens (names
//! and values are lexed by the lexer's own functions), so the answer is the same; the
//! differential tests and the fuzz target cover the lane with the rest of the single pass.

use std::borrow::Cow;

use super::constant::constant_literal;
use super::cursor::Cursor;
use super::{terms, Slot};
use crate::cql::lexer::{keyword_eq, scan, Token, TokenKind};
use crate::cql::Literal;

/// The head of a canonical INSERT taken by the lane.
pub(super) struct Head {
    /// `src[..prefix]` is the shape text up to the first marker (`... VALUES (`).
    pub(super) prefix: usize,
    /// How many values, from the first, became markers (one slot each, pushed).
    pub(super) values: usize,
    /// How many of them are the client's own `?`.
    pub(super) client_markers: usize,
    /// Where the lane stopped: past the `)` closing the values, or at the first value it
    /// leaves to the single pass (after `, ` or the opening parenthesis).
    pub(super) stop: Stop,
}

/// Where the lane stopped.
pub(super) enum Stop {
    /// Every value taken; the offset just past the closing `)`.
    Done(usize),
    /// The offset of the first value not taken.
    At(usize),
}

/// Checks `src` for a canonical INSERT head and pushes one slot per value taken; `None` (with
/// `slots` as it was) when the head is not written that way.
pub(super) fn insert_head<'a>(src: &'a str, slots: &mut Vec<Slot<'a>>) -> Option<Head> {
    let before = slots.len();
    let head = head(src, slots);
    if head.is_none() {
        slots.truncate(before);
    }
    head
}

fn head<'a>(src: &'a str, slots: &mut Vec<Slot<'a>>) -> Option<Head> {
    let b = src.as_bytes();
    let mut table = b.starts_with(b"INSERT INTO ").then_some(12)?;
    let mut i = name(b, table)?;
    if b.get(i) == Some(&b'.') {
        table = i + 1;
        i = name(b, table)?;
    }
    // `expr (` is the parser's business (custom index expressions).
    if keyword_eq(src.get(table..i)?, "EXPR") {
        return None;
    }
    i = after(b, i, b" (")?;
    loop {
        i = name(b, i)?;
        match separator(b, i)? {
            (next, false) => i = next,
            (next, true) => {
                i = next;
                break;
            }
        }
    }
    let prefix = after(b, i, b" VALUES (")?;
    i = prefix;
    let mut head = Head {
        prefix,
        values: 0,
        client_markers: 0,
        stop: Stop::At(i),
    };
    loop {
        // Any other value goes to the single pass from here.
        let taken = value(src, i).and_then(|(v, end)| Some((v, separator(b, end)?)));
        let Some((v, (next, closed))) = taken else {
            head.stop = Stop::At(i);
            return Some(head);
        };
        slots.push(match v {
            Some(lit) => Slot::Literal(lit),
            None => {
                let index = u16::try_from(head.client_markers).ok()?;
                head.client_markers += 1;
                Slot::ClientMarker { index }
            }
        });
        head.values += 1;
        if closed {
            head.stop = Stop::Done(next);
            return Some(head);
        }
        i = next;
    }
}

/// The offset past `text` if it is at `i`.
#[inline]
fn after(b: &[u8], i: usize, text: &[u8]) -> Option<usize> {
    b.get(i..)?.starts_with(text).then_some(i + text.len())
}

/// After an item: `, ` (the offset of the next item, `false`) or `)` (past it, `true`).
#[inline]
fn separator(b: &[u8], i: usize) -> Option<(usize, bool)> {
    match (b.get(i), b.get(i + 1)) {
        (Some(b','), Some(b' ')) => Some((i + 2, false)),
        (Some(b')'), _) => Some((i + 1, true)),
        _ => None,
    }
}

/// A name at `i` (a quoted identifier, or an identifier other than `null`); the offset past
/// it. `None` also where the byte after the word is `-`, which no name of the head is followed
/// by (the lane gives up there either way).
#[inline(always)]
fn name(b: &[u8], i: usize) -> Option<usize> {
    let first = *b.get(i)?;
    if first == b'"' {
        return scan::scan_doubled(b, i, b'"');
    }
    if !first.is_ascii_alphabetic() {
        return None;
    }
    let end = scan::ident_end(b, i + 1);
    // After a name the head wants `.`, ` ` , `,` or `)`: with a `-` next (a UUID such as
    // `abcdef01-...`, or a word and a minus) the lane gives up whatever the word is.
    if scan::at(b, end) == b'-' {
        return None;
    }
    // Without a `-` next, `scan::word` can only make something else than an identifier of a
    // word starting with `P` (an ISO duration) or of a constant word (`true`, `false`, `NaN`,
    // `Infinity`: 3, 4, 5 or 8 letters starting with t, f, n or i); `null` has 4 and starts
    // with n. Any other word is a name ending at `end`.
    let constant_like =
        matches!(first | 0x20, b't' | b'f' | b'n' | b'i') && matches!(end - i, 3 | 4 | 5 | 8);
    if first == b'P' || constant_like {
        return word_name(b, i);
    }
    Some(end)
}

/// [`name`] for the words it does not settle on their length and first letter: the lexer's
/// classification in full.
#[inline(never)]
fn word_name(b: &[u8], i: usize) -> Option<usize> {
    let (kind, end) = scan::word(b, i).ok()?;
    let null = end - i == 4 && b[i..end].eq_ignore_ascii_case(b"null");
    (kind == TokenKind::Ident && !null).then_some(end)
}

/// A whole INSERT value at `i`: a constant, `null` or a collection of constants (its literal,
/// `Some`), or the client's `?` (`None`); with the offset past it.
#[inline]
fn value(src: &str, i: usize) -> Option<(Option<Literal<'_>>, usize)> {
    let b = src.as_bytes();
    match b.get(i)? {
        b'?' => Some((None, i + 1)),
        b'[' | b'{' => collection(src, i).map(|(lit, end)| (Some(lit), end)),
        _ => constant(src, i).map(|(lit, end)| (Some(lit), end)),
    }
}

/// A list, set or map of constants at `i`; the literal and the offset past it.
#[inline(never)]
fn collection(src: &str, i: usize) -> Option<(Literal<'_>, usize)> {
    let mut c = Cursor::at(src, i + 1);
    if src.as_bytes().get(i) == Some(&b'[') {
        if let Some((items, end)) = canonical_list(src, i) {
            return Some((Literal::List(items), end));
        }
        let (items, end) = terms::sequence(&mut c, b']').ok()?;
        return Some((Literal::List(items), end));
    }
    terms::brace(&mut c).ok()
}

/// A list of constants at `i` written canonically (`[e, e, ...]`: one `, ` between elements,
/// nothing else between tokens): the elements and the offset past `]`. `None` leaves the list
/// to [`terms::sequence`], which gives the same answer wherever this one gives one: each
/// element is lexed by the same `scan::token` at the same offset (no trivia can come before
/// it here) and must be a constant, as in [`terms::element`].
#[inline(always)]
fn canonical_list(src: &str, i: usize) -> Option<(Vec<Literal<'_>>, usize)> {
    let b = src.as_bytes();
    let mut j = i + 1;
    let mut items = Vec::with_capacity(4);
    loop {
        // Whitespace, a comment or the end: the general path.
        match scan::at(b, j) {
            b' ' | b'\t' | b'\r' | b'\n' | b'/' | 0 => return None,
            b'-' if scan::at(b, j + 1) == b'-' => return None,
            _ => {}
        }
        let (kind, end) = scan::token(src, j).ok()?;
        if !kind.is_constant() {
            return None;
        }
        items.push(constant_literal(&Token {
            kind,
            text: src.get(j..end)?,
            offset: j,
        })?);
        match (scan::at(b, end), scan::at(b, end + 1)) {
            (b',', b' ') => j = end + 2,
            (b']', _) => return Some((items, end + 1)),
            _ => return None,
        }
    }
}

/// A constant or `null` at `i`; the literal and the offset past it.
#[inline]
fn constant(src: &str, i: usize) -> Option<(Literal<'_>, usize)> {
    let b = src.as_bytes();
    if b.get(i) == Some(&b'\'') {
        let (end, escaped) = scan::scan_doubled_escapes(b, i, b'\'')?;
        let inner = src.get(i + 1..end - 1)?;
        let value = if escaped {
            Cow::Owned(inner.replace("''", "'"))
        } else {
            Cow::Borrowed(inner)
        };
        return Some((Literal::String(value), end));
    }
    let (kind, end) = scan::token(src, i).ok()?;
    if !(kind.is_constant() || kind == TokenKind::Ident) {
        return None;
    }
    let token = Token {
        kind,
        text: src.get(i..end)?,
        offset: i,
    };
    // An identifier other than `null` is not a value.
    Some((constant_literal(&token)?, end))
}
