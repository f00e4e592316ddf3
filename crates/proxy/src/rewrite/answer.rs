//! The rewrite's answer half: what the server's answers to the proxy's own requests and to
//! rewritten ones teach the rewrite (a PREPARED answer proven and cached, a v5 Rows answer's
//! new result metadata, a schema change that drops shapes), and the edit that keeps a rewritten
//! QUERY's answer what a QUERY would have got.

use super::Rewriter;
use crate::metrics::Metrics;
use crate::wire::Wire;
use crate::{prepare_proof, schema_agreement};
use autoprep_cache::{PreparedEntry, ShapeHash};
use autoprep_protocol::cql::conditional::is_conditional;
use autoprep_protocol::cql::idempotent::may_repeat;
use autoprep_protocol::envelope::{Envelope, Opcode};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::rows_edit;
use autoprep_protocol::message::ResponseBody;
use bytes::Bytes;
use std::time::Instant;
use tracing::debug;

impl Rewriter {
    /// A RESULT Schema_change (the answer to a client's DDL) or a SCHEMA_CHANGE event: whether
    /// `env` is one. The prepared shapes it concerns are dropped from the cache.
    pub fn schema_changed(&self, env: &Envelope, wire: Wire) -> bool {
        let Some((keyspace, table)) = schema_agreement::changed_schema(env, wire) else {
            return false;
        };
        let dropped = self.cache.schema_changed(&keyspace, table.as_deref());
        Metrics::add(&self.metrics.schema_invalidations, dropped as u64);
        // The server forgets the statements of that table: so does the map of statements prepared
        // with literals inline (their next EXECUTE is answered UNPREPARED, as directly).
        self.literals.schema_changed(&keyspace, table.as_deref());
        debug!(
            keyspace,
            table, dropped, "schema change seen; prepared shapes of it dropped"
        );
        true
    }

    /// Records the answer to the proxy's own PREPARE in the cache, under the shape's hash (with
    /// its MD5 fingerprint); the statement's id when it was cached.
    pub fn prepared(
        &self,
        env: &Envelope,
        node: u32,
        (hash, fingerprint): (ShapeHash, [u8; 16]),
        text: String,
        keyspace: Option<String>,
        wire: Wire,
    ) -> Option<Bytes> {
        let now = Instant::now();
        let entry = (|| {
            if env.header().opcode != Opcode::RESULT {
                return None;
            }
            let body = wire.body(env)?;
            let rb = ResponseBody::parse(env.header(), &body).ok()?;
            let ResultView::Prepared(p) =
                ResultView::parse(rb.message, env.header().version).ok()?
            else {
                return None;
            };
            let mut bind_types = Vec::with_capacity(p.bind.columns.len());
            for c in p.bind.columns.iter() {
                bind_types.push(c.column_type().ok()?);
            }
            let proven = prepare_proof::expected_tables(&text, keyspace.as_deref())
                .filter(|expected| prepare_proof::binds_belong(&p.bind.columns, expected));
            let Some(tables) = proven else {
                return Some(Err(()));
            };
            Some(Ok(PreparedEntry {
                conditional: is_conditional(&text),
                repeatable: may_repeat(text.as_bytes()),
                text,
                fingerprint,
                keyspace,
                id: Bytes::copy_from_slice(p.id),
                result_metadata_id: p.result_metadata_id.map(Bytes::copy_from_slice),
                bind_types,
                pk_indexes: p.bind.pk_indexes().collect(),
                result_metadata: Bytes::copy_from_slice(
                    p.result.columns.map_or(&[][..], |c| c.raw()),
                ),
                tables,
                prepared_message: Bytes::copy_from_slice(rb.message),
            }))
        })();
        match entry {
            Some(Err(())) => {
                Metrics::inc(&self.metrics.prepares_unproven);
                debug!(
                    "a PREPARED answer not proven to be the shape's keyspace and table; not used"
                );
                self.cache.abandoned(node, hash);
                None
            }
            Some(Ok(e)) => {
                // A normalized shape carries no literal values: safe to log.
                debug!(shape = %e.text, binds = e.bind_types.len(), "shape prepared");
                Metrics::inc(&self.metrics.prepares_ok);
                let id = e.id.clone();
                self.cache.prepared(node, hash, e);
                Some(id)
            }
            None => {
                Metrics::inc(&self.metrics.prepares_failed);
                self.shapes.prepare_failed(hash);
                debug!("PREPARE of a shape failed; it passes through for a while");
                self.cache.failed(node, hash, "prepare failed", now);
                None
            }
        }
    }

    /// v5: a Rows answer to EXECUTE says when the result metadata changed since PREPARE (and
    /// carries the new metadata id). The cache takes the new id; the client, which sent a QUERY,
    /// gets the Rows a QUERY would have got: without that flag and id.
    pub fn without_metadata_change(
        &self,
        env: Envelope,
        node: u32,
        hash: ShapeHash,
        id: &[u8],
    ) -> Envelope {
        let header = *env.header();
        if header.opcode != Opcode::RESULT {
            return env;
        }
        let body = env.body();
        let Ok(rb) = ResponseBody::parse(&header, body) else {
            return env;
        };
        // The tracing id, warnings and custom payload before the message are kept.
        let prefix = body.len() - rb.message.len();
        let mut out = Vec::with_capacity(body.len());
        out.extend_from_slice(&body[..prefix]);
        let edited = rows_edit::without_metadata_changed(rb.message, header.version, &mut out);
        let Ok(Some(changed)) = edited else {
            return env;
        };
        self.cache.update_result_metadata(
            node,
            hash,
            id,
            Bytes::copy_from_slice(changed.id),
            Bytes::copy_from_slice(changed.columns),
        );
        Envelope::new(header, &out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterView;
    use crate::config::Config;
    use crate::wire::TEST_WIRE;
    use autoprep_cache::{Lookup, ShapeKey};
    use autoprep_protocol::cql::normalize::{normalize, Normalized};
    use autoprep_protocol::envelope::{Direction, Flags, Header, ProtocolVersion, StreamId};
    use autoprep_protocol::message::result::{kind, metadata_flags};
    use autoprep_protocol::primitives::{write_bytes, write_string};
    use bytes::BufMut;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    const NODE: u32 = 0;
    const TEXT: &str = "INSERT INTO ks.t (k, v) VALUES (1, 'a')";

    fn rewriter() -> Rewriter {
        let cfg = Config::for_upstream("127.0.0.1:9042");
        let cluster = Arc::new(ClusterView::new(false, None));
        Rewriter::new(&cfg, 1, Arc::default(), cluster).unwrap()
    }

    fn response(version: ProtocolVersion, opcode: Opcode, message: &[u8]) -> Envelope {
        let header = Header {
            version,
            direction: Direction::Response,
            flags: Flags(0),
            stream: StreamId(1),
            opcode,
            length: 0,
        };
        Envelope::new(header, message)
    }

    /// A v4 Prepared result for bind variables `(k int, v text)` of `keyspace.table`.
    fn prepared(keyspace: &str, table: &str) -> Vec<u8> {
        let mut m = Vec::new();
        m.put_i32(kind::PREPARED);
        m.put_u16(16);
        m.extend_from_slice(&[7; 16]);
        m.put_i32(metadata_flags::GLOBAL_TABLES_SPEC);
        m.put_i32(2);
        m.put_i32(1);
        m.put_u16(0);
        write_string(&mut m, keyspace).unwrap();
        write_string(&mut m, table).unwrap();
        for (name, ty) in [("k", 0x0009u16), ("v", 0x000D)] {
            write_string(&mut m, name).unwrap();
            m.put_u16(ty);
        }
        m.put_i32(metadata_flags::NO_METADATA);
        m.put_i32(0);
        m
    }

    /// The shape of [`TEXT`]: its cache key parts.
    fn shape() -> (ShapeHash, [u8; 16], String) {
        let Ok(Normalized::Shape(s)) = normalize(TEXT.as_bytes()) else {
            panic!("not a shape")
        };
        (s.hash(None), s.fingerprint(None), s.text.clone())
    }

    fn lookup(rw: &Rewriter) -> Lookup {
        let (hash, _, text) = shape();
        let key = ShapeKey {
            node: NODE,
            hash,
            keyspace: None,
            text: &text,
        };
        rw.cache.lookup(&key, Instant::now())
    }

    /// Asks the cache for the shape until it is this caller's to prepare.
    fn start_preparing(rw: &Rewriter) {
        for _ in 0..10 {
            if matches!(lookup(rw), Lookup::PrepareNow) {
                return;
            }
        }
        panic!("the shape is never this caller's to prepare");
    }

    /// A rewriter whose cache holds [`TEXT`]'s shape, from a proven PREPARED answer.
    fn cached() -> (Rewriter, ShapeHash) {
        let rw = rewriter();
        start_preparing(&rw);
        let (hash, fp, text) = shape();
        let env = response(ProtocolVersion::V4, Opcode::RESULT, &prepared("ks", "t"));
        rw.prepared(&env, NODE, (hash, fp), text, None, TEST_WIRE);
        (rw, hash)
    }

    #[test]
    fn a_proven_prepared_answer_fills_the_cache() {
        let (rw, _) = cached();
        let Lookup::Ready(e) = lookup(&rw) else {
            panic!("not cached")
        };
        assert_eq!(&e.id[..], &[7; 16]);
        assert_eq!(e.bind_types.len(), 2);
        assert_eq!(e.pk_indexes, vec![0]);
        assert_eq!(rw.metrics.prepares_ok.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn an_answer_for_another_table_is_not_used() {
        let rw = rewriter();
        start_preparing(&rw);
        let (hash, fp, text) = shape();
        let env = response(
            ProtocolVersion::V4,
            Opcode::RESULT,
            &prepared("ks", "other"),
        );
        rw.prepared(&env, NODE, (hash, fp), text, None, TEST_WIRE);
        assert!(!matches!(lookup(&rw), Lookup::Ready(_)));
        assert_eq!(rw.metrics.prepares_unproven.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn an_error_answer_marks_the_shape_failed() {
        let rw = rewriter();
        start_preparing(&rw);
        let (hash, fp, text) = shape();
        let mut m = 0x2200i32.to_be_bytes().to_vec();
        write_string(&mut m, "unconfigured table t").unwrap();
        let env = response(ProtocolVersion::V4, Opcode::ERROR, &m);
        rw.prepared(&env, NODE, (hash, fp), text, None, TEST_WIRE);
        assert!(matches!(lookup(&rw), Lookup::Negative(_)));
        assert_eq!(rw.metrics.prepares_failed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_schema_change_drops_the_shapes_of_its_table() {
        let (rw, _) = cached();
        let mut m = Vec::new();
        m.put_i32(kind::SCHEMA_CHANGE);
        for s in ["UPDATED", "TABLE", "ks", "t"] {
            write_string(&mut m, s).unwrap();
        }
        let change = response(ProtocolVersion::V4, Opcode::RESULT, &m);
        assert!(rw.schema_changed(&change, TEST_WIRE));
        assert!(!matches!(lookup(&rw), Lookup::Ready(_)));
        // Another answer is not a schema change.
        let void = response(
            ProtocolVersion::V4,
            Opcode::RESULT,
            &kind::VOID.to_be_bytes(),
        );
        assert!(!rw.schema_changed(&void, TEST_WIRE));
    }

    #[test]
    fn a_changed_result_metadata_is_taken_by_the_cache_and_hidden_from_the_client() {
        let (rw, hash) = cached();
        // A v5 Rows answer whose metadata changed: new id "m2", one column.
        let mut m = Vec::new();
        m.put_i32(kind::ROWS);
        m.put_i32(metadata_flags::GLOBAL_TABLES_SPEC | metadata_flags::METADATA_CHANGED);
        m.put_i32(1);
        m.put_u16(2);
        m.extend_from_slice(b"m2");
        for s in ["ks", "t", "w"] {
            write_string(&mut m, s).unwrap();
        }
        m.put_u16(0x0009);
        m.put_i32(1);
        write_bytes(&mut m, Some(&[0, 0, 0, 1])).unwrap();
        let env = response(ProtocolVersion::V5, Opcode::RESULT, &m);
        let out = rw.without_metadata_change(env, NODE, hash, &[7; 16]);
        let flags = i32::from_be_bytes(out.body()[4..8].try_into().unwrap());
        assert_eq!(flags & metadata_flags::METADATA_CHANGED, 0);
        assert_eq!(out.body().len(), m.len() - 4);
        let Lookup::Ready(e) = lookup(&rw) else {
            panic!("not cached")
        };
        assert_eq!(e.result_metadata_id.as_deref(), Some(&b"m2"[..]));
        // An answer without the flag goes back as it came.
        let void = response(
            ProtocolVersion::V5,
            Opcode::RESULT,
            &kind::VOID.to_be_bytes(),
        );
        let same = rw.without_metadata_change(void.clone(), NODE, hash, &[7; 16]);
        assert_eq!(same.as_bytes(), void.as_bytes());
    }
}
