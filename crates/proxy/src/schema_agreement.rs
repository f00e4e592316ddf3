//! Schema agreement, done by the proxy because drivers no longer can.
//!
//! After a schema change, a driver waits until every node reports the same `schema_version`
//! (comparing `system.local` with `system.peers`) before it returns: otherwise the next
//! statement may reach a replica that does not know the new table yet (Cassandra answers
//! such a write with `INCOMPATIBLE_SCHEMA` from that replica). Through autoprep the driver
//! sees no peers (see [`crate::topology`]), so its check always passes at once. The proxy
//! therefore holds the answer to a schema-changing statement (`CREATE`, `ALTER`, `DROP` whose
//! RESULT is a Schema_change) and checks agreement itself on the same upstream connection,
//! the way drivers do: `SELECT schema_version FROM system.local WHERE key='local'`, then
//! `SELECT schema_version FROM system.peers`, again every [`INTERVAL`] until all versions are
//! the same or `--schema-agreement-wait-ms` has passed (the drivers' default is 10 s). Then
//! the client gets the answer, unchanged.
//!
//! The proxy cannot tell a peer that is down from one that is slow (drivers skip hosts they
//! know are down): while a node is down, a schema change waits the whole timeout.

use crate::wire::Wire;
use autoprep_protocol::envelope::{Envelope, Header, Opcode, ProtocolVersion};
use autoprep_protocol::message::event::EventView;
use autoprep_protocol::message::query::{encode_query, QueryParams, QueryView};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::ResponseBody;
use bytes::{Bytes, BytesMut};
use std::time::{Duration, Instant};

/// How often agreement is checked again (the Java driver's default interval).
pub const INTERVAL: Duration = Duration::from_millis(200);

const LOCAL_VERSION: &str = "SELECT schema_version FROM system.local WHERE key='local'";
const PEER_VERSIONS: &str = "SELECT schema_version FROM system.peers";

/// True when the QUERY `query` is a statement that may change the schema: `CREATE`, `ALTER` or
/// `DROP` (comments before it allowed).
pub fn is_schema_change(query: &QueryView<'_>) -> bool {
    starts_with_schema_keyword(query.query)
}

/// Whether the first word of `query` is `CREATE`, `ALTER` or `DROP`: a byte test for the
/// usual text that starts with a word, the lexer when comments come first.
fn starts_with_schema_keyword(query: &[u8]) -> bool {
    let is_kw = |w: &[u8]| {
        w.eq_ignore_ascii_case(b"CREATE")
            || w.eq_ignore_ascii_case(b"ALTER")
            || w.eq_ignore_ascii_case(b"DROP")
    };
    let start = query
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(query.len());
    let rest = &query[start..];
    match rest.first() {
        Some(b'-' | b'/') => {
            let Ok(mut lexer) = autoprep_protocol::cql::lexer::from_bytes(first_bytes(query))
            else {
                return false;
            };
            matches!(lexer.next_token(), Ok(Some(t))
                if t.kind == autoprep_protocol::cql::lexer::TokenKind::Ident
                    && is_kw(t.text.as_bytes()))
        }
        Some(b) if b.is_ascii_alphabetic() => {
            let end = rest
                .iter()
                .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                .unwrap_or(rest.len());
            is_kw(&rest[..end])
        }
        _ => false,
    }
}

/// The start of a statement, enough for its first keyword after any leading comments, cut at
/// a character boundary (a lexer error at the cut is harmless: the first token came before).
fn first_bytes(query: &[u8]) -> &[u8] {
    // Long leading comments are rare; past 4 KiB the statement is simply not recognised.
    let mut end = query.len().min(4096);
    while end < query.len() && end > 0 && (query[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    &query[..end]
}

/// What changed, when `env` is a RESULT of kind Schema_change (the answer to a DDL) or a
/// SCHEMA_CHANGE event: the keyspace, and the table when a table is the target (`None` for
/// the keyspace itself, a type, function or aggregate).
pub fn changed_schema(env: &Envelope, wire: Wire) -> Option<(String, Option<String>)> {
    let opcode = env.header().opcode;
    if opcode != Opcode::RESULT && opcode != Opcode::EVENT {
        return None;
    }
    let body = wire.body(env)?;
    let rb = ResponseBody::parse(env.header(), &body).ok()?;
    let change = if opcode == Opcode::RESULT {
        match ResultView::parse(rb.message, env.header().version).ok()? {
            ResultView::SchemaChange(c) => c,
            _ => return None,
        }
    } else {
        match EventView::parse(rb.message).ok()? {
            EventView::SchemaChange(c) => c,
            _ => return None,
        }
    };
    let table = (change.target == "TABLE").then_some(change.name).flatten();
    Some((change.keyspace.to_owned(), table.map(str::to_owned)))
}

/// A schema-change answer held until the schema agrees, and where the check stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The held answer's header (the client's stream id already set) and body.
    header: Header,
    body: Bytes,
    /// When the answer arrived.
    since: Instant,
    /// `None` while the local version is asked for; then the local version.
    local: Option<Option<Bytes>>,
}

/// What the session does next.
#[derive(Debug)]
pub enum Step {
    /// Give the client this (the held answer).
    Forward(Envelope),
    /// Send `request` (a QUERY envelope, stream id to be set) after `delay`, its answer
    /// awaited as `check`.
    Ask {
        check: Box<Check>,
        request: BytesMut,
        delay: Duration,
    },
}

impl Check {
    /// Starts holding `answer`: the first step asks for the local version.
    pub fn start(answer: Envelope, now: Instant) -> Step {
        let header = *answer.header();
        let check = Check {
            header,
            body: answer.into_body_bytes(),
            since: now,
            local: None,
        };
        check.ask(LOCAL_VERSION, Duration::ZERO)
    }

    fn ask(self, query: &str, delay: Duration) -> Step {
        match query_frame(self.header.version, query) {
            Some(request) => Step::Ask {
                check: Box::new(self),
                request,
                delay,
            },
            None => self.forward(),
        }
    }

    fn forward(self) -> Step {
        Step::Forward(self.held())
    }

    /// The held answer, as it is (the check is given up: its connection ended).
    pub fn held(self) -> Envelope {
        Envelope::new(self.header, &self.body)
    }

    /// The answer `env` to the last question arrived (at `now`); `wait` is how long the
    /// held answer may wait in all.
    pub fn next(mut self, env: &Envelope, wire: Wire, now: Instant, wait: Duration) -> Step {
        // A check that cannot be made (an error, an unreadable answer) does not hold the
        // client's answer any longer.
        let Some(versions) = versions(env, wire) else {
            return self.forward();
        };
        match self.local.take() {
            None => {
                self.local = Some(versions.into_iter().next().flatten());
                self.ask(PEER_VERSIONS, Duration::ZERO)
            }
            Some(local) => {
                let agreed =
                    local.is_some() && versions.iter().flatten().all(|v| Some(v) == local.as_ref());
                if agreed || now.duration_since(self.since) + INTERVAL > wait {
                    if !agreed {
                        tracing::debug!(
                            waited_ms = now.duration_since(self.since).as_millis() as u64,
                            "schema agreement not reached; answering the schema change anyway"
                        );
                    }
                    return self.forward();
                }
                self.ask(LOCAL_VERSION, INTERVAL)
            }
        }
    }
}

/// The `schema_version` cells of a Rows answer (`None` for null), or `None` when `env` is
/// not a readable Rows answer.
fn versions(env: &Envelope, wire: Wire) -> Option<Vec<Option<Bytes>>> {
    if env.header().opcode != Opcode::RESULT {
        return None;
    }
    let body = wire.body(env)?;
    let rb = ResponseBody::parse(env.header(), &body).ok()?;
    let ResultView::Rows(rows) = ResultView::parse(rb.message, env.header().version).ok()? else {
        return None;
    };
    rows.rows()
        .map(|r| {
            r.ok()
                .map(|cells| cells.first().copied().flatten().map(Bytes::copy_from_slice))
        })
        .collect()
}

/// A QUERY envelope for `query`, consistency ONE, no values (stream id 0 until allocated).
pub fn query_frame(version: ProtocolVersion, query: &str) -> Option<BytesMut> {
    let mut body = Vec::with_capacity(query.len() + 16);
    let params = QueryParams {
        consistency: 0x0001,
        ..Default::default()
    };
    encode_query(version, query.as_bytes(), &params, &mut body).ok()?;
    Some(Envelope::request_frame(version, Opcode::QUERY, &body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoprep_protocol::envelope::{Direction, Flags, StreamId};
    use autoprep_protocol::message::query::QueryRequest;
    use autoprep_protocol::message::result::{kind, metadata_flags};
    use autoprep_protocol::primitives::{write_bytes, write_string};
    use bytes::BufMut;

    const V: ProtocolVersion = ProtocolVersion::V4;

    fn response(opcode: Opcode, body: &[u8]) -> Envelope {
        Envelope::new(
            Header {
                version: V,
                direction: Direction::Response,
                flags: Flags(0),
                stream: StreamId(7),
                opcode,
                length: 0,
            },
            body,
        )
    }

    fn schema_change() -> Envelope {
        let mut b = Vec::new();
        b.put_i32(kind::SCHEMA_CHANGE);
        for s in ["CREATED", "TABLE", "ks", "t"] {
            write_string(&mut b, s).unwrap();
        }
        response(Opcode::RESULT, &b)
    }

    fn versions_answer(versions: &[Option<[u8; 16]>]) -> Envelope {
        let mut b = Vec::new();
        b.put_i32(kind::ROWS);
        b.put_i32(metadata_flags::GLOBAL_TABLES_SPEC);
        b.put_i32(1);
        write_string(&mut b, "system").unwrap();
        write_string(&mut b, "peers").unwrap();
        write_string(&mut b, "schema_version").unwrap();
        b.put_u16(0x000C);
        b.put_i32(versions.len() as i32);
        for v in versions {
            write_bytes(&mut b, v.as_ref().map(|v| &v[..])).unwrap();
        }
        response(Opcode::RESULT, &b)
    }

    fn asked(step: Step) -> (Box<Check>, String, Duration) {
        let Step::Ask {
            check,
            request,
            delay,
        } = step
        else {
            panic!("expected a question, got {step:?}")
        };
        let env = Envelope::new(
            Header::parse(
                request[..9].try_into().unwrap(),
                Direction::Request,
                1 << 20,
            )
            .unwrap(),
            &request[9..],
        );
        let q = QueryView::parse(env.body(), V).unwrap();
        (check, String::from_utf8(q.query.to_vec()).unwrap(), delay)
    }

    fn query(q: &str) -> (Header, Vec<u8>) {
        let mut body = Vec::new();
        encode_query(V, q.as_bytes(), &QueryParams::default(), &mut body).unwrap();
        let h = Header {
            version: V,
            direction: Direction::Request,
            flags: Flags(0),
            stream: StreamId(1),
            opcode: Opcode::QUERY,
            length: body.len(),
        };
        (h, body)
    }

    /// [`is_schema_change`] of a QUERY request's header and body (false for other opcodes).
    fn is_schema_change(header: &Header, body: &[u8]) -> bool {
        header.opcode == Opcode::QUERY
            && QueryRequest::parse(header, body).is_ok_and(|q| super::is_schema_change(&q.query))
    }

    #[test]
    fn recognises_schema_changes() {
        for q in [
            "CREATE TABLE ks.t (k int PRIMARY KEY)",
            "  /* x */ alter TABLE ks.t ADD v int",
            "DROP KEYSPACE IF EXISTS ks",
            "create keyspace ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        ] {
            let (h, b) = query(q);
            assert!(is_schema_change(&h, &b), "{q}");
        }
        for q in [
            "SELECT * FROM ks.t",
            "INSERT INTO ks.t (k) VALUES (1)",
            "TRUNCATE ks.t",
            "USE ks",
            "",
        ] {
            let (h, b) = query(q);
            assert!(!is_schema_change(&h, &b), "{q}");
        }
        let (mut h, b) = query("CREATE TABLE ks.t (k int PRIMARY KEY)");
        h.opcode = Opcode::PREPARE;
        assert!(!is_schema_change(&h, &b));
        // Cut inside a multi-byte character: still a clean cut.
        let long = format!(
            "CREATE TABLE ks.t (k int PRIMARY KEY) -- {}",
            "é".repeat(3000)
        );
        assert!(first_bytes(long.as_bytes()).len() <= 4096);
        let (h, b) = query(&long);
        assert!(is_schema_change(&h, &b));
    }

    #[test]
    fn only_schema_change_results_are_held() {
        assert!(changed_schema(&schema_change(), crate::wire::TEST_WIRE).is_some());
        assert!(changed_schema(&versions_answer(&[]), crate::wire::TEST_WIRE).is_none());
        assert!(changed_schema(
            &response(Opcode::ERROR, &[0, 0, 0x22, 0]),
            crate::wire::TEST_WIRE
        )
        .is_none());
        let void = response(Opcode::RESULT, &kind::VOID.to_be_bytes());
        assert!(changed_schema(&void, crate::wire::TEST_WIRE).is_none());
    }

    #[test]
    fn agreement_releases_the_held_answer_unchanged() {
        let t0 = Instant::now();
        let wait = Duration::from_secs(10);
        let held = schema_change();
        let (check, q, delay) = asked(Check::start(held.clone(), t0));
        assert_eq!((q.as_str(), delay), (LOCAL_VERSION, Duration::ZERO));
        let (check, q, _) = asked(check.next(
            &versions_answer(&[Some([1; 16])]),
            crate::wire::TEST_WIRE,
            t0,
            wait,
        ));
        assert_eq!(q, PEER_VERSIONS);
        // One peer behind: ask again after the interval.
        let (check, q, delay) = asked(check.next(
            &versions_answer(&[Some([1; 16]), Some([2; 16])]),
            crate::wire::TEST_WIRE,
            t0,
            wait,
        ));
        assert_eq!((q.as_str(), delay), (LOCAL_VERSION, INTERVAL));
        let (check, _, _) = asked(check.next(
            &versions_answer(&[Some([1; 16])]),
            crate::wire::TEST_WIRE,
            t0,
            wait,
        ));
        // Every peer agrees now (a null version, a peer still joining, does not count).
        let step = check.next(
            &versions_answer(&[Some([1; 16]), None]),
            crate::wire::TEST_WIRE,
            t0,
            wait,
        );
        let Step::Forward(env) = step else {
            panic!("{step:?}")
        };
        assert_eq!(env.as_bytes(), held.as_bytes());
    }

    #[test]
    fn the_answer_goes_after_the_wait_or_on_an_error() {
        let t0 = Instant::now();
        let wait = Duration::from_secs(1);
        let (check, _, _) = asked(Check::start(schema_change(), t0));
        let (check, _, _) = asked(check.next(
            &versions_answer(&[Some([1; 16])]),
            crate::wire::TEST_WIRE,
            t0,
            wait,
        ));
        let late = t0 + Duration::from_millis(900);
        let step = check.next(
            &versions_answer(&[Some([2; 16])]),
            crate::wire::TEST_WIRE,
            late,
            wait,
        );
        assert!(matches!(step, Step::Forward(_)), "{step:?}");
        let (check, _, _) = asked(Check::start(schema_change(), t0));
        let err = response(Opcode::ERROR, &[0, 0, 0x21, 0, 0, 1, b'x']);
        assert!(matches!(
            check.next(&err, crate::wire::TEST_WIRE, t0, wait),
            Step::Forward(_)
        ));
        // No peers at all (a one-node cluster): agreed at once.
        let (check, _, _) = asked(Check::start(schema_change(), t0));
        let (check, _, _) = asked(check.next(
            &versions_answer(&[Some([1; 16])]),
            crate::wire::TEST_WIRE,
            t0,
            wait,
        ));
        assert!(matches!(
            check.next(&versions_answer(&[]), crate::wire::TEST_WIRE, t0, wait),
            Step::Forward(_)
        ));
    }
}
