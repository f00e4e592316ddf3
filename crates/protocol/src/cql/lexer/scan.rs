//! The byte-level scanning behind [`super::Lexer`]: free functions over the input bytes, so
//! that the single-pass normalizer can use exactly the lexer's rules at a position without
//! building tokens (`normalize/cursor.rs`).
//!
//! Every function takes the offset where it starts and returns the offset where it stopped;
//! reading past the end gives the byte 0, which no token class contains (loops that scan string
//! contents check the length explicitly, so a NUL in the input is never taken for the end).

use super::{LexError, TokenKind};

/// What a byte starts, for the dispatch of [`next`]: one table load and one jump.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// An ASCII letter: a word.
    Letter,
    /// An ASCII digit: a number, UUID, blob or duration.
    Digit,
    /// A one-byte token whatever follows: its kind is in `SINGLE_KIND`.
    Single,
    /// `'`
    Quote,
    /// `"`
    DoubleQuote,
    /// `$`
    Dollar,
    /// `-` (not starting a comment)
    Minus,
    /// `/` (not starting a comment)
    Slash,
    /// `.`
    Dot,
    /// `<`, `>`, `!`, `+`: an operator, maybe followed by `=`.
    Compare,
    /// Anything else: no token starts with it.
    Other,
}

static START: [Start; 256] = {
    let mut t = [Start::Other; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = match c {
            b'a'..=b'z' | b'A'..=b'Z' => Start::Letter,
            b'0'..=b'9' => Start::Digit,
            b'(' | b')' | b'[' | b']' | b'{' | b'}' | b',' | b'?' | b'*' | b';' | b':' | b'%'
            | b'=' => Start::Single,
            b'\'' => Start::Quote,
            b'"' => Start::DoubleQuote,
            b'$' => Start::Dollar,
            b'-' => Start::Minus,
            b'/' => Start::Slash,
            b'.' => Start::Dot,
            b'<' | b'>' | b'!' | b'+' => Start::Compare,
            _ => Start::Other,
        };
        b += 1;
    }
    t
};

/// The kind of each [`Start::Single`] byte (`Semicolon` elsewhere, never read).
static SINGLE_KIND: [TokenKind; 256] = {
    let mut t = [TokenKind::Semicolon; 256];
    t[b'(' as usize] = TokenKind::LParen;
    t[b')' as usize] = TokenKind::RParen;
    t[b'[' as usize] = TokenKind::LBracket;
    t[b']' as usize] = TokenKind::RBracket;
    t[b'{' as usize] = TokenKind::LBrace;
    t[b'}' as usize] = TokenKind::RBrace;
    t[b',' as usize] = TokenKind::Comma;
    t[b'?' as usize] = TokenKind::QMark;
    t[b'*' as usize] = TokenKind::Star;
    t[b':' as usize] = TokenKind::Colon;
    t[b'%' as usize] = TokenKind::Percent;
    t[b'=' as usize] = TokenKind::Eq;
    t
};

/// The kind of the one-byte token `b` is whatever follows it (`( ) [ ] { } , ? * ; : % =`),
/// if it is one.
#[inline(always)]
pub(crate) fn single(b: u8) -> Option<TokenKind> {
    (START[usize::from(b)] == Start::Single).then(|| SINGLE_KIND[usize::from(b)])
}

/// Byte classes of the scanning loops.
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

/// True for the bytes of an identifier after its first letter: `[A-Za-z0-9_]`.
#[inline(always)]
pub(crate) fn is_ident_byte(b: u8) -> bool {
    CLASS[usize::from(b)] & IDENT != 0
}

/// The UTF-8 encoding of `µ` (U+00B5), allowed in the duration unit `µs`.
const MICRO: [u8; 2] = [0xC2, 0xB5];

/// The byte at `i`, or 0 past the end.
#[inline(always)]
pub(crate) fn at(bytes: &[u8], i: usize) -> u8 {
    bytes.get(i).copied().unwrap_or(0)
}

/// End of the run of bytes of class `class` starting at `i`.
#[inline(always)]
fn run_end(bytes: &[u8], mut i: usize, class: u8) -> usize {
    // Eight bytes at a time: the end of the run is found without a branch per byte (a
    // mispredicted loop exit per token costs more than the arithmetic).
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let outside = !swar::in_class(word, class) & swar::HIGH;
        if outside != 0 {
            return i + (outside.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let rest = bytes.get(i..).unwrap_or(&[]);
    i + rest
        .iter()
        .position(|&b| CLASS[usize::from(b)] & class == 0)
        .unwrap_or(rest.len())
}

/// End of the run of identifier bytes (`[A-Za-z0-9_]`) starting at `i`.
#[inline(always)]
pub(crate) fn ident_end(bytes: &[u8], i: usize) -> usize {
    run_end(bytes, i, IDENT)
}

/// Byte-class tests on eight bytes at once (SIMD within a register).
mod swar {
    const ONES: u64 = 0x0101_0101_0101_0101;
    pub(super) const HIGH: u64 = 0x8080_8080_8080_8080;

    /// The high bit of each byte of `x` (bytes below 0x80) set where `lo <= byte <= hi`.
    #[inline(always)]
    fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
        // Adding 0x80 - lo sets the high bit exactly when byte >= lo, adding 0x7F - hi sets it
        // exactly when byte > hi; neither carries into the next byte for bytes below 0x80.
        let ge_lo = x.wrapping_add(ONES * u64::from(0x80 - lo));
        let gt_hi = x.wrapping_add(ONES * u64::from(0x7F - hi));
        ge_lo & !gt_hi & HIGH
    }

    /// The high bit of each byte of `word` set where the byte is in `class` (`IDENT` or
    /// `DIGIT` of [`super::CLASS`]).
    #[inline(always)]
    pub(super) fn in_class(word: u64, class: u8) -> u64 {
        let ascii = !word & HIGH;
        let x = word & !HIGH;
        let digit = in_range(x, b'0', b'9');
        if class == super::DIGIT {
            return ascii & digit;
        }
        // Setting bit 5 maps upper-case letters onto lower-case ones (and no other byte into
        // `a..=z`).
        let letter = in_range(x | (ONES * 0x20), b'a', b'z');
        let underscore = in_range(x, b'_', b'_');
        ascii & (digit | letter | underscore)
    }
}

/// Skips whitespace and comments from `pos`; the offset of the next token, or the length.
#[inline(always)]
pub(crate) fn skip_trivia(bytes: &[u8], mut pos: usize) -> Result<usize, LexError> {
    loop {
        match at(bytes, pos) {
            b' ' | b'\t' | b'\r' | b'\n' => pos += 1,
            b'-' if at(bytes, pos + 1) == b'-' => pos = line_comment(bytes, pos)?,
            b'/' => match at(bytes, pos + 1) {
                b'/' => pos = line_comment(bytes, pos)?,
                b'*' => pos = block_comment(bytes, pos)?,
                _ => return Ok(pos),
            },
            _ => return Ok(pos),
        }
    }
}

/// `--` or `//` up to and including a CR or LF (Cassandra requires the line end); the offset
/// past it.
fn line_comment(bytes: &[u8], start: usize) -> Result<usize, LexError> {
    let rest = bytes.get(start + 2..).unwrap_or(&[]);
    match rest.iter().position(|&c| c == b'\n' || c == b'\r') {
        Some(i) => Ok(start + 2 + i + 1),
        None => Err(LexError::UnterminatedComment { offset: start }),
    }
}

/// `/* ... */`, not nested; the offset past it.
fn block_comment(bytes: &[u8], start: usize) -> Result<usize, LexError> {
    let rest = bytes.get(start + 2..).unwrap_or(&[]);
    match rest.windows(2).position(|w| w == b"*/") {
        Some(i) => Ok(start + 2 + i + 2),
        None => Err(LexError::UnterminatedComment { offset: start }),
    }
}

fn unexpected(src: &str, offset: usize) -> LexError {
    let ch = src
        .get(offset..)
        .and_then(|s| s.chars().next())
        .unwrap_or('\u{FFFD}');
    LexError::UnexpectedChar { offset, ch }
}

/// The token starting at `start`, which is not whitespace nor a comment and not the end: its
/// kind and the offset past it.
#[inline(always)]
pub(crate) fn token(src: &str, start: usize) -> Result<(TokenKind, usize), LexError> {
    let bytes = src.as_bytes();
    let b = at(bytes, start);
    let next = at(bytes, start + 1);
    Ok(match START[usize::from(b)] {
        Start::Letter => return word(bytes, start),
        Start::Single => (SINGLE_KIND[usize::from(b)], start + 1),
        Start::Digit => return number(bytes, start, start),
        Start::Quote => {
            let end = scan_doubled(bytes, start, b'\'')
                .ok_or(LexError::UnterminatedString { offset: start })?;
            (TokenKind::String, end)
        }
        Start::DoubleQuote => {
            let end = scan_doubled(bytes, start, b'"')
                .ok_or(LexError::UnterminatedQuotedIdent { offset: start })?;
            (TokenKind::QuotedIdent, end)
        }
        Start::Dollar => {
            if next != b'$' {
                return Err(unexpected(src, start));
            }
            let rest = bytes.get(start + 2..).unwrap_or(&[]);
            match rest.windows(2).position(|w| w == b"$$") {
                Some(i) => (TokenKind::String, start + 2 + i + 2),
                None => return Err(LexError::UnterminatedString { offset: start }),
            }
        }
        Start::Minus => {
            if next.is_ascii_digit() {
                return number(bytes, start, start + 1);
            }
            if next == b'=' {
                (TokenKind::MinusEq, start + 2)
            } else if next.is_ascii_alphabetic() {
                negative_word(bytes, start).unwrap_or((TokenKind::Minus, start + 1))
            } else {
                (TokenKind::Minus, start + 1)
            }
        }
        Start::Slash => (TokenKind::Slash, start + 1),
        Start::Dot => {
            if next == b'.' {
                (TokenKind::Range, start + 2)
            } else {
                (TokenKind::Dot, start + 1)
            }
        }
        Start::Compare => {
            let eq = next == b'=';
            let kind = match (b, eq) {
                (b'<', true) => TokenKind::Le,
                (b'<', false) => TokenKind::Lt,
                (b'>', true) => TokenKind::Ge,
                (b'>', false) => TokenKind::Gt,
                (b'+', true) => TokenKind::PlusEq,
                (b'+', false) => TokenKind::Plus,
                (_, true) => TokenKind::Ne,
                (_, false) => return Err(unexpected(src, start)),
            };
            (kind, if eq { start + 2 } else { start + 1 })
        }
        Start::Other => return Err(unexpected(src, start)),
    })
}

/// A word starting with the letter at `start`: a UUID, an ISO duration, a constant word or an
/// identifier; its kind and end.
#[inline(always)]
pub(crate) fn word(bytes: &[u8], start: usize) -> Result<(TokenKind, usize), LexError> {
    let end = run_end(bytes, start + 1, IDENT);
    // A UUID starts with 8 hex digits, so its first identifier run is 8 long and a dash
    // follows it.
    if end == start + 8 && at(bytes, end) == b'-' {
        if let Some(t) = uuid(bytes, start)? {
            return Ok(t);
        }
    }
    if at(bytes, start) == b'P' {
        if let Some(end) = iso_duration(bytes, start) {
            return Ok((TokenKind::Duration, end));
        }
    }
    let text = bytes.get(start..end).unwrap_or(&[]);
    Ok((constant_word(text), end))
}

/// After a `-` followed by a letter: `-NaN`, `-Infinity` or a negative ISO duration.
/// `None` means the minus is an operator on its own.
fn negative_word(bytes: &[u8], start: usize) -> Option<(TokenKind, usize)> {
    if at(bytes, start + 1) == b'P' {
        if let Some(end) = iso_duration(bytes, start + 1) {
            return Some((TokenKind::Duration, end));
        }
    }
    let end = run_end(bytes, start + 1, IDENT);
    let word = bytes.get(start + 1..end).unwrap_or(&[]);
    let kind = if word.eq_ignore_ascii_case(b"nan") {
        TokenKind::NaN
    } else if word.eq_ignore_ascii_case(b"infinity") {
        TokenKind::Infinity
    } else {
        return None;
    };
    Some((kind, end))
}

/// An unquoted UUID at `start`, if the 36 bytes there have the 8-4-4-4-12 hex shape.
#[inline(never)]
fn uuid(bytes: &[u8], start: usize) -> Result<Option<(TokenKind, usize)>, LexError> {
    let Some(b) = bytes.get(start..start + 36) else {
        return Ok(None);
    };
    let shape_ok = crate::uuid::is_uuid(b);
    if !shape_ok {
        return Ok(None);
    }
    if is_ident_byte(at(bytes, start + 36)) {
        return Err(LexError::MalformedConstant { offset: start });
    }
    Ok(Some((TokenKind::Uuid, start + 36)))
}

/// End of an ISO 8601 duration starting with the `P` at `p`, if there is one there and it is
/// not followed by more identifier bytes (then the whole word is an identifier).
fn iso_duration(bytes: &[u8], p: usize) -> Option<usize> {
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
        if ok && !is_ident_byte(at(bytes, p + 20)) {
            return Some(p + 20);
        }
    }
    let end = run_end(bytes, p, IDENT);
    let word = bytes.get(p..end)?;
    if is_iso_designators(word) {
        Some(end)
    } else {
        None
    }
}

/// A constant starting with a digit at `digits` (`start` is `digits - 1` when a minus
/// precedes): UUID, blob, integer, float or unit-form duration; its kind and end.
#[inline(always)]
fn number(bytes: &[u8], start: usize, digits: usize) -> Result<(TokenKind, usize), LexError> {
    let mut i = run_end(bytes, digits + 1, DIGIT);
    let c = at(bytes, i);
    // The common case first: digits followed by a delimiter (a UUID or a blob has a letter or
    // a dash there).
    if !is_ident_byte(c) && c != b'.' && c != MICRO[0] && !(c == b'-' && start == digits) {
        return Ok((TokenKind::Integer, i));
    }
    if start == digits {
        if at(bytes, start + 8) == b'-' {
            if let Some(t) = uuid(bytes, start)? {
                return Ok(t);
            }
        }
        if at(bytes, start) == b'0' && matches!(at(bytes, start + 1), b'x' | b'X') {
            let mut i = start + 2;
            while at(bytes, i).is_ascii_hexdigit() {
                i += 1;
            }
            if is_ident_byte(at(bytes, i)) {
                return Err(LexError::MalformedConstant { offset: start });
            }
            return Ok((TokenKind::Hex, i));
        }
    }
    let malformed = LexError::MalformedConstant { offset: start };
    match c {
        b'.' => {
            if at(bytes, i + 1) == b'.' {
                // `1..2` is INTEGER RANGE INTEGER, but `1...` is FLOAT(`1.`) RANGE.
                if at(bytes, i + 2) == b'.' {
                    return Ok((TokenKind::Float, i + 1));
                }
                return Ok((TokenKind::Integer, i));
            }
            i = run_end(bytes, i + 1, DIGIT);
            if matches!(at(bytes, i), b'e' | b'E') {
                i = exponent(bytes, i).ok_or(malformed)?;
            }
            if is_ident_byte(at(bytes, i)) {
                return Err(malformed);
            }
            Ok((TokenKind::Float, i))
        }
        b'e' | b'E' => {
            i = exponent(bytes, i).ok_or(malformed)?;
            if is_ident_byte(at(bytes, i)) {
                return Err(malformed);
            }
            Ok((TokenKind::Float, i))
        }
        c if c.is_ascii_alphabetic() || c == MICRO[0] => {
            let end = duration_units(bytes, i).ok_or(malformed)?;
            Ok((TokenKind::Duration, end))
        }
        b'_' => Err(malformed),
        _ => Ok((TokenKind::Integer, i)),
    }
}

/// `e`/`E`, an optional sign and digits at `i`; the offset past them.
fn exponent(bytes: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if matches!(at(bytes, j), b'+' | b'-') {
        j += 1;
    }
    let first = j;
    while at(bytes, j).is_ascii_digit() {
        j += 1;
    }
    (j > first).then_some(j)
}

/// The unit-form duration tail at `i` (just after the first digits): `UNIT (DIGIT+ UNIT)*`.
fn duration_units(bytes: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i += unit_len(bytes, i)?;
        let c = at(bytes, i);
        if c.is_ascii_digit() {
            while at(bytes, i).is_ascii_digit() {
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
fn unit_len(bytes: &[u8], i: usize) -> Option<usize> {
    let a = at(bytes, i).to_ascii_lowercase();
    let b = at(bytes, i + 1).to_ascii_lowercase();
    match (a, b) {
        (b'm', b'o') | (b'm', b's') | (b'u', b's') | (b'n', b's') => Some(2),
        (0xC2, 0xB5) if at(bytes, i + 2).eq_ignore_ascii_case(&b's') => Some(3),
        (b'y' | b'w' | b'd' | b'h' | b'm' | b's', _) => Some(1),
        _ => None,
    }
}

/// Offset just past the closing `q` of the `q...q` run at `start` where `qq` is an escaped `q`.
#[inline(always)]
pub(crate) fn scan_doubled(bytes: &[u8], start: usize, q: u8) -> Option<usize> {
    scan_doubled_escapes(bytes, start, q).map(|(end, _)| end)
}

/// [`scan_doubled`], also telling whether an escaped `qq` occurs.
#[inline(always)]
pub(crate) fn scan_doubled_escapes(bytes: &[u8], start: usize, q: u8) -> Option<(usize, bool)> {
    let mut i = start + 1;
    let mut escaped = false;
    loop {
        i += memchr::memchr(q, bytes.get(i..)?)?;
        if bytes.get(i + 1) != Some(&q) {
            return Some((i + 1, escaped));
        }
        escaped = true;
        i += 2;
    }
}

/// The kind of an unquoted word: the constants `true`, `false`, `NaN`, `Infinity` (any case)
/// have their own kinds, every other word is an identifier.
#[inline(always)]
pub(crate) fn constant_word(w: &[u8]) -> TokenKind {
    // Most words are none of the four: reject them on the length and first letter with plain
    // comparisons (a jump table on the length mispredicts from one word to the next).
    let first = w.first().map_or(0, |b| b | 0x20);
    let n = w.len();
    if (n == 4 && first == b't' && w.eq_ignore_ascii_case(b"true"))
        || (n == 5 && first == b'f' && w.eq_ignore_ascii_case(b"false"))
    {
        TokenKind::Boolean
    } else if n == 3 && first == b'n' && w.eq_ignore_ascii_case(b"nan") {
        TokenKind::NaN
    } else if n == 8 && first == b'i' && w.eq_ignore_ascii_case(b"infinity") {
        TokenKind::Infinity
    } else {
        TokenKind::Ident
    }
}

/// True if `w` (starting with `P`) is an ISO 8601 designator duration: `P<n>W`, or
/// `P[<n>Y][<n>M][<n>D][T[<n>H][<n>M][<n>S]]` with at least one part on each side used.
pub(super) fn is_iso_designators(w: &[u8]) -> bool {
    // Parses `(<digits><designator>)*` with designators in the given order; returns the
    // offset reached and how many parts were read.
    fn parts(w: &[u8], mut i: usize, designators: &[u8]) -> Option<(usize, usize)> {
        let mut next = 0;
        let mut count = 0;
        loop {
            let digits_start = i;
            while w.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == digits_start {
                return Some((i, count));
            }
            let d = *w.get(i)?;
            let found = designators.get(next..)?.iter().position(|&x| x == d)?;
            next += found + 1;
            count += 1;
            i += 1;
        }
    }
    if w.first() != Some(&b'P') {
        return false;
    }
    if let Some((i, 1)) = parts(w, 1, b"W") {
        if i == w.len() {
            return true;
        }
    }
    let Some((mut i, period)) = parts(w, 1, b"YMD") else {
        return false;
    };
    if w.get(i) == Some(&b'T') {
        let Some((j, time)) = parts(w, i + 1, b"HMS") else {
            return false;
        };
        if time == 0 {
            return false;
        }
        i = j;
    } else if period == 0 {
        return false;
    }
    i == w.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time scan, as reference for [`scan_doubled_escapes`].
    fn scan_doubled_reference(bytes: &[u8], start: usize, q: u8) -> Option<(usize, bool)> {
        let mut i = start + 1;
        let mut escaped = false;
        loop {
            if *bytes.get(i)? == q {
                if bytes.get(i + 1) != Some(&q) {
                    return Some((i + 1, escaped));
                }
                escaped = true;
                i += 1;
            }
            i += 1;
        }
    }

    #[test]
    fn doubled_quote_scan_matches_the_byte_loop() {
        // Quotes, doubled quotes, NULs and high bytes at every place of inputs of every length
        // up to past two chunks.
        let alphabet = [b'\'', b'a', 0, 0x80, 0xA7, b'"'];
        for len in 1..20 {
            for seed in 0..600u32 {
                let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(len as u32);
                let mut bytes = vec![b'\''];
                for _ in 1..len {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    bytes.push(alphabet[(x % alphabet.len() as u32) as usize]);
                }
                for q in [b'\'', b'"'] {
                    assert_eq!(
                        scan_doubled_escapes(&bytes, 0, q),
                        scan_doubled_reference(&bytes, 0, q),
                        "{bytes:?}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn doubled_quote_scan_matches(bytes in proptest::collection::vec(
            proptest::sample::select(vec![b'\'', b'x', b'"', 0u8, 0xFF]), 0..40)
        ) {
            for q in [b'\'', b'"'] {
                proptest::prop_assert_eq!(
                    scan_doubled_escapes(&bytes, 0, q),
                    scan_doubled_reference(&bytes, 0, q)
                );
            }
        }
    }

    #[test]
    fn eight_byte_runs_match_the_byte_table() {
        // Every byte value at every position of a chunk, in runs of both classes.
        for class in [IDENT, DIGIT] {
            for b in 0..=255u8 {
                for at in 0..12 {
                    let fill = if class == IDENT { b'a' } else { b'7' };
                    let mut bytes = vec![fill; 12];
                    bytes[at] = b;
                    let expected = bytes
                        .iter()
                        .position(|&c| CLASS[usize::from(c)] & class == 0)
                        .unwrap_or(bytes.len());
                    assert_eq!(run_end(&bytes, 0, class), expected, "{b:#x} at {at}");
                }
            }
        }
    }
}
