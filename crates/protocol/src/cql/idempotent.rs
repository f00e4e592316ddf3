//! Whether a statement is idempotent by its form: running it twice leaves what running it once
//! leaves, so a proxy may send it again when the connection it was in flight on ended (to the
//! home node after a replica connection ended, to a new home after the home node failed), as a
//! driver sends it to its next host ([`may_repeat`], which admits conditional writes too).
//!
//! A read (`SELECT`) always is. An `INSERT`, `UPDATE`, `DELETE` or text batch is, unless its form
//! says otherwise; the rules are those the drivers give for marking a statement idempotent (the
//! Java driver's "Query idempotence" page) checked against Cassandra's `Operation` kinds:
//! - a condition (`IF`, a lightweight transaction): run again, its `[applied]` answer may
//!   differ from the first run's, which the client never saw (but see [`may_repeat`]);
//! - a counter or collection operation that reads the current value: `c = c + 1`, `l = l + [x]`,
//!   `l = [x] + l`, `s = s - {x}`, `c += 1` (Cassandra's `Addition`, `Substraction`, `Prepend`);
//!   any `+` or `-` operator, and any column named on the right of a `SET` assignment
//!   (`c = c -1` lexes its minus into the number);
//! - a list element deleted by index, `DELETE l[0] FROM ...` (the next element would go too);
//!   any `[` in a `DELETE`'s selection, map keys included (a rule of form, kept simple);
//! - a function whose result differs at each call: `now()`, `uuid()`, `currentTimestamp()` and
//!   the other `current…` functions (Cassandra's `TimeFcts`, `UuidFcts`), in either spelling;
//! - a `COUNTER` batch.
//!
//! A repeated write carries the client's own timestamp when the client sent one (the request's
//! bytes are sent again as they were); without one, the second run writes the same values at a
//! later server timestamp, as a driver's retry on its next host does.
//!
//! Every other statement (schema changes, `TRUNCATE`, `USE`, ...), a statement the lexer cannot
//! read and text that is not UTF-8 are not known to be idempotent. The lexer skips comments,
//! string constants and quoted names, where these words and signs mean nothing.

use crate::cql::lexer::{Lexer, Token, TokenKind};

/// Functions whose result differs at each call, in upper case (both spellings Cassandra 5
/// accepts).
const NONDETERMINISTIC: &[&str] = &[
    "NOW",
    "UUID",
    "CURRENTTIMESTAMP",
    "CURRENTDATE",
    "CURRENTTIME",
    "CURRENTTIMEUUID",
    "CURRENT_TIMESTAMP",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMEUUID",
];

/// Where in a data statement a token is, as far as the rules need.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clause {
    /// An `UPDATE`'s assignments, from `SET` to `WHERE`.
    Set,
    /// A `DELETE`'s selection, from `DELETE` to `FROM`.
    DeleteSelection,
    Other,
}

/// True when `text` is a `SELECT`, or a data statement or text batch that is idempotent by its
/// form (see the module's rules).
pub fn is_idempotent(text: &[u8]) -> bool {
    scan(text) == Some(false)
}

/// True when `text` is idempotent by its form, or a conditional write (or batch) that would be
/// but for its condition: what a proxy sends again when the node it was in flight on failed,
/// as the Python driver's default retry policy does for any statement
/// (`RetryPolicy.on_request_error`: the next host). A conditional write runs as a Paxos round,
/// and a second round first completes what the first one left accepted (Cassandra's
/// `StorageProxy.cas`, `beginAndRepairPaxos`): it never applies twice. What may differ is its
/// answer: a second round after a first one that applied sees the row as the first left it,
/// so `[applied]` is false with those values, as after a driver's retry.
pub fn may_repeat(text: &[u8]) -> bool {
    scan(text).is_some()
}

/// `None` when `text` is not idempotent by its form but for a condition; else whether it is
/// conditional.
fn scan(text: &[u8]) -> Option<bool> {
    let mut lexer = Lexer::from_bytes(text).ok()?;
    let first = lexer.next_token().ok()??;
    if first.is_keyword("SELECT") {
        return Some(false);
    }
    if !["INSERT", "UPDATE", "DELETE", "BEGIN"]
        .iter()
        .any(|k| first.is_keyword(k))
    {
        return None;
    }
    let mut conditional = false;
    let mut clause = clause_after(first, Clause::Other);
    let mut prev = first;
    // Set after `=` in a SET clause when a name follows: a column unless `(` comes next.
    let mut named_after_eq = false;
    loop {
        let t = match lexer.next_token() {
            Ok(Some(t)) => t,
            Ok(None) if named_after_eq => return None,
            Ok(None) => return Some(conditional),
            Err(_) => return None,
        };
        if std::mem::take(&mut named_after_eq) && t.kind != TokenKind::LParen {
            return None;
        }
        match t.kind {
            TokenKind::Plus | TokenKind::Minus | TokenKind::PlusEq | TokenKind::MinusEq => {
                return None
            }
            TokenKind::LBracket if clause == Clause::DeleteSelection => return None,
            TokenKind::LParen if is_nondeterministic(prev) => return None,
            TokenKind::Ident if t.is_keyword("COUNTER") => return None,
            // A quoted name is a name too: `v = "c" 2` adds to column `c` as `v = c 2` does.
            // Read before `IF`: in `v = IF -1` it is where a name goes (the server rejects the
            // reserved word; the statement and its shape `v = IF + ?` must agree).
            TokenKind::Ident | TokenKind::QuotedIdent
                if clause == Clause::Set && prev.kind == TokenKind::Eq && !t.is_keyword("NULL") =>
            {
                named_after_eq = true;
            }
            // The condition's expressions follow: an `=` there compares, it assigns nothing.
            TokenKind::Ident if t.is_keyword("IF") => {
                conditional = true;
                clause = Clause::Other;
            }
            TokenKind::Ident => clause = clause_after(t, clause),
            _ => {}
        }
        prev = t;
    }
}

/// Whether `t` names a function of [`NONDETERMINISTIC`]: in any case unquoted, or quoted in
/// the lower case Cassandra stores function names in (`"now"`; `"NOW"` names no function).
fn is_nondeterministic(t: Token<'_>) -> bool {
    match t.kind {
        TokenKind::Ident => NONDETERMINISTIC.iter().any(|f| t.is_keyword(f)),
        TokenKind::QuotedIdent => {
            let name = &t.text[1..t.text.len() - 1];
            NONDETERMINISTIC.iter().any(|f| {
                name.len() == f.len()
                    && name
                        .bytes()
                        .zip(f.bytes())
                        .all(|(n, f)| n == f.to_ascii_lowercase())
            })
        }
        _ => false,
    }
}

/// The clause after keyword `t` (unchanged for any other word): `UPDATE ... SET` opens the
/// assignments, `DELETE` its selection; `WHERE`, `FROM`, `USING` and a batch's next statement
/// end them.
fn clause_after(t: Token<'_>, clause: Clause) -> Clause {
    if t.is_keyword("SET") {
        Clause::Set
    } else if t.is_keyword("DELETE") {
        Clause::DeleteSelection
    } else if ["WHERE", "FROM", "USING", "INSERT", "UPDATE", "APPLY"]
        .iter()
        .any(|k| t.is_keyword(k))
    {
        Clause::Other
    } else {
        clause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idempotent(text: &str) -> bool {
        is_idempotent(text.as_bytes())
    }

    #[test]
    fn reads_are_idempotent() {
        for read in [
            "SELECT v FROM t",
            "  select * from t",
            "\nSeLeCt\tk FROM t",
            "SELECT*FROM t",
            "/* c */ SELECT v FROM t",
            "-- c\nSELECT v FROM t",
            "SELECT now() FROM t WHERE k = 1",
        ] {
            assert!(idempotent(read), "{read}");
        }
    }

    #[test]
    fn plain_writes_are_idempotent() {
        for write in [
            "INSERT INTO t (k, v) VALUES (1, 'a')",
            "INSERT INTO ks.t (k, v) VALUES (?, ?) USING TTL 60",
            "INSERT INTO t (k, v) VALUES (-1, -2.5)",
            "INSERT INTO t (k, l, m) VALUES (1, [1, -2], {'a': 1})",
            "INSERT INTO t JSON '{\"k\": 1}' DEFAULT UNSET",
            "UPDATE t SET v = 'x', w = null WHERE k = 1",
            "UPDATE t USING TIMESTAMP 5 SET v = ? WHERE k = ?",
            "UPDATE t SET l[0] = 1, m['a'] = 2, u.f = 3 WHERE k = 1",
            "UPDATE t SET v = (int) 3, ts = toTimestamp(:d) WHERE k = 1",
            "UPDATE t SET v = :v WHERE k = :k",
            "UPDATE t SET v = -1 WHERE k = 1",
            "UPDATE t SET s = {1, 2} WHERE k = 1",
            "DELETE FROM t WHERE k = 1",
            "DELETE v, w FROM t WHERE k IN (1, 2) AND c > 3",
            "BEGIN BATCH INSERT INTO t (k) VALUES (1); UPDATE t SET v = 2 WHERE k = 3; APPLY BATCH",
            "BEGIN UNLOGGED BATCH USING TIMESTAMP 1 INSERT INTO t (k) VALUES (1) APPLY BATCH",
            "UPDATE t SET v = 'c = c + 1' WHERE k = 1",
            "UPDATE t SET \"if\" = 1 WHERE k = 1",
            "UPDATE t SET v = \"f\"(1) WHERE k = 1",
            "INSERT INTO t (k, v) VALUES (\"NOW\"(), 1)",
        ] {
            assert!(idempotent(write), "{write}");
        }
    }

    #[test]
    fn conditional_writes_may_repeat_but_are_not_idempotent() {
        for conditional in [
            "INSERT INTO t (k) VALUES (1) IF NOT EXISTS",
            "UPDATE t SET v = 1 WHERE k = 1 IF v = 0",
            "UPDATE t SET v = 1 WHERE k = 1 IF w = x",
            "DELETE FROM t WHERE k = 1 if exists",
            "BEGIN BATCH UPDATE t SET v = 1 WHERE k = 0 IF v = 0; APPLY BATCH",
        ] {
            assert!(!idempotent(conditional), "{conditional}");
            assert!(may_repeat(conditional.as_bytes()), "{conditional}");
        }
        // A condition does not make the rest repeatable.
        for other in [
            "UPDATE t SET l = l + [1] WHERE k = 1 IF v = 0",
            "UPDATE t SET v = 1, c = c WHERE k = 1 IF v = 0",
            "INSERT INTO t (k, v) VALUES (1, now()) IF NOT EXISTS",
        ] {
            assert!(!may_repeat(other.as_bytes()), "{other}");
        }
        // What is idempotent may repeat.
        assert!(may_repeat(b"UPDATE t SET v = 1 WHERE k = 1"));
    }

    #[test]
    fn what_may_differ_when_run_again_is_not() {
        for other in [
            // counters and collections that read the current value
            "UPDATE t SET c = c + 1 WHERE k = 1",
            "UPDATE t SET c = c -1 WHERE k = 1",
            "UPDATE t SET c += 1 WHERE k = 1",
            "UPDATE t SET l = l + [1] WHERE k = 1",
            "UPDATE t SET l = [1] + l WHERE k = 1",
            "UPDATE t SET s = s - {1} WHERE k = 1",
            "UPDATE t SET v = 1, c = c WHERE k = 1",
            "UPDATE t SET c = \"c\" 2 WHERE k = 1",
            "UPDATE t SET c = \"c\" + 1 WHERE k = 1",
            "UPDATE t SET c = IF -1",
            "UPDATE t SET c = IF + ?",
            "UPDATE t SET c = c",
            "BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH",
            // a list element by index
            "DELETE l[0] FROM t WHERE k = 1",
            "BEGIN BATCH INSERT INTO t (k) VALUES (1); DELETE l[1] FROM t WHERE k = 1; APPLY BATCH",
            // functions whose result differs at each call
            "INSERT INTO t (k, v) VALUES (now(), 1)",
            "INSERT INTO t (k, v) VALUES (UUID(), 1)",
            "UPDATE t SET ts = toTimestamp(now()) WHERE k = 1",
            "UPDATE t SET ts = currentTimestamp() WHERE k = 1",
            "INSERT INTO t (k, d) VALUES (1, current_date())",
            "INSERT INTO t (k, v) VALUES (system.now(), 1)",
            "INSERT INTO t (k, v) VALUES (\"now\"(), 1)",
            "INSERT INTO t (k, v) VALUES (system.\"current_date\"(), 1)",
            // not data statements, not readable
            "TRUNCATE t",
            "CREATE TABLE t (k int PRIMARY KEY)",
            "USE ks",
            "SELECTED",
            "\"SELECT\" v FROM t",
            "",
            "INSERT INTO t (k, v) VALUES (1, 'unterminated",
        ] {
            assert!(!idempotent(other), "{other}");
            assert!(!may_repeat(other.as_bytes()), "{other}");
        }
        assert!(!is_idempotent(b"\xffSELECT v FROM t"));
    }
}
