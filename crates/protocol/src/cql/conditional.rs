//! Whether a statement is conditional (a lightweight transaction): an `INSERT ... IF NOT
//! EXISTS`, an `UPDATE` or `DELETE ... IF EXISTS` / `IF <conditions>`, or a batch holding one.
//!
//! The server uses a request's serial consistency only for such statements (Cassandra's
//! `ModificationStatement.hasConditions` and `BatchStatement`: the Paxos rounds run at the
//! serial consistency; every other statement ignores it), so routing restricts a request to a
//! datacenter by its serial consistency only when this says so.
//!
//! `IF` is a reserved keyword of CQL (Cassandra's `ReservedKeywords`): unquoted, it can only be
//! the condition's keyword in a DML statement, or `IF [NOT] EXISTS` of a schema statement.
//! So a data statement is conditional exactly when an unquoted `IF` token appears in it: the
//! lexer skips comments, string constants and quoted identifiers, where the word means nothing.

use crate::cql::lexer::{Lexer, TokenKind};

/// True when `text` is a conditional statement, or when the lexer cannot read it (the caller
/// then keeps every restriction a conditional statement would have).
pub fn is_conditional(text: &str) -> bool {
    let mut lexer = Lexer::new(text);
    loop {
        match lexer.next_token() {
            Ok(Some(t)) if t.kind == TokenKind::Ident && t.is_keyword("IF") => return true,
            Ok(Some(_)) => {}
            Ok(None) => return false,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_found_by_the_keyword_alone() {
        for text in [
            "INSERT INTO ks.t (k, v) VALUES (?, ?) IF NOT EXISTS",
            "UPDATE t SET v = ? WHERE k = ? if v = ?",
            "DELETE FROM t WHERE k = ? IF EXISTS",
            "BEGIN BATCH UPDATE t SET v = 1 WHERE k = 0 IF v = 0; APPLY BATCH",
            "update t set v = ? where k = ? If exists",
            "INSERT INTO t (k) VALUES ('unterminated",
        ] {
            assert!(is_conditional(text), "{text}");
        }
    }

    #[test]
    fn the_word_inside_strings_names_or_comments_is_not_a_condition() {
        for text in [
            "INSERT INTO t (k, v) VALUES (?, ?)",
            "INSERT INTO t (k, v) VALUES (1, 'IF NOT EXISTS')",
            "UPDATE t SET \"if\" = ? WHERE k = ?",
            "SELECT v FROM t WHERE k = ? -- IF EXISTS\n",
            "DELETE FROM t /* if */ WHERE k = ?",
            "UPDATE t SET iff = ?, v = $$ IF $$ WHERE k = ?",
        ] {
            assert!(!is_conditional(text), "{text}");
        }
    }
}
