//! Whether the answer to one of the proxy's own PREPAREs describes the statement the proxy
//! meant: the shape's tables, in the keyspace the client's statement runs in, under the schema
//! the proxy last saw.
//!
//! A PREPARE is sent on the client's connection, and the server runs a connection's requests
//! concurrently: a `USE` the client sends after it may take effect first, and the server then
//! resolves the shape's unqualified tables in the other keyspace. The proxy uses an answer only
//! when all of these hold:
//! - no `USE` was sent on the connection between the PREPARE and its answer (the session's
//!   keyspace epoch), and no schema change was seen in that time (the cache's schema epoch);
//! - every bind variable the server reports belongs to one of the shape's tables, resolved in
//!   the expected keyspace (qualified names in their own keyspace), and there is at least one;
//! - the shape names its tables in a way the proxy can read (`statement_tables`), and every
//!   unqualified one has a keyspace to be resolved in.
//!
//! An answer that is not proven is dropped: the shape is prepared again at a later sighting.

use autoprep_protocol::cql::source_table::statement_tables;
use autoprep_protocol::message::result::ColumnSpecs;

/// The (keyspace, table) pairs the shape `text` touches when run in `keyspace`, or `None`
/// when they cannot be known (a table with no keyspace, a text the lexer rejects, no table).
pub fn expected_tables(text: &str, keyspace: Option<&str>) -> Option<Vec<(String, String)>> {
    let tables = statement_tables(text)?;
    if tables.is_empty() {
        return None;
    }
    let mut out: Vec<(String, String)> = Vec::with_capacity(tables.len());
    for t in tables {
        let ks = match t.keyspace {
            Some(k) => k.into_owned(),
            None => keyspace?.to_owned(),
        };
        let pair = (ks, t.table.into_owned());
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    Some(out)
}

/// Whether every bind variable of a PREPARED answer belongs to one of `expected`, and there
/// is at least one that names a table. A batch's own `USING TIMESTAMP ?` / `TTL ?` are
/// specified in the pseudo table `[batch].[batch]` (Cassandra's
/// `BatchStatement.Parsed.prepare`: `attrs.prepare("[batch]", "[batch]")`) and prove nothing.
pub fn binds_belong(bind: &ColumnSpecs<'_>, expected: &[(String, String)]) -> bool {
    let mut any = false;
    for c in bind.iter() {
        if c.keyspace == "[batch]" && c.table == "[batch]" {
            continue;
        }
        any = true;
        if !expected
            .iter()
            .any(|(k, t)| k == c.keyspace && t == c.table)
        {
            return false;
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, t)| (k.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn unqualified_tables_take_the_statements_keyspace() {
        assert_eq!(
            expected_tables("INSERT INTO t (k) VALUES (?)", Some("a")),
            Some(pairs(&[("a", "t")]))
        );
        assert_eq!(expected_tables("INSERT INTO t (k) VALUES (?)", None), None);
        assert_eq!(
            expected_tables("INSERT INTO b.\"T\" (k) VALUES (?)", None),
            Some(pairs(&[("b", "T")]))
        );
        assert_eq!(
            expected_tables(
                "BEGIN BATCH INSERT INTO t (k) VALUES (?); UPDATE t SET v = ? WHERE k = ?; \
                 DELETE FROM x.u WHERE k = ? APPLY BATCH",
                Some("a")
            ),
            Some(pairs(&[("a", "t"), ("x", "u")]))
        );
    }
}
