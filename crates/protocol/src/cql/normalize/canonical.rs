//! The spacing rule of the canonical text, shared by both normalizer passes: every piece of
//! output has a spacing class, and whether a single space goes before it depends only on that
//! class and the previous one.
//!
//! Single spaces go between tokens, except inside brackets, before commas, semicolons and map
//! colons, around the dot of a qualified name, after the colon of a named marker, and between
//! a callee or a name and the bracket that follows it (`f(`, `c[`).

/// The spacing class of a piece of canonical text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Piece {
    /// `(`, `[`, `{`
    Open,
    /// `)`, `]`, `}`
    Close,
    /// `,`
    Comma,
    /// `;`
    Semi,
    /// `.` of a qualified name or field access.
    Dot,
    /// `:` between a map key (or UDT field) and its value.
    MapColon,
    /// `:` starting a named marker.
    MarkerColon,
    /// A keyword, literal, operator or marker.
    Word,
    /// An identifier that a `(` may follow as a call (inline text).
    Callee,
    /// A column, table or field name.
    Name,
}

/// Whether a space goes between two pieces, as far as their classes decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spacing {
    No,
    Yes,
    /// Yes unless the piece is `(` or `[` (a call or an element access).
    UnlessCallOrIndex,
    /// Yes unless the piece is `[` (an element access).
    UnlessIndex,
}

/// The rule, between a piece of class `last` (`None` at the start) and one of class `piece`.
const fn rule(last: Option<Piece>, piece: Piece) -> Spacing {
    match (last, piece) {
        (None, _) => Spacing::No,
        // After a dot only a name is glued: `a. ..` must not become the token `...`.
        (Some(Piece::Dot), Piece::Name | Piece::Callee) => Spacing::No,
        (Some(Piece::Dot), _) => Spacing::Yes,
        (Some(Piece::Open | Piece::MarkerColon), _) => Spacing::No,
        (_, Piece::Close | Piece::Comma | Piece::Semi | Piece::MapColon) => Spacing::No,
        (Some(Piece::Name | Piece::Callee | Piece::Close), Piece::Dot) => Spacing::No,
        (Some(Piece::Callee), Piece::Open) => Spacing::UnlessCallOrIndex,
        (Some(Piece::Name | Piece::Close), Piece::Open) => Spacing::UnlessIndex,
        _ => Spacing::Yes,
    }
}

const PIECES: [Piece; 10] = [
    Piece::Open,
    Piece::Close,
    Piece::Comma,
    Piece::Semi,
    Piece::Dot,
    Piece::MapColon,
    Piece::MarkerColon,
    Piece::Word,
    Piece::Callee,
    Piece::Name,
];

/// The state of the rule between pieces: the class of the last piece written, or none yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Last(u8);

impl Last {
    /// Nothing written yet.
    pub(super) const START: Last = Last(0);

    /// After a piece of class `piece`.
    #[inline(always)]
    pub(super) fn after(piece: Piece) -> Last {
        Last(piece as u8 + 1)
    }

    #[cfg(test)]
    fn piece(self) -> Option<Piece> {
        self.0.checked_sub(1).map(|i| PIECES[usize::from(i)])
    }
}

/// For each [`Last`], bit `p` set when [`rule`] says `Yes` before class `p`.
static YES: [u16; 16] = table(Spacing::Yes);
/// For each [`Last`], bit `p` set when [`rule`] says `UnlessCallOrIndex` before class `p`.
static UNLESS_CALL: [u16; 16] = table(Spacing::UnlessCallOrIndex);
/// For each [`Last`], bit `p` set when [`rule`] says `UnlessIndex` before class `p`.
static UNLESS_INDEX: [u16; 16] = table(Spacing::UnlessIndex);

const fn table(value: Spacing) -> [u16; 16] {
    let mut t = [0u16; 16];
    let mut l = 0;
    while l <= PIECES.len() {
        let last = if l == 0 { None } else { Some(PIECES[l - 1]) };
        let mut p = 0;
        while p < PIECES.len() {
            let r = rule(last, PIECES[p]) as u8;
            if r == value as u8 {
                t[l] |= 1 << (PIECES[p] as u8);
            }
            p += 1;
        }
        l += 1;
    }
    t
}

/// True if a space goes between the pieces so far (`last`) and a piece of class `piece` whose
/// text starts with the byte `first`.
#[inline(always)]
pub(super) fn space_after(last: Last, piece: Piece, first: u8) -> bool {
    let row = usize::from(last.0 & 15);
    let bit = 1u16 << (piece as u8);
    if YES[row] & bit != 0 {
        return true;
    }
    if UNLESS_CALL[row] & bit != 0 {
        return first != b'(' && first != b'[';
    }
    UNLESS_INDEX[row] & bit != 0 && first != b'['
}

/// True if a space goes between a piece of class `last` and a piece of class `piece` whose
/// text starts with the byte `first`.
#[inline]
pub(super) fn space_before(last: Option<Piece>, piece: Piece, first: u8) -> bool {
    space_after(last.map_or(Last::START, Last::after), piece, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule as first written (a match over the pair and the text), kept as the reference.
    fn reference(last: Option<Piece>, piece: Piece, text: &str) -> bool {
        let space = match (last, piece) {
            (None, _) => false,
            (Some(Piece::Open | Piece::Dot | Piece::MarkerColon), _) => false,
            (_, Piece::Close | Piece::Comma | Piece::Semi | Piece::MapColon) => false,
            (Some(Piece::Name | Piece::Callee | Piece::Close), Piece::Dot) => false,
            (Some(Piece::Callee), Piece::Open) => text != "(" && text != "[",
            (Some(Piece::Name | Piece::Close), Piece::Open) => text != "[",
            _ => true,
        };
        space || (last == Some(Piece::Dot) && !matches!(piece, Piece::Name | Piece::Callee))
    }

    #[test]
    fn states_round_trip() {
        assert_eq!(Last::START.piece(), None);
        for p in PIECES {
            assert_eq!(Last::after(p).piece(), Some(p));
        }
    }

    #[test]
    fn table_matches_the_rule() {
        let lasts = std::iter::once(None).chain(PIECES.iter().copied().map(Some));
        for last in lasts {
            for piece in PIECES {
                for text in ["(", "[", "{", ")", "x", ",", ";", ".", ":", "?"] {
                    let first = text.as_bytes()[0];
                    assert_eq!(
                        space_before(last, piece, first),
                        reference(last, piece, text),
                        "{last:?} {piece:?} {text}"
                    );
                }
            }
        }
    }
}
