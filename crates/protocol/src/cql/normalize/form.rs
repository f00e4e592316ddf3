//! Form rules: where the server decides something from the *form* of a statement rather than
//! from its values, and what the normalizer does so that a shape keeps the form its
//! statement was written in. The rules are applied in `parser.rs` and `fast.rs`; this module
//! lists them and holds their tests.
//!
//! (The list of rules, with the server's source, is filled in below.)

#[cfg(test)]
mod tests {
    use crate::cql::normalize::{both_passes, normalize_str, Normalized, NotCandidate, Slot};
    use crate::cql::Literal;

    fn shape(src: &str) -> (String, Vec<Slot<'_>>) {
        match normalize_str(src).unwrap() {
            Normalized::Shape(s) => (s.text, s.slots),
            other => panic!("{src}: {other:?}"),
        }
    }

    fn passes_through(src: &str, why: &str) {
        match normalize_str(src).unwrap() {
            Normalized::NotCandidate(NotCandidate::Unsupported { reason, .. }) => {
                assert_eq!(reason, why, "{src}")
            }
            other => panic!("{src}: {other:?}"),
        }
    }

    #[test]
    fn a_one_term_in_list_stays_a_one_term_list() {
        for src in [
            "SELECT * FROM t WHERE p IN ('a')",
            "SELECT * FROM t WHERE p IN ( 'a' )",
            "select * from t where p in ('a')",
        ] {
            let (text, slots) = shape(src);
            assert_eq!(text, "SELECT * FROM t WHERE p IN (?)", "{src}");
            assert_eq!(slots, [Slot::Literal(Literal::String("a".into()))]);
            // Both passes agree (the single pass answers this form).
            let (fast, full) = both_passes(src);
            assert_eq!(fast.as_ref(), full.as_ref().ok(), "{src}");
        }
        let (text, slots) = shape("UPDATE t SET v = 1 WHERE k IN (25) AND c = 3 IF v IN (7)");
        assert_eq!(
            text,
            "UPDATE t SET v = ? WHERE k IN (?) AND c = ? IF v IN (?)"
        );
        assert_eq!(slots.len(), 4);
        let (text, _) = shape("DELETE FROM t WHERE k IN (2) AND c IN (9, 10) IF EXISTS");
        assert_eq!(text, "DELETE FROM t WHERE k IN (?) AND c IN ? IF EXISTS");
    }

    #[test]
    fn a_longer_in_list_is_one_bound_list() {
        let (text, slots) = shape("SELECT * FROM t WHERE p IN (1, 2, 3)");
        assert_eq!(text, "SELECT * FROM t WHERE p IN ?");
        assert!(matches!(&slots[..], [Slot::Literal(Literal::List(l))] if l.len() == 3));
        let (text, _) = shape("SELECT * FROM t WHERE p = 1 AND c IN ()");
        assert_eq!(text, "SELECT * FROM t WHERE p = ? AND c IN ()");
    }

    #[test]
    fn multi_column_tuples_keep_their_arity_check() {
        let (text, _) = shape("SELECT * FROM t WHERE p = 1 AND (c1, c2) = (5, 6)");
        assert_eq!(text, "SELECT * FROM t WHERE p = ? AND (c1, c2) = ?");
        let (text, _) = shape("SELECT * FROM t WHERE p = 1 AND (c1, c2) IN ((5, 6))");
        assert_eq!(text, "SELECT * FROM t WHERE p = ? AND (c1, c2) IN (?)");
        let (text, _) = shape("SELECT * FROM t WHERE p = 1 AND (c1, c2) IN ((5, 6), (7, 8))");
        assert_eq!(text, "SELECT * FROM t WHERE p = ? AND (c1, c2) IN ?");
        let (text, _) = shape("SELECT * FROM t WHERE p = 1 AND (c1, c2) > (5, ?)");
        assert_eq!(text, "SELECT * FROM t WHERE p = ? AND (c1, c2) > (?, ?)");
        for src in [
            "SELECT * FROM t WHERE p = 1 AND (c1, c2) = (5)",
            "SELECT * FROM t WHERE p = 1 AND (c1, c2) IN ((5))",
            "SELECT * FROM t WHERE p = 1 AND (c1, c2, c3) > (1, 2)",
            "SELECT * FROM t WHERE p = 1 AND (b, c) IN ((1, 2), (3))",
            "SELECT * FROM t WHERE p = 1 AND (b, c) IN ((1, 2), (?))",
            "SELECT * FROM t WHERE p = 1 AND (b, c) IN ((1, 2), (3, 4, 5))",
            "DELETE FROM t WHERE p = 0 AND (c1, c2) = (1)",
            "SELECT * FROM t WHERE p = 1 AND (c1, c2) >= (1, 2) AND (c1, c2) < (3)",
        ] {
            passes_through(src, "tuple arity");
        }
        passes_through(
            "SELECT * FROM t WHERE p = 1 AND (c1, c2) = 5",
            "multi-column value",
        );
    }
}
