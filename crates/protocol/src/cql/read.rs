//! Whether a statement is a read (`SELECT`): running it twice changes nothing, so a proxy may
//! send one again when the connection it was in flight on ended (to the home node after a
//! replica connection ended, to a new home after the home node failed).
//!
//! The first token decides: the lexer skips whitespace and comments. A statement the lexer
//! cannot read, or text that is not UTF-8, is not known to be a read.

use crate::cql::lexer::Lexer;

/// True when `text` is a `SELECT` statement.
pub fn is_read(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    matches!(Lexer::new(text).next_token(), Ok(Some(t)) if t.is_keyword("SELECT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_selects() {
        for read in [
            "SELECT v FROM t",
            "  select * from t",
            "\nSeLeCt\tk FROM t",
            "SELECT*FROM t",
            "/* c */ SELECT v FROM t",
            "-- c\nSELECT v FROM t",
        ] {
            assert!(is_read(read.as_bytes()), "{read}");
        }
        for other in [
            "INSERT INTO t (k) VALUES (1)",
            "SELECTED",
            "SELECT_x",
            "\"SELECT\"",
            "UPDATE t SET v = 'SELECT'",
            "",
        ] {
            assert!(!is_read(other.as_bytes()), "{other}");
        }
        assert!(!is_read(b"\xffSELECT v FROM t"));
    }
}
