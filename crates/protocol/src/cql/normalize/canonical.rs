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

/// [`rule`] for every pair, indexed by `last` (0 for none, else the class + 1) and `piece`.
static RULE: [[Spacing; 10]; 11] = {
    let mut t = [[Spacing::No; 10]; 11];
    let mut p = 0;
    while p < PIECES.len() {
        t[0][PIECES[p] as usize] = rule(None, PIECES[p]);
        let mut l = 0;
        while l < PIECES.len() {
            t[PIECES[l] as usize + 1][PIECES[p] as usize] = rule(Some(PIECES[l]), PIECES[p]);
            l += 1;
        }
        p += 1;
    }
    t
};

/// True if a space goes between a piece of class `last` and a piece of class `piece` whose
/// text starts with the byte `first`.
#[inline]
pub(super) fn space_before(last: Option<Piece>, piece: Piece, first: u8) -> bool {
    let row = match last {
        None => 0,
        Some(l) => l as usize + 1,
    };
    match RULE[row][piece as usize] {
        Spacing::No => false,
        Spacing::Yes => true,
        Spacing::UnlessCallOrIndex => first != b'(' && first != b'[',
        Spacing::UnlessIndex => first != b'[',
    }
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
