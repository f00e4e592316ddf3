//! The canonical text writer of the single-pass normalizer: it appends pieces with the
//! [`space_before`] rule, but where the statement is already written canonically (one space
//! where the rule wants one, none elsewhere, keywords in upper case) it only extends a run of
//! source text, and copies the whole run with one `memcpy` when something differs: a replaced
//! literal, a lower-case keyword, other spacing, a comment.

use super::canonical::{space_after, Last, Piece};

/// `run_start` and `run_end` right after an inserted piece: no token starts there, so the next
/// token starts a new run (the text before it in the statement does not follow the output).
const DETACHED: usize = usize::MAX - 1;

/// 64 markers as the canonical INSERT lane writes them: `?, ?, ..., ?`.
const MARKERS: &str = concat!(
    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ",
    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
);

/// Canonical text under construction, over the statement `src`.
pub(super) struct RunWriter<'a> {
    src: &'a str,
    out: String,
    last: Last,
    /// `src[run_start..run_end]` is canonical text not yet copied to `out`.
    run_start: usize,
    run_end: usize,
}

impl<'a> RunWriter<'a> {
    /// A writer appending to `out` (cleared first).
    pub(super) fn new(src: &'a str, mut out: String) -> Self {
        out.clear();
        RunWriter {
            src,
            out,
            last: Last::START,
            run_start: DETACHED,
            run_end: DETACHED,
        }
    }

    /// Appends the source text `src[start..end]` (one token) as `piece`.
    #[inline(always)]
    pub(super) fn verbatim(&mut self, start: usize, end: usize, piece: Piece) {
        let bytes = self.src.as_bytes();
        let first = bytes.get(start).copied().unwrap_or(0);
        let space = space_after(self.last, piece, first);
        self.last = Last::after(piece);
        // With a space wanted, the run must end just before it: then `start - 1` is the byte
        // after the run, which must be that space.
        if start == self.run_end + usize::from(space)
            && (!space || bytes.get(self.run_end) == Some(&b' '))
        {
            self.run_end = end;
            return;
        }
        self.restart(start, end, space);
    }

    /// Copies the current run out and starts a new one at the token `start..end`.
    #[inline(never)]
    fn restart(&mut self, start: usize, end: usize, space: bool) {
        self.flush();
        let bytes = self.src.as_bytes();
        self.run_start = if space && start > 0 && bytes.get(start - 1) == Some(&b' ') {
            start - 1
        } else {
            if space {
                self.out.push(' ');
            }
            start
        };
        self.run_end = end;
    }

    /// Appends `text` as `piece` in place of the source token that ends at `end` (a keyword
    /// written in lower or mixed case).
    #[inline]
    pub(super) fn respell(&mut self, end: usize, text: &str, piece: Piece) {
        self.put(text, piece);
        self.run_start = end;
        self.run_end = end;
    }

    /// Appends a marker in place of a literal that ends at `end`.
    #[inline]
    pub(super) fn marker(&mut self, end: usize) {
        let space = space_after(self.last, Piece::Word, b'?');
        self.last = Last::after(Piece::Word);
        self.flush();
        if space {
            self.out.push_str(" ?");
        } else {
            self.out.push('?');
        }
        self.run_start = end;
        self.run_end = end;
    }

    /// At the start of the text: the statement up to `prefix`, then `markers` markers
    /// separated by `, `, as the canonical INSERT lane takes them; `end` is where the lane
    /// stopped: past the `)` closing the values (`closed`), or at the next value, just after
    /// `, ` (or at `prefix` when it took none).
    pub(super) fn insert_head(&mut self, prefix: usize, markers: usize, end: usize, closed: bool) {
        debug_assert!(self.out.is_empty() && self.last == Last::START);
        self.out.push_str(self.src.get(..prefix).unwrap_or(""));
        // `?, ?, ...` copied at once from a ready-made run when it is long enough.
        match MARKERS.get(..(3 * markers).saturating_sub(2)) {
            Some(run) => self.out.push_str(run),
            None => {
                self.out.push('?');
                for _ in 1..markers {
                    self.out.push_str(", ?");
                }
            }
        }
        if closed {
            self.out.push(')');
            self.last = Last::after(Piece::Close);
            (self.run_start, self.run_end) = (end, end);
        } else if markers > 0 {
            // The `,` after the last marker is the run; the space and the next value follow.
            self.last = Last::after(Piece::Comma);
            (self.run_start, self.run_end) = (end - 2, end - 1);
        } else {
            self.last = Last::after(Piece::Open);
            (self.run_start, self.run_end) = (prefix, prefix);
        }
    }

    /// Appends `text` as `piece`, standing for no source text.
    pub(super) fn insert(&mut self, text: &str, piece: Piece) {
        self.put(text, piece);
        self.run_start = DETACHED;
        self.run_end = DETACHED;
    }

    fn put(&mut self, text: &str, piece: Piece) {
        let space = space_after(
            self.last,
            piece,
            text.as_bytes().first().copied().unwrap_or(0),
        );
        self.last = Last::after(piece);
        self.flush();
        if space {
            self.out.push(' ');
        }
        match text.as_bytes() {
            [b] if b.is_ascii() => self.out.push(char::from(*b)),
            _ => self.out.push_str(text),
        }
    }

    #[inline]
    fn flush(&mut self) {
        if self.run_end > self.run_start {
            self.out
                .push_str(self.src.get(self.run_start..self.run_end).unwrap_or(""));
        }
        self.run_start = self.run_end;
    }

    /// The finished text.
    pub(super) fn finish(mut self) -> String {
        self.flush();
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_canonical_runs_and_respells_the_rest() {
        let src = "select  a ,b from t where k=?";
        let mut w = RunWriter::new(src, String::new());
        w.respell(6, "SELECT", Piece::Word);
        w.verbatim(8, 9, Piece::Callee);
        w.verbatim(10, 11, Piece::Comma);
        w.verbatim(11, 12, Piece::Callee);
        w.respell(17, "FROM", Piece::Word);
        w.verbatim(18, 19, Piece::Name);
        w.respell(25, "WHERE", Piece::Word);
        w.verbatim(26, 27, Piece::Name);
        w.verbatim(27, 28, Piece::Word);
        w.marker(29);
        w.insert(";", Piece::Semi);
        assert_eq!(w.finish(), "SELECT a, b FROM t WHERE k = ?;");
    }

    #[test]
    fn insert_head_writes_any_number_of_markers() {
        assert_eq!(MARKERS.len(), 3 * 64 - 2);
        for markers in 0..70 {
            let values = vec!["1"; markers].join(", ");
            let src = format!("INSERT INTO t (a) VALUES ({values})");
            let prefix = "INSERT INTO t (a) VALUES (".len();
            let mut w = RunWriter::new(&src, String::new());
            w.insert_head(prefix, markers, src.len(), true);
            let expected = vec!["?"; markers].join(", ");
            assert_eq!(w.finish(), format!("INSERT INTO t (a) VALUES ({expected})"));
        }
    }

    #[test]
    fn a_canonical_statement_is_one_run() {
        let src = "INSERT INTO t (a) VALUES (1)";
        let mut w = RunWriter::new(src, String::new());
        for (s, e, p) in [
            (0, 6, Piece::Word),
            (7, 11, Piece::Word),
            (12, 13, Piece::Name),
            (14, 15, Piece::Open),
            (15, 16, Piece::Name),
            (16, 17, Piece::Close),
            (18, 24, Piece::Word),
            (25, 26, Piece::Open),
        ] {
            w.verbatim(s, e, p);
        }
        w.marker(27);
        w.verbatim(27, 28, Piece::Close);
        assert_eq!(w.run_start, 27);
        assert_eq!(w.finish(), "INSERT INTO t (a) VALUES (?)");
    }
}
