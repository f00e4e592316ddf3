//! The legacy time-series workload of the savings benchmark: inserts, point selects and updates,
//! sent either the legacy way (QUERY with the values inline as literals) or prepared (EXECUTE
//! with bound values), or prepared one by one (PREPARE of the text with the values inline, then
//! EXECUTE of the id it returns: the second legacy pattern, of a gocql application formatting
//! its statements with `fmt.Sprintf`, or a Java one calling `prepare()` on each formatted
//! statement). Every form carries the same values for the same sequence number, so the modes of
//! a run differ only in how the statements reach the server.

use crate::load::{Conn, Workload};
use crate::token_aware::TokenAware;
use anyhow::{bail, Context, Result};
use autoprep_protocol::envelope::{Envelope, Opcode, ProtocolVersion};
use autoprep_protocol::message::error::{code, ErrorView};
use autoprep_protocol::message::execute::encode_execute;
use autoprep_protocol::message::prepare::encode_prepare;
use autoprep_protocol::message::query::{encode_query, QueryParams, Values};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::primitives::{write_value, Value};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keyspace of the benchmark's table.
pub const KEYSPACE: &str = "autoprep_bench";
/// The benchmark's table, `KEYSPACE.TABLE`.
pub const TABLE: &str = "autoprep_bench.savings";

/// 2026-01-01T00:00:00Z: first timestamp of the rows that selects and updates address.
const KEYS_BASE_MS: i64 = 1_767_225_600_000;
/// 2027-01-01T00:00:00Z: first timestamp of inserted rows (never collides with the keyed rows
/// while fewer than 31 536 000 000 keys exist).
const INSERT_BASE_MS: i64 = 1_798_761_600_000;
/// Distinct sensors (partitions).
const SENSORS: u64 = 1000;

/// The keyspace's replication unless told otherwise: one replica, as on a single node.
pub const DEFAULT_REPLICATION: &str = "{'class': 'SimpleStrategy', 'replication_factor': 1}";

/// One kind of statement of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Select,
    Update,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Insert, Op::Select, Op::Update];

    pub fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Select => "select",
            Op::Update => "update",
        }
    }

    /// The statement with bind markers, as a driver would prepare it.
    pub fn prepared_text(self) -> String {
        match self {
            Op::Insert => format!("INSERT INTO {TABLE} (sensor, at, value) VALUES (?, ?, ?)"),
            Op::Select => {
                format!("SELECT sensor, at, value FROM {TABLE} WHERE sensor = ? AND at = ?")
            }
            Op::Update => format!("UPDATE {TABLE} SET value = ? WHERE sensor = ? AND at = ?"),
        }
    }
}

/// Relative weights of insert, select and update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    pub insert: u32,
    pub select: u32,
    pub update: u32,
}

impl Mix {
    /// Parses `insert=8,select=1,update=1` (missing kinds weigh 0) or a single kind name
    /// (`insert`), which means only that kind.
    pub fn parse(s: &str) -> Result<Mix> {
        let mut m = Mix {
            insert: 0,
            select: 0,
            update: 0,
        };
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, w) = match part.split_once('=') {
                Some((n, w)) => (n.trim(), w.trim().parse::<u32>().context("mix weight")?),
                None => (part, 1),
            };
            match name {
                "insert" => m.insert = w,
                "select" => m.select = w,
                "update" => m.update = w,
                _ => bail!("unknown statement kind {name:?} (insert, select, update)"),
            }
        }
        if m.total() == 0 {
            bail!("the mix {s:?} has no statement with a positive weight");
        }
        Ok(m)
    }

    fn total(&self) -> u32 {
        self.insert + self.select + self.update
    }

    /// `insert=8,select=1,update=1` with the zero weights left out.
    pub fn describe(&self) -> String {
        Op::ALL
            .iter()
            .map(|&op| (op, self.weight(op)))
            .filter(|&(_, w)| w > 0)
            .map(|(op, w)| format!("{}={w}", op.name()))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn weight(&self, op: Op) -> u32 {
        match op {
            Op::Insert => self.insert,
            Op::Select => self.select,
            Op::Update => self.update,
        }
    }

    /// The kinds with a positive weight.
    pub fn ops(&self) -> Vec<Op> {
        Op::ALL
            .into_iter()
            .filter(|&op| self.weight(op) > 0)
            .collect()
    }

    fn pick(&self, h: u64) -> Op {
        let r = (h % u64::from(self.total())) as u32;
        if r < self.insert {
            Op::Insert
        } else if r < self.insert + self.select {
            Op::Select
        } else {
            Op::Update
        }
    }
}

/// How the statements reach the server.
#[derive(Debug, Clone)]
pub enum Form {
    /// QUERY with the values inline.
    Literal,
    /// EXECUTE of the prepared ids of insert, select and update (in [`Op::ALL`] order; an
    /// empty id for a kind the mix does not use).
    Prepared([Vec<u8>; 3]),
    /// Each operation PREPAREs its own text (the literal text: every operation's is distinct,
    /// as inserts write rows of their own), then EXECUTEs the id the answer carries; an
    /// UNPREPARED answer to the EXECUTE (the statement was evicted from the server's cache in
    /// between) prepares it again, as drivers do. With `bind_value` the double `value` stays a
    /// `?` in the text and is bound on the EXECUTE (a driver's statement with one marker and
    /// the other values formatted in); selects have no marker then.
    PrepareEach { bind_value: bool },
}

/// How many times one operation of [`Form::PrepareEach`] prepares its statement again after
/// an UNPREPARED answer before it counts as an error.
const REPREPARES: u32 = 3;

/// The workload: a mix of statements on `TABLE`.
pub struct Legacy {
    pub mix: Mix,
    pub form: Form,
    /// Rows addressed by selects and updates (written by [`preload`]).
    pub keys: u64,
    /// Added to every sequence number of inserts, so that each phase of a run writes new rows.
    pub insert_offset: u64,
    /// Literal timestamps as integers (epoch milliseconds) rather than ISO text with a zone.
    pub millis: bool,
    /// Send each request to a replica of its partition ([`Workload::node`] is an index into
    /// the router's nodes), as a token-aware driver does; `None`: all to the first address.
    pub router: Option<Arc<TokenAware>>,
}

/// splitmix64: spreads sequence numbers over the mix and the keys.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The row a sequence number addresses: sensor number and timestamp in epoch milliseconds.
fn insert_row(seq: u64) -> (u64, i64) {
    (seq % SENSORS, INSERT_BASE_MS + seq as i64)
}

fn keyed_row(key: u64) -> (u64, i64) {
    (key % SENSORS, KEYS_BASE_MS + key as i64 * 1000)
}

/// A double value with one decimal, the same for the literal and the bound form.
fn value_of(h: u64) -> f64 {
    (h % 100_000) as f64 / 10.0
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Appends `'yyyy-MM-dd HH:mm:ss.SSS+0000'` for epoch milliseconds `ms`.
pub fn push_timestamp_literal(out: &mut String, ms: i64) {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let _ = write!(
        out,
        "'{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{milli:03}+0000'"
    );
}

fn params(values: Option<Values<'_>>) -> QueryParams<'_> {
    QueryParams {
        consistency: 1, // ONE
        values,
        ..Default::default()
    }
}

impl Legacy {
    /// What request number `seq` does: the kind, the row (sensor, ms) and a value.
    fn plan(&self, seq: u64) -> (Op, u64, i64, f64) {
        let h = mix64(seq);
        let op = self.mix.pick(h);
        let (sensor, at) = match op {
            Op::Insert => insert_row(seq + self.insert_offset),
            Op::Select | Op::Update => keyed_row(mix64(h) % self.keys.max(1)),
        };
        (op, sensor, at, value_of(h >> 20))
    }

    fn push_at(&self, text: &mut String, at: i64) {
        if self.millis {
            let _ = write!(text, "{at}");
        } else {
            push_timestamp_literal(text, at);
        }
    }

    /// The literal text of request `seq` (also what autoprep receives).
    pub fn literal_text(&self, seq: u64, text: &mut String) -> Op {
        self.text_of(seq, false, text)
    }

    /// The text of request `seq`, with the value as a `?` marker when `value_marker`.
    fn text_of(&self, seq: u64, value_marker: bool, text: &mut String) -> Op {
        let (op, sensor, at, value) = self.plan(seq);
        let value = if value_marker {
            "?".to_owned()
        } else {
            format!("{value:.1}")
        };
        text.clear();
        match op {
            Op::Insert => {
                let _ = write!(
                    text,
                    "INSERT INTO {TABLE} (sensor, at, value) VALUES ('s-{sensor}', "
                );
                self.push_at(text, at);
                let _ = write!(text, ", {value})");
            }
            Op::Select => {
                let _ = write!(
                    text,
                    "SELECT sensor, at, value FROM {TABLE} WHERE sensor = 's-{sensor}' AND at = "
                );
                self.push_at(text, at);
            }
            Op::Update => {
                let _ = write!(
                    text,
                    "UPDATE {TABLE} SET value = {value} WHERE sensor = 's-{sensor}' AND at = "
                );
                self.push_at(text, at);
            }
        }
        op
    }

    /// The PREPARE of request `seq`'s own text ([`Form::PrepareEach`]).
    fn prepare_each(&self, seq: u64, bind_value: bool, out: &mut Vec<u8>) -> Opcode {
        let mut text = String::with_capacity(160);
        self.text_of(seq, bind_value, &mut text);
        let _ = encode_prepare(ProtocolVersion::V4, text.as_bytes(), None, out);
        Opcode::PREPARE
    }

    /// The EXECUTE of request `seq`'s own prepared statement `id` ([`Form::PrepareEach`]):
    /// no values, or the value its text kept as a marker.
    fn execute_each(&self, seq: u64, bind_value: bool, id: &[u8], out: &mut Vec<u8>) {
        let (op, _, _, value) = self.plan(seq);
        let mut raw = Vec::with_capacity(12);
        let values = (bind_value && op != Op::Select).then(|| {
            let _ = write_value(&mut raw, Value::Bytes(&value.to_be_bytes()));
            Values {
                count: 1,
                named: false,
                raw: &raw,
            }
        });
        let _ = encode_execute(ProtocolVersion::V4, id, &[], &params(values), out);
    }
}

impl Workload for Legacy {
    fn node(&self, seq: u64) -> usize {
        let Some(router) = &self.router else {
            return 0;
        };
        let (_, sensor, ..) = self.plan(seq);
        // The partition key is the sensor's text, whose routing key is its bytes; the turn
        // among several local replicas is spread over the sequence numbers.
        router.node_for(format!("s-{sensor}").as_bytes(), mix64(!seq))
    }

    fn next(&self, seq: u64, step: u32, answer: &Envelope, out: &mut Vec<u8>) -> Option<Opcode> {
        let Form::PrepareEach { bind_value } = self.form else {
            return None;
        };
        match answer.header().opcode {
            Opcode::RESULT => match ResultView::parse(answer.body(), ProtocolVersion::V4) {
                Ok(ResultView::Prepared(p)) => {
                    self.execute_each(seq, bind_value, p.id, out);
                    Some(Opcode::EXECUTE)
                }
                // The EXECUTE's answer: the operation is done.
                _ => None,
            },
            Opcode::ERROR
                if step <= 2 * REPREPARES
                    && ErrorView::parse(answer.body(), ProtocolVersion::V4)
                        .is_ok_and(|e| e.code == code::UNPREPARED) =>
            {
                Some(self.prepare_each(seq, bind_value, out))
            }
            _ => None,
        }
    }

    fn request(&self, seq: u64, out: &mut Vec<u8>) -> Opcode {
        match &self.form {
            &Form::PrepareEach { bind_value } => self.prepare_each(seq, bind_value, out),
            Form::Literal => {
                let mut text = String::with_capacity(160);
                self.literal_text(seq, &mut text);
                let _ = encode_query(ProtocolVersion::V4, text.as_bytes(), &params(None), out);
                Opcode::QUERY
            }
            Form::Prepared(ids) => {
                let (op, sensor, at, value) = self.plan(seq);
                let sensor = format!("s-{sensor}");
                let mut raw = Vec::with_capacity(48);
                let count = match op {
                    Op::Insert => {
                        let _ = write_value(&mut raw, Value::Bytes(sensor.as_bytes()));
                        let _ = write_value(&mut raw, Value::Bytes(&at.to_be_bytes()));
                        let _ = write_value(&mut raw, Value::Bytes(&value.to_be_bytes()));
                        3
                    }
                    Op::Select => {
                        let _ = write_value(&mut raw, Value::Bytes(sensor.as_bytes()));
                        let _ = write_value(&mut raw, Value::Bytes(&at.to_be_bytes()));
                        2
                    }
                    Op::Update => {
                        let _ = write_value(&mut raw, Value::Bytes(&value.to_be_bytes()));
                        let _ = write_value(&mut raw, Value::Bytes(sensor.as_bytes()));
                        let _ = write_value(&mut raw, Value::Bytes(&at.to_be_bytes()));
                        3
                    }
                };
                let id = &ids[op as usize];
                let values = Values {
                    count,
                    named: false,
                    raw: &raw,
                };
                let _ = encode_execute(ProtocolVersion::V4, id, &[], &params(Some(values)), out);
                Opcode::EXECUTE
            }
        }
    }
}

/// Creates the keyspace (with `replication`, a CQL map such as [`DEFAULT_REPLICATION`]; an
/// existing keyspace is altered to it) and the table (and empties the table when `truncate`),
/// with automatic compaction on or off. Each schema change waits until every node agrees.
pub async fn create_schema(
    conn: &mut Conn,
    replication: &str,
    truncate: bool,
    compaction: bool,
) -> Result<()> {
    conn.query(&format!(
        "CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = {replication}"
    ))
    .await?;
    wait_schema_agreement(conn).await?;
    // An emptied table holds nothing to stream or repair after a change of replication.
    conn.query(&format!(
        "ALTER KEYSPACE {KEYSPACE} WITH replication = {replication}"
    ))
    .await?;
    wait_schema_agreement(conn).await?;
    conn.query(&format!(
        "CREATE TABLE IF NOT EXISTS {TABLE} (sensor text, at timestamp, value double, \
         PRIMARY KEY (sensor, at))"
    ))
    .await?;
    wait_schema_agreement(conn).await?;
    // Set on a table of an earlier run too. Off, the SSTables pile up until the TRUNCATE of the
    // next run (see `--compaction` of `savings` for when that is wanted).
    conn.query(&format!(
        "ALTER TABLE {TABLE} WITH compaction = \
         {{'class': 'SizeTieredCompactionStrategy', 'enabled': '{compaction}'}}"
    ))
    .await?;
    wait_schema_agreement(conn).await?;
    if truncate {
        conn.query(&format!("TRUNCATE {TABLE}")).await?;
    }
    Ok(())
}

/// Waits (at most 30 s) until the node of `conn` and every peer it lists report the same
/// schema version, as drivers do after a schema change; at once on a single node.
pub async fn wait_schema_agreement(conn: &mut Conn) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut versions = conn.rows("SELECT schema_version FROM system.local").await?;
        versions.extend(conn.rows("SELECT schema_version FROM system.peers").await?);
        let first = versions.first().and_then(|r| r.first()).cloned().flatten();
        if versions
            .iter()
            .all(|r| r.first().cloned().flatten() == first)
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("the nodes did not agree on a schema version within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Prepares the statements of `mix` on `conn`; the ids are valid on every connection to the node.
pub async fn prepare(conn: &mut Conn, mix: &Mix) -> Result<[Vec<u8>; 3]> {
    let mut ids: [Vec<u8>; 3] = Default::default();
    for op in mix.ops() {
        ids[op as usize] = conn.prepare(&op.prepared_text()).await?;
    }
    Ok(ids)
}

/// A workload that writes the `keys` rows selects and updates address, once each.
pub struct Preload {
    pub id: Vec<u8>,
}

impl Workload for Preload {
    fn request(&self, seq: u64, out: &mut Vec<u8>) -> Opcode {
        // load::run numbers the requests of connection c as c, c + 64, c + 128, ...: the
        // preload runs on one connection, so seq / 64 is dense.
        let (sensor, at) = keyed_row(seq / 64);
        let sensor = format!("s-{sensor}");
        let mut raw = Vec::with_capacity(48);
        let _ = write_value(&mut raw, Value::Bytes(sensor.as_bytes()));
        let _ = write_value(&mut raw, Value::Bytes(&at.to_be_bytes()));
        let _ = write_value(&mut raw, Value::Bytes(&1.0f64.to_be_bytes()));
        let values = Values {
            count: 3,
            named: false,
            raw: &raw,
        };
        let _ = encode_execute(
            ProtocolVersion::V4,
            &self.id,
            &[],
            &params(Some(values)),
            out,
        );
        Opcode::EXECUTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_literals() {
        let mut s = String::new();
        push_timestamp_literal(&mut s, 0);
        assert_eq!(s, "'1970-01-01 00:00:00.000+0000'");
        s.clear();
        push_timestamp_literal(&mut s, KEYS_BASE_MS + 86_400_000 * 59 + 3_723_004);
        assert_eq!(s, "'2026-03-01 01:02:03.004+0000'");
        s.clear();
        push_timestamp_literal(&mut s, 951_782_400_000); // leap day 2000
        assert_eq!(s, "'2000-02-29 00:00:00.000+0000'");
        s.clear();
        push_timestamp_literal(&mut s, -1);
        assert_eq!(s, "'1969-12-31 23:59:59.999+0000'");
    }

    #[test]
    fn mixes() {
        let m = Mix::parse("insert=8,select=1,update=1").unwrap();
        assert_eq!(m.describe(), "insert=8,select=1,update=1");
        assert_eq!(Mix::parse("insert").unwrap().ops(), vec![Op::Insert]);
        assert!(Mix::parse("insert=0").is_err());
        assert!(Mix::parse("delete=1").is_err());
        let n = (0..10_000)
            .filter(|&s| m.pick(mix64(s)) == Op::Insert)
            .count();
        assert!((7_600..8_400).contains(&n), "{n}");
    }

    fn response(opcode: Opcode, body: &[u8]) -> Envelope {
        use autoprep_protocol::envelope::{Direction, Flags, Header, StreamId};
        Envelope::new(
            Header {
                version: ProtocolVersion::V4,
                direction: Direction::Response,
                flags: Flags(0),
                stream: StreamId(3),
                opcode,
                length: 0,
            },
            body,
        )
    }

    #[test]
    fn prepare_each_prepares_executes_and_prepares_again() {
        let w = Legacy {
            mix: Mix::parse("insert=1,select=1").unwrap(),
            form: Form::PrepareEach { bind_value: true },
            keys: 100,
            insert_offset: 0,
            millis: false,
            router: None,
        };
        let insert = (0..).find(|&s| w.plan(s).0 == Op::Insert).unwrap();
        let mut out = Vec::new();
        assert_eq!(w.request(insert, &mut out), Opcode::PREPARE);
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(text.contains("VALUES ('s-"), "{text}");
        assert!(text.ends_with(", ?)"), "{text}");
        // RESULT Prepared (v4): kind, id, no bind variables, no result metadata.
        let mut prepared = Vec::new();
        prepared.extend_from_slice(&4i32.to_be_bytes());
        prepared.extend_from_slice(&2u16.to_be_bytes());
        prepared.extend_from_slice(b"id");
        for v in [0i32, 0, 0, 0x0004, 0] {
            prepared.extend_from_slice(&v.to_be_bytes());
        }
        let answer = response(Opcode::RESULT, &prepared);
        out.clear();
        assert_eq!(w.next(insert, 0, &answer, &mut out), Some(Opcode::EXECUTE));
        // The id, then the consistency and flags (values), then one value of 8 bytes.
        assert!(
            out.starts_with(&[0, 2, b'i', b'd', 0, 1, 1, 0, 1, 0, 0, 0, 8]),
            "{out:?}"
        );
        // The EXECUTE's own answer (Void) ends the operation.
        let void = response(Opcode::RESULT, &1i32.to_be_bytes());
        assert_eq!(w.next(insert, 1, &void, &mut out), None);
        let mut unprepared = Vec::new();
        autoprep_protocol::message::error::encode_error(code::UNPREPARED, "gone", &mut unprepared)
            .unwrap();
        unprepared.extend_from_slice(&2u16.to_be_bytes());
        unprepared.extend_from_slice(b"id");
        let gone = response(Opcode::ERROR, &unprepared);
        out.clear();
        assert_eq!(w.next(insert, 1, &gone, &mut out), Some(Opcode::PREPARE));
        assert_eq!(w.next(insert, 2 * REPREPARES + 1, &gone, &mut out), None);
        // A select keeps no marker and binds nothing.
        let select = (0..).find(|&s| w.plan(s).0 == Op::Select).unwrap();
        out.clear();
        w.request(select, &mut out);
        assert!(!String::from_utf8_lossy(&out).contains('?'));
        out.clear();
        w.next(select, 0, &answer, &mut out);
        assert_eq!(out, [0, 2, b'i', b'd', 0, 1, 0]);
    }

    #[test]
    fn literal_and_prepared_forms_agree() {
        let w = Legacy {
            mix: Mix::parse("insert=1,select=1,update=1").unwrap(),
            form: Form::Literal,
            keys: 100,
            insert_offset: 0,
            millis: false,
            router: None,
        };
        let mut t = String::new();
        for seq in 0..50 {
            let (op, sensor, at, value) = w.plan(seq);
            assert_eq!(w.literal_text(seq, &mut t), op);
            assert!(t.contains(&format!("'s-{sensor}'")), "{t}");
            let mut ts = String::new();
            push_timestamp_literal(&mut ts, at);
            assert!(t.contains(&ts), "{t}");
            if op != Op::Select {
                assert!(t.contains(&format!("{value:.1}")), "{t}");
            }
        }
    }
}
