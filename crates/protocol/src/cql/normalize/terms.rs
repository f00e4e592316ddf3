//! Collections of constants (`[...]`, `{...}`, the items of `IN (...)`) read at a
//! [`Cursor`], for the single pass and the canonical INSERT lane: each becomes one literal.
//! Mirrors the parser's `literal_items` and `literal_brace` restricted to constant elements
//! (not `null`, not nested); anything else gives up.

use super::constant::constant_literal;
use super::cursor::{Cursor, FResult, GiveUp};
use crate::cql::lexer::Token;
use crate::cql::Literal;

/// One element: a constant other than `null`; moves past it.
#[inline(always)]
pub(super) fn element<'a>(c: &mut Cursor<'a>) -> FResult<Literal<'a>> {
    let t = c.token()?.ok_or(GiveUp)?;
    if !t.kind.is_constant() {
        return Err(GiveUp);
    }
    constant_literal(&Token {
        kind: t.kind,
        text: c.text(t.start, t.end),
        offset: t.start,
    })
    .ok_or(GiveUp)
}

/// Elements up to `close` (the opening bracket passed), each followed by `,` or `close`; the
/// elements and the offset past `close`, having moved past it.
pub(super) fn sequence<'a>(c: &mut Cursor<'a>, close: u8) -> FResult<(Vec<Literal<'a>>, usize)> {
    if let Some(at) = c.single(close)? {
        return Ok((Vec::new(), at + 1));
    }
    // Room for short lists at once (growing from empty costs a reallocation path).
    let mut items = Vec::with_capacity(4);
    loop {
        items.push(element(c)?);
        if c.single(b',')?.is_some() {
            continue;
        }
        let at = c.single(close)?.ok_or(GiveUp)?;
        return Ok((items, at + 1));
    }
}

/// `{}`, a set or a map of constants (a UDT literal is not), the `{` passed; the literal and
/// the offset past `}`, having moved past it.
pub(super) fn brace<'a>(c: &mut Cursor<'a>) -> FResult<(Literal<'a>, usize)> {
    if let Some(at) = c.single(b'}')? {
        return Ok((Literal::Map(Vec::new()), at + 1));
    }
    let first = element(c)?;
    if c.single(b':')?.is_none() {
        let mut items = vec![first];
        loop {
            if let Some(at) = c.single(b'}')? {
                return Ok((Literal::Set(items), at + 1));
            }
            c.single(b',')?.ok_or(GiveUp)?;
            items.push(element(c)?);
        }
    }
    let mut entries = Vec::new();
    let mut key = first;
    loop {
        let value = element(c)?;
        entries.push((key, value));
        if let Some(at) = c.single(b'}')? {
            return Ok((Literal::Map(entries), at + 1));
        }
        c.single(b',')?.ok_or(GiveUp)?;
        key = element(c)?;
        c.single(b':')?.ok_or(GiveUp)?;
    }
}
