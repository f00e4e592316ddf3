//! The CQL normalizer: turns a DML statement with inline literals into a canonical *shape*
//! (the text with `?` markers) plus the literals taken out of it, in marker order.
//!
//! What becomes a marker follows `shared/docs/cql-facts.md` sections 2 and 3: a literal is
//! replaced only where the server accepts a bind marker *and* the marker means exactly what the
//! literal meant. Everything else stays inline:
//! - the selection clause and GROUP BY (the server cannot type a marker there, and result column
//!   names would change);
//! - operands of arithmetic and unary minus, function arguments (a literal picks an overload by
//!   its kind, a marker does not), type casts;
//! - `null` except as a whole INSERT value or a whole `SET c = null` (elsewhere a literal null
//!   and a bound null are not known to behave the same: `WHERE k = null`, `IF c = null`, list
//!   elements);
//! - a list, set or map literal that contains anything but literals (Cassandra 5 rejects
//!   markers inside collection literals); a tuple or UDT literal with non-literal parts has its
//!   literal elements replaced one by one instead.
//!
//! `IN (l1, l2, ...)` made only of literals becomes `IN ?` bound to one list, so every list
//! length shares one prepared statement. `c = c -1` (lexed as `c`, `-1`) and `c = c 5` become
//! `c = c + ?` bound to the integer, which is what the server makes of them.
//!
//! Each replacement swaps a `value` of the grammar for a marker, which the grammar accepts in
//! the same places, so the shape parses exactly when the original does; the proxy still falls
//! back to the original text whenever PREPARE fails or reports a different number of markers.
//!
//! The canonical text drops comments and trailing semicolons, writes single spaces between
//! tokens (none inside brackets, before commas, around dots of qualified names), upper-cases
//! the keywords the normalizer recognizes, and keeps identifiers exactly as written. Two
//! statements that differ only in replaced literal values give the same text byte for byte.
//!
//! # Two passes, one answer
//! `fast.rs` normalizes the forms applications send over and over in one pass over the bytes,
//! without a token vector, copying the canonical text from the statement in runs; it gives up
//! on anything else, and `parser.rs` (tokens first, then recursive descent over the whole
//! grammar) decides. Where the single pass answers, its answer is the parser's: checked by
//! differential property tests (`differential_tests.rs`) and in the `normalize` fuzz target.

mod canonical;
mod constant;
mod cursor;
#[cfg(test)]
mod differential_tests;
mod fast;
mod form;
mod lane;
mod parser;
mod terms;
#[cfg(test)]
mod tests;
mod writer;

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use md5::{Digest, Md5};
use thiserror::Error;

use crate::cql::lexer::{keyword_eq, LexError, Token, TokenKind};
use crate::cql::Literal;

/// What a statement is, from its first keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatementKind {
    /// `SELECT`
    Select,
    /// `INSERT`
    Insert,
    /// `UPDATE`
    Update,
    /// `DELETE`
    Delete,
    /// `BEGIN [UNLOGGED | COUNTER] BATCH ... APPLY BATCH`
    Batch,
    /// `USE`
    Use,
    /// Anything else: DDL, DCL, DESCRIBE, TRUNCATE, unknown, empty.
    Other,
}

impl StatementKind {
    /// A short lower-case name, for metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            StatementKind::Select => "select",
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
            StatementKind::Batch => "batch",
            StatementKind::Use => "use",
            StatementKind::Other => "other",
        }
    }

    /// The kind a statement starting with `first` has.
    pub fn of_first_token(first: Option<&Token<'_>>) -> Self {
        let Some(t) = first else {
            return StatementKind::Other;
        };
        if t.kind != TokenKind::Ident {
            return StatementKind::Other;
        }
        let w = t.text;
        if keyword_eq(w, "SELECT") {
            StatementKind::Select
        } else if keyword_eq(w, "INSERT") {
            StatementKind::Insert
        } else if keyword_eq(w, "UPDATE") {
            StatementKind::Update
        } else if keyword_eq(w, "DELETE") {
            StatementKind::Delete
        } else if keyword_eq(w, "BEGIN") {
            StatementKind::Batch
        } else if keyword_eq(w, "USE") {
            StatementKind::Use
        } else {
            StatementKind::Other
        }
    }
}

/// A normalized statement: canonical text with markers, and what each marker stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape<'a> {
    /// The statement kind (never `Use` or `Other`).
    pub kind: StatementKind,
    /// The canonical text, with `?` for every replaced literal and the client's own markers
    /// (`?`, `:name`) kept.
    pub text: String,
    /// One entry per marker in `text`, in textual order (which is the server's bind order).
    pub slots: Vec<Slot<'a>>,
}

/// What one marker of a [`Shape`] stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot<'a> {
    /// A literal the normalizer replaced (an `IN` list as [`Literal::List`]).
    Literal(Literal<'a>),
    /// The client's own positional `?`; `index` counts the client's positional markers from 0.
    ClientMarker {
        /// Position among the client's positional markers, i.e. among the QUERY's values.
        index: u16,
    },
    /// The client's own `:name` marker; `name` is the identifier as written after the colon
    /// (a quoted name keeps its quotes, see [`Slot::resolved_name`]).
    ClientNamed {
        /// The name as written.
        name: &'a str,
    },
}

impl Slot<'_> {
    /// For [`Slot::ClientNamed`], the name as the server resolves it: unquoted names
    /// lower-cased, quoted ones unescaped. `None` for other slots.
    pub fn resolved_name(&self) -> Option<Cow<'_, str>> {
        match self {
            Slot::ClientNamed { name } => Some(resolve_identifier(name)),
            _ => None,
        }
    }
}

impl Shape<'_> {
    /// MD5 of the keyspace bytes (if any) followed by the text: the shape's fingerprint, how
    /// Cassandra derives a prepared id for an unqualified statement (see [`fingerprint`]).
    ///
    /// About 1,400 instructions for a 150-byte text: the hot path looks shapes up by
    /// [`Shape::hash`] instead, and computes this only for a shape it has not seen.
    pub fn fingerprint(&self, keyspace: Option<&str>) -> [u8; 16] {
        fingerprint(keyspace, &self.text)
    }

    /// The key a cache files this shape under in `keyspace` (see [`ShapeHash`]).
    #[inline]
    pub fn hash(&self, keyspace: Option<&str>) -> ShapeHash {
        ShapeHash::of(keyspace, &self.text)
    }

    /// How many slots are literals the normalizer replaced.
    pub fn literal_count(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Literal(_)))
            .count()
    }

    /// How many slots are the client's own markers (positional or named).
    pub fn client_marker_count(&self) -> usize {
        self.slots.len() - self.literal_count()
    }
}

/// MD5 of the keyspace bytes (if any) followed by the shape text: the fingerprint of a shape.
pub fn fingerprint(keyspace: Option<&str>, text: &str) -> [u8; 16] {
    let mut h = Md5::new();
    if let Some(ks) = keyspace {
        h.update(ks.as_bytes());
    }
    h.update(text.as_bytes());
    h.finalize().into()
}

/// The key a cache files a shape under in a keyspace: a 64-bit hash of the keyspace and the
/// text, seeded at random once per process.
///
/// A map key, not an identity: a cache must still compare the text and keyspace on a hit (as
/// `autoprep-cache` does), so two shapes with the same hash can only make the second pass
/// through, never run the other statement. The random seed keeps clients from choosing
/// collisions (which MD5, the [`fingerprint`], would not), and the value means nothing outside
/// the process. About 100 instructions for a 150-byte text, against 1,400 for MD5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShapeHash(pub u64);

impl ShapeHash {
    /// The hash of `text` in `keyspace`.
    pub fn of(keyspace: Option<&str>, text: &str) -> ShapeHash {
        static SEED: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
        // Hashing the pair (each `str` with its terminator) keeps `("ab", "c")` and
        // `("a", "bc")` apart.
        ShapeHash(
            SEED.get_or_init(Default::default)
                .hash_one((keyspace, text)),
        )
    }
}

/// Why a statement is not rewritten. The statement then goes to the server unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotCandidate {
    /// `USE ks`, with the keyspace as the server resolves it (unquoted lower-cased, quoted
    /// unescaped).
    Use {
        /// The keyspace name.
        keyspace: String,
    },
    /// DDL, DCL, any other non-DML statement, or an empty one.
    NotDml,
    /// DML with no literal that could be replaced.
    NoLiterals {
        /// The statement kind.
        kind: StatementKind,
    },
    /// DML with a construct the normalizer does not fully understand, or invalid CQL.
    Unsupported {
        /// The statement kind.
        kind: StatementKind,
        /// Byte offset of the token where the normalizer gave up.
        offset: usize,
        /// A fixed description, safe as a metric label (never user data).
        reason: &'static str,
    },
}

impl NotCandidate {
    /// The statement kind.
    pub fn kind(&self) -> StatementKind {
        match self {
            NotCandidate::Use { .. } => StatementKind::Use,
            NotCandidate::NotDml => StatementKind::Other,
            NotCandidate::NoLiterals { kind } | NotCandidate::Unsupported { kind, .. } => *kind,
        }
    }

    /// A fixed short reason, for metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            NotCandidate::Use { .. } => "use",
            NotCandidate::NotDml => "not dml",
            NotCandidate::NoLiterals { .. } => "no literals",
            NotCandidate::Unsupported { reason, .. } => reason,
        }
    }
}

/// The result of [`normalize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normalized<'a> {
    /// A rewritable statement.
    Shape(Shape<'a>),
    /// A statement to pass through, and why.
    NotCandidate(NotCandidate),
}

/// Why a text could not be normalized at all (it is then passed through).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum NormalizeError {
    /// The text is not valid UTF-8 or not lexically valid CQL.
    #[error(transparent)]
    Lex(#[from] LexError),
}

/// Normalizes the text of a QUERY (raw bytes, checked for UTF-8).
pub fn normalize(query: &[u8]) -> Result<Normalized<'_>, NormalizeError> {
    normalize_with(query, String::new(), Vec::new())
}

/// [`normalize`] writing the shape into the buffers of an earlier shape (see
/// [`recycle_slots`]), so that a caller that keeps them allocates nothing per statement.
pub fn normalize_with<'a>(
    query: &'a [u8],
    text: String,
    slots: Vec<Slot<'a>>,
) -> Result<Normalized<'a>, NormalizeError> {
    let src = std::str::from_utf8(query).map_err(|e| LexError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    normalize_str_with(src, text, slots)
}

/// Normalizes CQL text.
pub fn normalize_str(src: &str) -> Result<Normalized<'_>, NormalizeError> {
    normalize_str_with(src, String::new(), Vec::new())
}

fn normalize_str_with<'a>(
    src: &'a str,
    mut text: String,
    mut slots: Vec<Slot<'a>>,
) -> Result<Normalized<'a>, NormalizeError> {
    // Room for the usual shape: `with_capacity` on fresh buffers is cheaper than `reserve`.
    let room = src.len() + 16;
    if text.capacity() == 0 {
        text = String::with_capacity(room);
    } else {
        text.clear();
        text.reserve(room);
    }
    let marker_room = src.len() / 16 + 4;
    if slots.capacity() == 0 {
        slots = Vec::with_capacity(marker_room);
    } else {
        slots.clear();
        slots.reserve(marker_room);
    }
    // The single pass handles the common statements; the full parser everything else.
    match fast::normalize(src, text, slots) {
        Ok(n) => Ok(n),
        Err((text, slots)) => parser::normalize(src, text, slots),
    }
}

/// Empties the slots of a finished shape for [`normalize_with`], keeping their allocation
/// whatever statement they borrowed from.
pub fn recycle_slots<'b>(mut slots: Vec<Slot<'_>>) -> Vec<Slot<'b>> {
    slots.clear();
    // An in-place collect of an empty vector into one of the same layout reuses its buffer;
    // the `filter_map` is what changes the lifetime.
    #[allow(clippy::unnecessary_filter_map)]
    slots.into_iter().filter_map(|_| None).collect()
}

/// An identifier as the server resolves it: a quoted one (`"..."`) unescaped, an unquoted one
/// lower-cased.
pub fn resolve_identifier(text: &str) -> Cow<'_, str> {
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        if inner.as_bytes().contains(&b'"') {
            Cow::Owned(inner.replace("\"\"", "\""))
        } else {
            Cow::Borrowed(inner)
        }
    } else if text.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    }
}

/// What each pass makes of `src`, for the differential tests and the fuzz target: the single
/// pass (`None` where it leaves the statement to the full parser) and the full parser.
#[doc(hidden)]
pub fn both_passes(
    src: &str,
) -> (
    Option<Normalized<'_>>,
    Result<Normalized<'_>, NormalizeError>,
) {
    let fast = fast::normalize(src, String::new(), Vec::new()).ok();
    (fast, parser::normalize(src, String::new(), Vec::new()))
}
