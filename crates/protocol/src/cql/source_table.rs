//! The tables a statement names, found with the lexer, so that comments, quoted identifiers,
//! string constants and case are read exactly as the server reads them.
//!
//! [`selected_table`]: the table a SELECT reads, `SELECT <selection> FROM [keyspace.]table ...`.
//! Only the `FROM` clause at parenthesis depth 0 counts (a selection may hold function calls
//! and casts, but never a `FROM` of its own). Anything that is not a SELECT, or that the lexer
//! rejects before the table name, has no source table; what follows the name is not read
//! (an invalid remainder gets the server's own error).
//!
//! [`statement_tables`]: every table a DML statement or a batch of them names, for proving
//! that a PREPARED answer describes the statement the proxy meant (see the proxy's
//! `prepare_proof`).

use crate::cql::lexer::{keyword_eq, Lexer, TokenKind};
use crate::cql::normalize::resolve_identifier;
use std::borrow::Cow;

/// A table as a statement names it, identifiers resolved as the server resolves them
/// (unquoted lower-cased, quoted unescaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef<'a> {
    /// The keyspace, when the name is qualified.
    pub keyspace: Option<Cow<'a, str>>,
    /// The table.
    pub table: Cow<'a, str>,
}

/// False when `query` surely is not a SELECT: it starts (after ASCII whitespace) with a word
/// other than `SELECT`, or with nothing. A cheap test that settles most statements without
/// the lexer; true for a SELECT and for text that starts with a comment.
pub fn may_be_select(query: &[u8]) -> bool {
    !surely_not_select(query)
}

/// True when `query` starts (after ASCII whitespace) with anything but a word other than
/// `SELECT`: a cheap test that settles most statements without the lexer.
fn surely_not_select(query: &[u8]) -> bool {
    let start = query
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(query.len());
    let rest = &query[start..];
    match rest.first() {
        // A comment (or an error the lexer will report): let the lexer decide.
        Some(b'-' | b'/') => false,
        Some(_) => {
            !(rest.len() >= 6
                && rest[..6].eq_ignore_ascii_case(b"SELECT")
                && !rest
                    .get(6)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_'))
        }
        None => true,
    }
}

/// The table the SELECT `query` reads, or `None` when `query` is not a SELECT (or not CQL
/// the lexer accepts).
pub fn selected_table(query: &[u8]) -> Option<TableRef<'_>> {
    if surely_not_select(query) {
        return None;
    }
    let mut lexer = Lexer::from_bytes(query).ok()?;
    let first = lexer.next_token().ok()??;
    if !first.is_keyword("SELECT") {
        return None;
    }
    let mut depth = 0usize;
    loop {
        let t = lexer.next_token().ok()??;
        match t.kind {
            TokenKind::LParen | TokenKind::LBracket | TokenKind::LBrace => depth += 1,
            TokenKind::RParen | TokenKind::RBracket | TokenKind::RBrace => {
                depth = depth.saturating_sub(1)
            }
            TokenKind::Ident if depth == 0 && keyword_eq(t.text, "FROM") => break,
            _ => {}
        }
    }
    table_name(&mut lexer)
}

/// `[keyspace '.'] table` at the lexer, which moves past it; `None` unless a name is there.
fn table_name<'a>(lexer: &mut Lexer<'a>) -> Option<TableRef<'a>> {
    let first = lexer.next_token().ok()??;
    if !is_name(first.kind) {
        return None;
    }
    let mut after = lexer.clone();
    match after.next_token() {
        Ok(Some(dot)) if dot.kind == TokenKind::Dot => {
            let second = after.next_token().ok()??;
            if !is_name(second.kind) {
                return None;
            }
            *lexer = after;
            Some(TableRef {
                keyspace: Some(resolve_identifier(first.text)),
                table: resolve_identifier(second.text),
            })
        }
        _ => Some(TableRef {
            keyspace: None,
            table: resolve_identifier(first.text),
        }),
    }
}

/// Every table the DML statement (or batch of statements) `text` names after `INTO`, `FROM` or
/// `UPDATE`, in order, or `None` when the lexer rejects the text or a name is missing. These
/// three words are reserved in CQL: unquoted, they are never a column or a value, so each one
/// is followed by a table name.
pub fn statement_tables(text: &str) -> Option<Vec<TableRef<'_>>> {
    let mut lexer = Lexer::new(text);
    let mut tables = Vec::new();
    while let Some(t) = lexer.next_token().ok()? {
        let names_a_table = t.kind == TokenKind::Ident
            && (keyword_eq(t.text, "INTO")
                || keyword_eq(t.text, "FROM")
                || keyword_eq(t.text, "UPDATE"));
        if !names_a_table {
            continue;
        }
        tables.push(table_name(&mut lexer)?);
    }
    Some(tables)
}

fn is_name(kind: TokenKind) -> bool {
    matches!(kind, TokenKind::Ident | TokenKind::QuotedIdent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn table(q: &str) -> Option<(Option<String>, String)> {
        selected_table(q.as_bytes())
            .map(|t| (t.keyspace.map(|k| k.into_owned()), t.table.into_owned()))
    }

    fn qualified(ks: &str, t: &str) -> Option<(Option<String>, String)> {
        Some((Some(ks.to_owned()), t.to_owned()))
    }

    #[test]
    fn the_drivers_topology_queries() {
        // Python driver, Java driver 4, gocql, the scylla crate, the Node.js driver, cqlsh.
        for (q, t) in [
            ("SELECT * FROM system.local WHERE key='local'", "local"),
            ("SELECT * FROM system.local", "local"),
            ("SELECT host_id, cluster_name, data_center, rack, partitioner, release_version, schema_version FROM system.local WHERE key='local'", "local"),
            ("SELECT schema_version FROM system.local WHERE key='local'", "local"),
            ("select * from system.local where key = 'local'", "local"),
            ("select host_id, rpc_address, data_center, rack, tokens from system.local", "local"),
            ("SELECT * FROM system.peers", "peers"),
            ("SELECT peer, host_id, rpc_address, schema_version FROM system.peers", "peers"),
            ("SELECT * FROM system.peers WHERE peer = :address", "peers"),
            ("SELECT * FROM system.peers_v2", "peers_v2"),
            ("SELECT host_id, peer, peer_port, native_address, native_port, schema_version FROM system.peers_v2", "peers_v2"),
        ] {
            assert_eq!(table(q), qualified("system", t), "{q}");
        }
    }

    #[test]
    fn identifiers_resolve_as_the_server_resolves_them() {
        assert_eq!(
            table("SELECT * FROM \"system\".\"local\""),
            qualified("system", "local")
        );
        assert_eq!(
            table("SELECT * FROM SYSTEM . Peers"),
            qualified("system", "peers")
        );
        assert_eq!(
            table("SELECT * FROM \"System\".local"),
            qualified("System", "local")
        );
        assert_eq!(
            table("SELECT * FROM local"),
            Some((None, "local".to_owned()))
        );
        assert_eq!(
            table("  /* c */ -- x\n SELECT a FROM ks.t WHERE k = 'FROM system.local'"),
            qualified("ks", "t")
        );
    }

    #[test]
    fn the_selection_may_hold_parentheses_and_keywords() {
        assert_eq!(
            table("SELECT JSON DISTINCT cast(a AS text), writetime(b), [1, 2] FROM system.peers"),
            qualified("system", "peers")
        );
        assert_eq!(table("SELECT \"from\" FROM x.y"), qualified("x", "y"));
    }

    #[test]
    fn other_statements_have_no_source_table() {
        for q in [
            "INSERT INTO system.local (key) VALUES ('x')",
            "UPDATE system.peers SET rack = 'r' WHERE peer = '1.2.3.4'",
            "SELECTED * FROM system.local",
            "SELECT * FORM system.local",
            "SELECT * FROM",
            "SELECT * FROM 'system'",
            "SELECT * FROM system.",
            "",
            "   ",
        ] {
            assert_eq!(table(q), None, "{q}");
        }
        assert_eq!(selected_table(&[0xff, 0xfe]), None);
    }

    fn tables(q: &str) -> Option<Vec<(Option<String>, String)>> {
        statement_tables(q).map(|v| {
            v.into_iter()
                .map(|t| (t.keyspace.map(|k| k.into_owned()), t.table.into_owned()))
                .collect()
        })
    }

    #[test]
    fn the_tables_of_dml_statements_and_batches() {
        let t = |k: Option<&str>, n: &str| (k.map(str::to_owned), n.to_owned());
        assert_eq!(
            tables("INSERT INTO ks.\"T\" (a) VALUES (?)"),
            Some(vec![t(Some("ks"), "T")])
        );
        assert_eq!(
            tables("UPDATE t USING TTL ? SET v = ? WHERE k = ?"),
            Some(vec![t(None, "t")])
        );
        assert_eq!(
            tables("DELETE m[?] FROM Tab WHERE k IN ?"),
            Some(vec![t(None, "tab")])
        );
        assert_eq!(
            tables("SELECT 'INTO x', \"from\" FROM a.b WHERE k = ?"),
            Some(vec![t(Some("a"), "b")])
        );
        assert_eq!(
            tables(
                "BEGIN BATCH INSERT INTO a (k) VALUES (?); UPDATE b.c SET v = ? WHERE k = ? \
                 APPLY BATCH"
            ),
            Some(vec![t(None, "a"), t(Some("b"), "c")])
        );
        assert_eq!(tables("INSERT INTO"), None);
        assert_eq!(tables("DELETE FROM 'x'"), None);
    }

    proptest! {
        #[test]
        fn statement_tables_total(q in "[ -~]{0,80}") {
            let _ = statement_tables(&q);
        }

        #[test]
        fn total(q in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = selected_table(&q);
        }

        #[test]
        fn total_on_select_prefixes(rest in "[ -~]{0,60}") {
            let _ = selected_table(format!("SELECT {rest}").as_bytes());
        }
    }
}
