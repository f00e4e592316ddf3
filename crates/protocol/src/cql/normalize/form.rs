//! Form rules: where the server decides something from the *form* of a statement rather than
//! from its values, and what the normalizer does so that a shape keeps the form its
//! statement was written in. The rules are applied in `parser.rs` and `fast.rs`; this module
//! lists them and holds their tests.
//!
//! Read in Apache Cassandra 5.0.6 (`cassandra-all-5.0.6-sources`; 5.0 predates the
//! `SimpleRestriction` rewrite of 5.1) and checked on a 5.0.6 node, literal against the same
//! value bound to the shape's marker:
//!
//! # 1. A one-term `IN (x)` is `=`; `IN ?` is an IN whatever its length
//! `cql3/SingleColumnRelation.newINRestriction` (and `MultiColumnRelation.newINRestriction`
//! for tuples) turns a parenthesised list of one term into an `EQRestriction`, whether the
//! term is a literal or a marker; `IN ?` (`inMarker`) is always an `InRestrictionWithMarker`.
//! What then differs between `IN (5)` and `IN ?` bound to `[5]`:
//! - `SelectStatement.execute`: the warning "Aggregation query used on multiple partition keys
//!   (IN restriction)" when `keyIsInRelation()`;
//! - `SelectStatement.execute`: "Cannot page queries with both ORDER BY and a IN restriction on
//!   the partition key" (`needsPostQueryOrdering`);
//! - `ModificationStatement.makeCasRequest`: "IN on the partition key / clustering key columns
//!   is not supported with conditional updates/deletions";
//! - `BatchStatement.executeWithConditions`: a ServerError "Batch with conditions cannot span
//!   multiple partitions";
//! - `SelectStatement.RawStatement.getAggregationSpecFactory` / `isReversed`: GROUP BY and
//!   ORDER BY accepted only after columns restricted by `=` (`isColumnRestrictedByEq`);
//! - `StatementRestrictions.validateSecondaryIndexSelections` and index choice
//!   (`EQRestriction.isSupportedBy` asks for EQ, indexes take no IN): with `v IN (1)` an index
//!   is used (and refused with IN on the key, or with ORDER BY), with `v IN ?` it is filtering;
//! - PREPARED metadata: `IN ?` is named `in(k)`, of type `list<T>`, with no routing index.
//!
//! **Rule:** `IN (x)` becomes `IN (?)` (still one term: still `=`); two literals or more become
//! `IN ?` (both forms are IN: warnings, errors, duplicates, nulls and paging were identical,
//! and the guardrails `partition_keys_in_select` / `in_select_cartesian_product` count bound
//! values); `IN ()` stays inline. LWT conditions (`IF c IN (...)`, `ColumnCondition`) keep IN
//! for any count, and follow the same rule.
//!
//! # 2. The arity of a tuple literal is checked; a bound tuple's is not
//! `cql3/Tuples.Literal.prepare` throws "Expected 2 elements in value tuple, but got 1"; the
//! marker paths (`Tuples.Marker`, `Tuples.INRaw`, `InMarker.bind`) check nothing, and
//! `MultiColumnRestriction.EQRestriction.appendTo` builds a shorter clustering prefix from a
//! short bound tuple: `(c1, c2) > ?` bound to `(1)` returns rows, an UPDATE with `(c1, c2) = ?`
//! bound to `(1)` writes a row with a null clustering column, a DELETE deletes a prefix.
//!
//! **Rule:** in a multi-column relation of n columns, a tuple literal becomes a marker only
//! when it has n elements; any tuple of another arity (even one with markers inside, which
//! stays a literal tuple) makes the whole statement go through as written ("tuple arity"),
//! so that the client gets the server's own error. A right-hand side that is neither a marker
//! nor a tuple literal also goes through ("multi-column value").
//!
//! # 3. Values the literal path checks and a bound value does not
//! These live in the encoder (`types/encode/`), which refuses what the literal path refuses,
//! so the statement goes through: a tuple literal with more elements than its type, an unknown
//! UDT field, a vector of the wrong dimension, `''` for a non-string type (except timestamp
//! and inet, empty values both ways), `''` for date and time, non-ASCII in ascii, integers out
//! of range; `null` inside a collection stays inline (the normalizer never replaces it). And
//! it writes what the literal path writes: a short tuple literal unpadded, a UDT literal
//! padded with nulls in field order (frozen values hash to other tokens otherwise).
//!
//! # 4. Forms that were checked to behave alike
//! LIMIT / PER PARTITION LIMIT (0, -1), USING TTL (-1, 0, over the maximum) and TIMESTAMP,
//! `k = null`, `IF c = null`, list indexes, counters, `token(k) > t`, durations, CONTAINS
//! [KEY], map entries, ANN OF, INSERT JSON.

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
