//! Literal values found in CQL text, borrowed from the statement where possible.
//!
//! A literal keeps the token text (not a parsed number) so that the encoder can convert it
//! exactly as the server would once the bind variable's type is known.

use std::borrow::Cow;

/// One CQL literal (a `constant` or a collection / tuple / UDT literal made only of literals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal<'a> {
    /// `'...'` or `$$...$$`, unescaped (`''` became `'`).
    String(Cow<'a, str>),
    /// An INTEGER token as written, with its adjacent minus: `-12`, `007`.
    Integer(&'a str),
    /// A FLOAT token as written: `1.`, `1.5`, `-1.5e-3`, `1E+5`.
    Float(&'a str),
    /// `NaN` or `-NaN` (any case).
    NaN,
    /// `Infinity` or `-Infinity` (any case).
    Infinity {
        /// True for `-Infinity`.
        negative: bool,
    },
    /// `true` / `false` (any case).
    Boolean(bool),
    /// An unquoted 8-4-4-4-12 UUID as written (any case).
    Uuid(&'a str),
    /// A blob constant: the hex digits after `0x` (possibly empty, possibly odd-length).
    Hex(&'a str),
    /// A duration in unit form (`1h30m`, `-2d`) or ISO form (`P1Y2M`, `PT4H`, `P0001-02-03T04:05:06`).
    Duration(&'a str),
    /// `null`.
    Null,
    /// `[a, b, ...]`: a list or a vector.
    List(Vec<Literal<'a>>),
    /// `{a, b, ...}`.
    Set(Vec<Literal<'a>>),
    /// `{k: v, ...}`; `{}` is an empty map, which the server also accepts for a set.
    Map(Vec<(Literal<'a>, Literal<'a>)>),
    /// `(a, b, ...)`.
    Tuple(Vec<Literal<'a>>),
    /// `{field: v, ...}` with identifier keys, as the server would resolve them (unquoted
    /// identifiers lower-cased, quoted ones unescaped).
    Udt(Vec<(Cow<'a, str>, Literal<'a>)>),
}
