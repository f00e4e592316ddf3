//! The driver matrix's legacy workload, for the Rust `scylla` driver: the statements a legacy
//! application sends, with results checked against exact expected values.
//!
//! The same workload runs through autoprep and directly against the server; each run yields a
//! transcript (every result set with its column metadata, page sizes and every error with its
//! server message), and the two transcripts must be identical: that is transparency.
//!
//! Steps: setup (keyspace, table, `USE`); 100 unprepared INSERTs whose literals cover text
//! (quotes, non-ASCII, `;` and comment markers), int, bigint (negative), double (scientific
//! notation), uuid, timestamp (string with zone and integer), list (empty = null), map and blob
//! (empty); unprepared SELECTs with WHERE literals (paged 10 at a time over 100 rows, by the
//! driver's pager and page by page; ranges, IN, points); prepared INSERT and paged prepared
//! SELECT; a `BEGIN BATCH ... APPLY BATCH` text and a driver-API batch of unprepared statements;
//! `ALTER TABLE ... ADD` between runs of the same `SELECT *`; statements the server rejects.
//! Each literal-bearing shape runs at least three times so autoprep prepares it (its default
//! admission threshold is 2) and rewrites the later runs.

use std::fmt::Debug;
use std::ops::ControlFlow;

use futures::TryStreamExt;
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::response::query_result::QueryResult;
use scylla::response::PagingState;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::Statement;
use scylla::value::{CqlTimestamp, CqlValue, Row};
use uuid::Uuid;

/// The keyspace of this driver's workload (dropped and created again by every run).
pub const KEYSPACE: &str = "drivers_rust";

/// 2026-01-02 03:00:05 UTC in milliseconds since the epoch.
const BASE_MS: i64 = 1_767_322_805_000;
/// Rows of partition 1, written by unprepared INSERTs.
const ROWS: i32 = 100;
/// Rows of partition 2, written by a prepared INSERT.
const PREPARED_ROWS: i32 = 20;
/// Rounds of the driver's batch API: enough for autoprep to prepare the children's shapes (its
/// default admission threshold is 2) and rewrite the later rounds.
const BATCH_ROUNDS: i32 = 8;
/// The columns every full-row SELECT names, in table order.
const COLUMNS: &str = "k, c, name, big, score, id, at, tags, attrs, data";

/// One row's cells, as the driver decodes them.
type Cells = Vec<Option<CqlValue>>;

/// What one run of the workload saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Every observation, in order; compared between the run through autoprep and the direct one.
    pub transcript: Vec<String>,
    /// Observations that differ from the expected values.
    pub failures: Vec<String>,
}

/// A result set: column names, the header (names and types) and the rows.
struct RowSet {
    names: Vec<String>,
    header: String,
    rows: Vec<Cells>,
}

/// Runs the whole workload on `session` (connected, no keyspace yet).
pub async fn run(session: &Session) -> Outcome {
    let mut r = Recorder {
        session,
        out: Outcome::default(),
    };
    if r.setup().await {
        r.unprepared_inserts().await;
        r.unprepared_selects().await;
        r.prepared().await;
        r.batches().await;
        r.schema_change().await;
        r.errors().await;
    }
    r.out
}

struct Recorder<'s> {
    session: &'s Session,
    out: Outcome,
}

impl Recorder<'_> {
    fn note(&mut self, line: impl Into<String>) {
        self.out.transcript.push(line.into());
    }

    fn fail(&mut self, what: impl Into<String>) {
        let what = what.into();
        self.out.transcript.push(format!("FAILED {what}"));
        self.out.failures.push(what);
    }

    fn expect<T: PartialEq + Debug>(&mut self, what: &str, got: &T, want: &T) {
        if got != want {
            self.fail(format!("{what}:\n      got  {got:?}\n      want {want:?}"));
        }
    }

    /// An unprepared statement that must succeed.
    async fn query(&mut self, text: &str) -> Option<QueryResult> {
        match self.session.query_unpaged(text, ()).await {
            Ok(result) => Some(result),
            Err(e) => {
                self.fail(format!("{text}: {}", describe(&e)));
                None
            }
        }
    }

    /// An unprepared statement without rows (DDL, DML) that must succeed.
    async fn exec(&mut self, text: &str) -> bool {
        let ok = self.query(text).await.is_some();
        if ok {
            self.note(format!("{text} → ok"));
        }
        ok
    }

    /// An unprepared SELECT, unpaged: its rows, noted in the transcript.
    async fn select(&mut self, text: &str) -> Option<RowSet> {
        let result = self.query(text).await?;
        match row_set(result) {
            Ok(set) => {
                self.note_rows(text, &set);
                Some(set)
            }
            Err(e) => {
                self.fail(format!("{text}: {e}"));
                None
            }
        }
    }

    fn note_rows(&mut self, what: &str, set: &RowSet) {
        self.note(format!("{what} → [{}] {} rows", set.header, set.rows.len()));
        for row in &set.rows {
            self.note(format!("  {row:?}"));
        }
    }

    async fn setup(&mut self) -> bool {
        let ks = KEYSPACE;
        self.exec(&format!("DROP KEYSPACE IF EXISTS {ks}")).await
            && self
                .exec(&format!(
                    "CREATE KEYSPACE {ks} WITH replication = \
                     {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
                ))
                .await
            && self
                .exec(&format!(
                    "CREATE TABLE {ks}.items (k int, c int, name text, big bigint, \
                     score double, id uuid, at timestamp, tags list<text>, \
                     attrs map<text, int>, data blob, PRIMARY KEY (k, c))"
                ))
                .await
            && match self.session.use_keyspace(ks, false).await {
                Ok(()) => {
                    self.note(format!("USE {ks} → ok"));
                    true
                }
                Err(e) => {
                    self.fail(format!("USE {ks}: {e}"));
                    false
                }
            }
    }

    async fn unprepared_inserts(&mut self) {
        for c in 0..ROWS {
            let text = insert_literal(1, c);
            if self.query(&text).await.is_none() {
                return;
            }
        }
        self.note(format!("{ROWS} unprepared INSERTs → ok"));
    }

    async fn unprepared_selects(&mut self) {
        let all = format!("SELECT {COLUMNS} FROM items WHERE k = 1");
        let want: Vec<Cells> = (0..ROWS).map(|c| expected_row(1, c)).collect();

        // The driver's pager, 10 rows a page.
        let paged = Statement::new(all.clone()).with_page_size(10);
        match self.session.query_iter(paged.clone(), ()).await {
            Ok(pager) => match pager.rows_stream::<Row>() {
                Ok(stream) => match stream.try_collect::<Vec<Row>>().await {
                    Ok(rows) => {
                        let rows: Vec<Cells> = rows.into_iter().map(|r| r.columns).collect();
                        self.note(format!("pager over {all}: {} rows", rows.len()));
                        self.expect("rows by the pager (page size 10)", &rows, &want);
                    }
                    Err(e) => self.fail(format!("pager over {all}: {e}")),
                },
                Err(e) => self.fail(format!("pager over {all}: {e}")),
            },
            Err(e) => self.fail(format!("pager over {all}: {e}")),
        }

        // Page by page: the page sizes and the paging state's round trips.
        let mut state = PagingState::start();
        let mut sizes = Vec::new();
        let mut rows = Vec::new();
        loop {
            let (result, next) = match self
                .session
                .query_single_page(paged.clone(), (), state)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    return self.fail(format!(
                        "page {} of {all}: {}",
                        sizes.len() + 1,
                        describe(&e)
                    ))
                }
            };
            match row_set(result) {
                Ok(set) => {
                    sizes.push(set.rows.len());
                    rows.extend(set.rows);
                }
                Err(e) => return self.fail(format!("page {} of {all}: {e}", sizes.len() + 1)),
            }
            match next.into_paging_control_flow() {
                ControlFlow::Break(()) => break,
                ControlFlow::Continue(s) => state = s,
            }
            if sizes.len() > 2 * ROWS as usize {
                return self.fail(format!("{all}: paging does not end"));
            }
        }
        self.note(format!("pages of {all}: {sizes:?}"));
        self.expect("rows page by page (page size 10)", &rows, &want);
        if sizes.iter().any(|&n| n > 10) {
            self.fail(format!("a page holds more than 10 rows: {sizes:?}"));
        }

        let cases: Vec<(String, Vec<i32>)> = vec![
            (format!("{all} AND c >= 20 AND c < 30"), (20..30).collect()),
            (format!("{all} AND c >= 40 AND c < 45"), (40..45).collect()),
            (format!("{all} AND c IN (3, 5, 7)"), vec![3, 5, 7]),
            (format!("{all} AND c IN (11, 97)"), vec![11, 97]),
            (format!("{all} AND c = 42"), vec![42]),
            (format!("{all} AND c = 43"), vec![43]),
            (format!("{all} AND c = 44"), vec![44]),
            (format!("{all} AND c = 1000"), vec![]),
        ];
        for (text, cs) in cases {
            if let Some(set) = self.select(&text).await {
                let want: Vec<Cells> = cs.iter().map(|&c| expected_row(1, c)).collect();
                self.expect(&text, &set.rows, &want);
            }
        }
    }

    async fn prepared(&mut self) {
        let insert = format!("INSERT INTO items ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        let insert = match self.session.prepare(insert.as_str()).await {
            Ok(p) => p,
            Err(e) => return self.fail(format!("PREPARE {insert}: {e}")),
        };
        for c in 0..PREPARED_ROWS {
            if let Err(e) = self
                .session
                .execute_unpaged(&insert, expected_row(2, c))
                .await
            {
                return self.fail(format!("EXECUTE prepared INSERT c={c}: {}", describe(&e)));
            }
        }
        self.note(format!("{PREPARED_ROWS} prepared INSERTs → ok"));

        let select = format!("SELECT {COLUMNS} FROM items WHERE k = ?");
        let mut select = match self.session.prepare(select.as_str()).await {
            Ok(p) => p,
            Err(e) => return self.fail(format!("PREPARE {select}: {e}")),
        };
        select.set_page_size(10);
        let rows = match self.session.execute_iter(select, (2_i32,)).await {
            Ok(pager) => match pager.rows_stream::<Row>() {
                Ok(stream) => stream
                    .try_collect::<Vec<Row>>()
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        match rows {
            Ok(rows) => {
                let rows: Vec<Cells> = rows.into_iter().map(|r| r.columns).collect();
                self.note(format!(
                    "prepared SELECT k = 2, paged by 10: {} rows",
                    rows.len()
                ));
                let want: Vec<Cells> = (0..PREPARED_ROWS).map(|c| expected_row(2, c)).collect();
                self.expect("prepared SELECT k = 2", &rows, &want);
            }
            Err(e) => self.fail(format!("prepared SELECT k = 2: {e}")),
        }
    }

    async fn batches(&mut self) {
        for r in 0..3 {
            let text = format!(
                "BEGIN BATCH INSERT INTO items (k, c, name, big) VALUES (3, {r}, 'batch-{r}', {}); \
                 UPDATE items SET score = {r}.5 WHERE k = 3 AND c = {r}; APPLY BATCH",
                r * 100
            );
            if !self.exec(&text).await {
                return;
            }
        }
        let small = "k, c, name, big, score, tags";
        if let Some(set) = self
            .select(&format!("SELECT {small} FROM items WHERE k = 3"))
            .await
        {
            let want: Vec<Cells> = (0..3)
                .map(|r| {
                    vec![
                        Some(CqlValue::Int(3)),
                        Some(CqlValue::Int(r)),
                        Some(CqlValue::Text(format!("batch-{r}"))),
                        Some(CqlValue::BigInt(i64::from(r) * 100)),
                        Some(CqlValue::Double(f64::from(r) + 0.5)),
                        None,
                    ]
                })
                .collect();
            self.expect(
                "rows written by BEGIN BATCH ... APPLY BATCH",
                &set.rows,
                &want,
            );
        }

        for r in 0..BATCH_ROUNDS {
            let mut batch = Batch::new(BatchType::Logged);
            batch.append_statement(Statement::new(format!(
                "INSERT INTO items (k, c, name) VALUES (4, {r}, 'api-{r}')"
            )));
            batch.append_statement(Statement::new(format!(
                "UPDATE items SET big = {} WHERE k = 4 AND c = {r}",
                r * 7
            )));
            batch.append_statement(Statement::new(format!(
                "INSERT INTO items (k, c, tags) VALUES (4, {}, ['q{r}'])",
                r + 100
            )));
            match self.session.batch(&batch, ((), (), ())).await {
                Ok(_) => self.note(format!(
                    "driver batch of 3 unprepared statements, round {r} → ok"
                )),
                Err(e) => return self.fail(format!("driver batch round {r}: {}", describe(&e))),
            }
        }
        if let Some(set) = self
            .select(&format!("SELECT {small} FROM items WHERE k = 4"))
            .await
        {
            let mut want: Vec<Cells> = (0..BATCH_ROUNDS)
                .map(|r| {
                    vec![
                        Some(CqlValue::Int(4)),
                        Some(CqlValue::Int(r)),
                        Some(CqlValue::Text(format!("api-{r}"))),
                        Some(CqlValue::BigInt(i64::from(r) * 7)),
                        None,
                        None,
                    ]
                })
                .collect();
            want.extend((0..BATCH_ROUNDS).map(|r| {
                vec![
                    Some(CqlValue::Int(4)),
                    Some(CqlValue::Int(r + 100)),
                    None,
                    None,
                    None,
                    Some(CqlValue::List(vec![CqlValue::Text(format!("q{r}"))])),
                ]
            }));
            self.expect("rows written by the driver's batch", &set.rows, &want);
        }
    }

    async fn schema_change(&mut self) {
        let names: Vec<&str> = COLUMNS.split(", ").collect();
        // SELECT * lists the key columns, then the others in alphabetical order.
        let before = [
            "k", "c", "at", "attrs", "big", "data", "id", "name", "score", "tags",
        ];
        let after = [
            "k", "c", "at", "attrs", "big", "data", "extra", "id", "name", "score", "tags",
        ];
        let by_name = |c: i32, extra: Option<CqlValue>, order: &[&str]| -> Cells {
            let row = expected_row(1, c);
            order
                .iter()
                .map(|col| match names.iter().position(|n| n == col) {
                    Some(i) => row[i].clone(),
                    None => extra.clone(),
                })
                .collect()
        };

        for c in [5, 6, 7] {
            let text = format!("SELECT * FROM items WHERE k = 1 AND c = {c}");
            if let Some(set) = self.select(&text).await {
                self.expect(&format!("{text}: columns"), &set.names, &strings(&before));
                self.expect(&text, &set.rows, &vec![by_name(c, None, &before)]);
            }
        }
        if !self.exec("ALTER TABLE items ADD extra text").await {
            return;
        }
        // c = 5 again: the very statement that ran (and autoprep prepared) before the ALTER.
        for c in [5, 8, 9] {
            let text = format!("SELECT * FROM items WHERE k = 1 AND c = {c}");
            if let Some(set) = self.select(&text).await {
                self.expect(
                    &format!("{text} after ALTER: columns"),
                    &set.names,
                    &strings(&after),
                );
                self.expect(&text, &set.rows, &vec![by_name(c, None, &after)]);
            }
        }
        for c in 11..15 {
            if !self
                .exec(&format!(
                    "UPDATE items SET extra = 'extra-{c}' WHERE k = 1 AND c = {c}"
                ))
                .await
            {
                return;
            }
        }
        let text = "SELECT * FROM items WHERE k = 1 AND c = 12";
        if let Some(set) = self.select(text).await {
            let extra = Some(CqlValue::Text("extra-12".into()));
            self.expect(text, &set.rows, &vec![by_name(12, extra, &after)]);
        }
    }

    async fn errors(&mut self) {
        // Each statement with the kind of server error it must get (its message is compared
        // with the direct run's through the transcript).
        let cases = [
            ("SELEC * FROM items", DbError::SyntaxError),
            (
                "INSERT INTO items (k, c, name) VALUES (1, 'x', 'y')",
                DbError::Invalid,
            ),
            ("SELECT * FROM nosuch WHERE k = 1", DbError::Invalid),
            (
                "SELECT * FROM items WHERE k = 1 AND name = 'x'",
                DbError::Invalid,
            ),
            (
                "INSERT INTO items (k, c, big) VALUES (1, 2, 99999999999999999999)",
                DbError::Invalid,
            ),
        ];
        for (text, kind) in cases {
            for _ in 0..3 {
                match self.session.query_unpaged(text, ()).await {
                    Ok(_) => self.fail(format!("{text}: succeeded, want a {kind:?} error")),
                    Err(e) => {
                        self.note(format!("{text} → {}", describe(&e)));
                        let server = match &e {
                            ExecutionError::LastAttemptError(RequestAttemptError::DbError(
                                db,
                                _,
                            )) => Some(db),
                            _ => None,
                        };
                        if server != Some(&kind) {
                            self.fail(format!(
                                "{text}: want a {kind:?} error, got {}",
                                describe(&e)
                            ));
                        }
                    }
                }
            }
        }
    }
}

/// The unprepared INSERT of row (k, c), with every value written as a literal.
pub fn insert_literal(k: i32, c: i32) -> String {
    let name = name(c).replace('\'', "''");
    let big = big(c);
    let score = if c == 50 {
        "5475e-2".to_string() // 54.75 in scientific notation
    } else {
        format!("{:?}", score(c))
    };
    let id = id(c);
    let at = if c % 2 == 0 {
        format!("'2026-01-02 {:02}:{:02}:05+0000'", 3 + c / 60, c % 60)
    } else {
        at_ms(c).to_string()
    };
    let tags = if c % 10 == 0 {
        "[]".to_string()
    } else {
        format!("['t{c}', 'x']")
    };
    let attrs = format!("{{'a': {c}, 'b': {}}}", -c);
    let data: String = blob(c).iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "INSERT INTO items ({COLUMNS}) VALUES ({k}, {c}, '{name}', {big}, {score}, {id}, {at}, \
         {tags}, {attrs}, 0x{data})"
    )
}

/// Row (k, c) as the server returns it for `SELECT {COLUMNS}`.
pub fn expected_row(k: i32, c: i32) -> Cells {
    vec![
        Some(CqlValue::Int(k)),
        Some(CqlValue::Int(c)),
        Some(CqlValue::Text(name(c))),
        Some(CqlValue::BigInt(big(c))),
        Some(CqlValue::Double(score(c))),
        Some(CqlValue::Uuid(id(c))),
        Some(CqlValue::Timestamp(CqlTimestamp(at_ms(c)))),
        // An empty collection is no collection: the server returns null.
        (c % 10 != 0).then(|| {
            CqlValue::List(vec![
                CqlValue::Text(format!("t{c}")),
                CqlValue::Text("x".into()),
            ])
        }),
        Some(CqlValue::Map(vec![
            (CqlValue::Text("a".into()), CqlValue::Int(c)),
            (CqlValue::Text("b".into()), CqlValue::Int(-c)),
        ])),
        Some(CqlValue::Blob(blob(c))),
    ]
}

fn name(c: i32) -> String {
    match c % 10 {
        3 => format!("it's ünïcödé ✓ {c}"),
        4 => format!("x; -- /* {c} */ y"),
        _ => format!("name-{c}"),
    }
}

fn big(c: i32) -> i64 {
    let v = i64::from(c) * 1_000_000_007;
    if c % 2 == 1 {
        -v
    } else {
        v
    }
}

fn score(c: i32) -> f64 {
    f64::from(c) * 1.5 - 20.25
}

fn id(c: i32) -> Uuid {
    Uuid::from_u128(0x0000_0000_0000_4000_8000_0000_0000_0000 | c as u128)
}

fn at_ms(c: i32) -> i64 {
    BASE_MS + i64::from(c) * 60_000
}

fn blob(c: i32) -> Vec<u8> {
    if c % 10 == 7 {
        Vec::new()
    } else {
        vec![c as u8, 0xff, 0x00, 0xab]
    }
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn row_set(result: QueryResult) -> Result<RowSet, String> {
    let rows = result.into_rows_result().map_err(|e| e.to_string())?;
    let specs = rows.column_specs();
    let names: Vec<String> = specs.iter().map(|c| c.name().to_string()).collect();
    let header = specs
        .iter()
        .map(|c| format!("{} {:?}", c.name(), c.typ()))
        .collect::<Vec<_>>()
        .join(", ");
    let cells = rows
        .rows::<Row>()
        .map_err(|e| e.to_string())?
        .map(|r| r.map(|r| r.columns))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok(RowSet {
        names,
        header,
        rows: cells,
    })
}

/// A server error as its kind and message; anything else as the driver's own words.
pub fn describe(e: &ExecutionError) -> String {
    match e {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, message)) => {
            format!("server error {db:?}: {message}")
        }
        other => format!("driver error: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_cover_the_types() {
        assert_eq!(
            insert_literal(1, 3),
            "INSERT INTO items (k, c, name, big, score, id, at, tags, attrs, data) VALUES \
             (1, 3, 'it''s ünïcödé ✓ 3', -3000000021, -15.75, \
             00000000-0000-4000-8000-000000000003, 1767322985000, ['t3', 'x'], \
             {'a': 3, 'b': -3}, 0x03ff00ab)"
        );
        assert!(insert_literal(1, 50).contains(", 5475e-2, "));
        assert!(insert_literal(1, 10).contains(", '2026-01-02 03:10:05+0000', [], "));
        assert!(insert_literal(1, 17).ends_with(", 0x)"));
        assert_eq!(score(50), 54.75);
    }
}
