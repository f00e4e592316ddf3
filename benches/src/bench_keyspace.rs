//! The savings benchmark writes only to a keyspace of its own, so that it is safe to point at
//! a cluster that matters (a staging cluster, a colleague's node): it creates `autoprep_bench`
//! with a marker table, and before it writes anything (`CREATE TABLE`, `ALTER`, `TRUNCATE`,
//! the workload) it checks that an existing `autoprep_bench` is its own. A keyspace of that
//! name that holds anything else is refused, untouched.
//!
//! Its own means: a marker table `autoprep_bench.autoprep_bench_owner` whose comment is
//! [`MARKER_COMMENT`], and besides it nothing but the benchmarks' tables (`savings`, and `ts` of
//! the `e2e` benchmark, which shares the keyspace), each with exactly the benchmarks' columns,
//! and no views or user types. A keyspace that earlier runs created (only those tables, those
//! columns, no marker) is its own too and is marked.

use crate::legacy::{self, KEYSPACE};
use crate::load::Conn;
use anyhow::{bail, Context, Result};

/// The marker table's name, inside [`KEYSPACE`].
pub const MARKER_TABLE: &str = "autoprep_bench_owner";
/// The comment the marker table carries.
pub const MARKER_COMMENT: &str =
    "autoprep savings benchmark: this keyspace is the benchmark's own (it truncates its tables)";
/// The benchmarks' tables inside [`KEYSPACE`]: `savings` (`legacy::TABLE`) and `ts` (the `e2e`
/// benchmark's).
const BENCH_TABLES: [&str; 2] = ["savings", "ts"];
/// Their columns and CQL types, as `system_schema.columns` lists them.
const BENCH_COLUMNS: [(&str, &str); 3] =
    [("at", "timestamp"), ("sensor", "text"), ("value", "double")];

/// What an existing keyspace of the benchmark's name holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Tables with their comments.
    pub tables: Vec<(String, String)>,
    /// Every table's columns: (table, column, type).
    pub columns: Vec<(String, String, String)>,
    /// Materialized views and user types, by name.
    pub others: Vec<String>,
}

/// Whose the keyspace is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// No keyspace of that name: the benchmark creates it, marked.
    Absent,
    /// Marked, and holding only what the benchmark creates.
    Ours,
    /// Earlier runs' (the benchmarks' tables, exactly, and nothing else; no marker): marked now.
    Earlier,
    /// Somebody else's: the reason.
    Foreign(String),
}

/// Judges an existing keyspace's contents (`None`: there is none).
pub fn judge(contents: Option<&Contents>) -> Ownership {
    let Some(c) = contents else {
        return Ownership::Absent;
    };
    if !c.others.is_empty() {
        return Ownership::Foreign(format!(
            "it has views or types the benchmark never creates: {}",
            c.others.join(", ")
        ));
    }
    let strangers: Vec<&str> = c
        .tables
        .iter()
        .map(|(t, _)| t.as_str())
        .filter(|t| !BENCH_TABLES.contains(t) && *t != MARKER_TABLE)
        .collect();
    if !strangers.is_empty() {
        return Ownership::Foreign(format!(
            "it has tables the benchmarks never create: {}",
            strangers.join(", ")
        ));
    }
    let want: Vec<(String, String)> = BENCH_COLUMNS
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    let mut has_bench = false;
    for (table, _) in c.tables.iter().filter(|(t, _)| t != MARKER_TABLE) {
        has_bench = true;
        let mut cols: Vec<(String, String)> = c
            .columns
            .iter()
            .filter(|(t, _, _)| t == table)
            .map(|(_, n, ty)| (n.clone(), ty.clone()))
            .collect();
        cols.sort();
        if cols != want {
            return Ownership::Foreign(format!(
                "its table {table} is not the benchmarks' (columns {cols:?})"
            ));
        }
    }
    match c.tables.iter().find(|(t, _)| t == MARKER_TABLE) {
        Some((_, comment)) if comment == MARKER_COMMENT => Ownership::Ours,
        Some((_, comment)) => Ownership::Foreign(format!(
            "its table {MARKER_TABLE} does not carry the benchmark's comment ({comment:?})"
        )),
        None if has_bench => Ownership::Earlier,
        // An empty keyspace of that name: not the benchmark's (it would have left its marker).
        None => Ownership::Foreign("it exists without the benchmark's marker table".into()),
    }
}

fn text(cell: &Option<Vec<u8>>) -> String {
    cell.as_deref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// Reads what the keyspace holds, or `None` when it does not exist.
pub async fn contents(conn: &mut Conn) -> Result<Option<Contents>> {
    let ks = conn
        .rows(&format!(
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = '{KEYSPACE}'"
        ))
        .await?;
    if ks.is_empty() {
        return Ok(None);
    }
    let tables = conn
        .rows(&format!(
            "SELECT table_name, comment FROM system_schema.tables WHERE keyspace_name = '{KEYSPACE}'"
        ))
        .await?
        .iter()
        .map(|r| (text(&r[0]), text(&r[1])))
        .collect();
    let columns = conn
        .rows(&format!(
            "SELECT table_name, column_name, type FROM system_schema.columns \
             WHERE keyspace_name = '{KEYSPACE}'"
        ))
        .await?
        .iter()
        .map(|r| (text(&r[0]), text(&r[1]), text(&r[2])))
        .collect();
    let mut others = Vec::new();
    for (what, q) in [
        ("view", "SELECT view_name FROM system_schema.views"),
        ("type", "SELECT type_name FROM system_schema.types"),
    ] {
        let rows = conn
            .rows(&format!("{q} WHERE keyspace_name = '{KEYSPACE}'"))
            .await?;
        others.extend(rows.iter().map(|r| format!("{what} {}", text(&r[0]))));
    }
    Ok(Some(Contents {
        tables,
        columns,
        others,
    }))
}

/// Makes sure the benchmark's keyspace is its own before it writes: creates it (with
/// `replication`) and its marker when absent, marks an earlier benchmark's, and refuses
/// anything else. Returns what it found.
pub async fn claim(conn: &mut Conn, replication: &str) -> Result<Ownership> {
    let found = judge(contents(conn).await?.as_ref());
    match &found {
        Ownership::Foreign(why) => bail!(
            "keyspace {KEYSPACE} exists and is not the savings benchmark's ({why}): refusing to \
             write to it. Drop it or rename it yourself if it is really disposable."
        ),
        Ownership::Ours => return Ok(found),
        Ownership::Absent => {
            conn.query(&format!(
                "CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = {replication}"
            ))
            .await?;
            legacy::wait_schema_agreement(conn).await?;
        }
        Ownership::Earlier => {}
    }
    conn.query(&format!(
        "CREATE TABLE IF NOT EXISTS {KEYSPACE}.{MARKER_TABLE} (k int PRIMARY KEY) \
         WITH comment = '{}'",
        MARKER_COMMENT.replace('\'', "''")
    ))
    .await
    .context("create the benchmark keyspace's marker table")?;
    legacy::wait_schema_agreement(conn).await?;
    // Somebody may have created the keyspace between the check and the CREATE (IF NOT EXISTS
    // would have kept theirs): judge again.
    match judge(contents(conn).await?.as_ref()) {
        Ownership::Ours => Ok(found),
        other => bail!("keyspace {KEYSPACE} is not the benchmark's after marking it: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keyspace holding `tables` (with comments); each benchmark table with `cols`.
    fn with(tables: &[(&str, &str)], cols: &[(&str, &str)]) -> Contents {
        let mut columns = Vec::new();
        for (t, _) in tables.iter().filter(|(t, _)| *t != MARKER_TABLE) {
            for (n, ty) in cols {
                columns.push((t.to_string(), n.to_string(), ty.to_string()));
            }
        }
        Contents {
            tables: tables
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            columns,
            others: Vec::new(),
        }
    }

    const COLS: [(&str, &str); 3] = [("sensor", "text"), ("at", "timestamp"), ("value", "double")];

    #[test]
    fn the_benchmarks_own_keyspace() {
        assert_eq!(judge(None), Ownership::Absent);
        let ours = with(&[(MARKER_TABLE, MARKER_COMMENT), ("savings", "")], &COLS);
        assert_eq!(judge(Some(&ours)), Ownership::Ours);
        // Marked before its table was created; with the e2e benchmark's table too.
        assert_eq!(
            judge(Some(&with(&[(MARKER_TABLE, MARKER_COMMENT)], &[]))),
            Ownership::Ours
        );
        let both = with(
            &[(MARKER_TABLE, MARKER_COMMENT), ("savings", ""), ("ts", "")],
            &COLS,
        );
        assert_eq!(judge(Some(&both)), Ownership::Ours);
        // Earlier runs': the benchmarks' tables, exactly, and nothing else.
        assert_eq!(
            judge(Some(&with(&[("savings", "")], &COLS))),
            Ownership::Earlier
        );
        assert_eq!(
            judge(Some(&with(&[("ts", ""), ("savings", "")], &COLS))),
            Ownership::Earlier
        );
    }

    #[test]
    fn anything_else_is_refused() {
        let foreign = |c: &Contents| matches!(judge(Some(c)), Ownership::Foreign(_));
        // Empty, with no marker.
        assert!(foreign(&with(&[], &[])));
        // A table of somebody else's beside ours.
        assert!(foreign(&with(
            &[
                (MARKER_TABLE, MARKER_COMMENT),
                ("savings", ""),
                ("users", "")
            ],
            &COLS
        )));
        // A table named like ours with other columns.
        let mut other = COLS.to_vec();
        other.push(("note", "text"));
        assert!(foreign(&with(&[("savings", "")], &other)));
        assert!(foreign(&with(
            &[(MARKER_TABLE, MARKER_COMMENT), ("ts", "")],
            &other
        )));
        assert!(foreign(&with(&[("savings", "")], &COLS[..2])));
        // A marker table without the marker's comment.
        assert!(foreign(&with(&[(MARKER_TABLE, "mine")], &[])));
        // A view or a type.
        let mut c = with(&[(MARKER_TABLE, MARKER_COMMENT)], &[]);
        c.others.push("view by_value".into());
        assert!(foreign(&c));
    }
}
