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
    /// its MD5 fingerprint).
    pub fn prepared(
        &self,
        env: &Envelope,
        node: u32,
        (hash, fingerprint): (ShapeHash, [u8; 16]),
        text: String,
        keyspace: Option<String>,
        wire: Wire,
    ) {
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
            }
            Some(Ok(e)) => {
                // A normalized shape carries no literal values: safe to log.
                debug!(shape = %e.text, binds = e.bind_types.len(), "shape prepared");
                Metrics::inc(&self.metrics.prepares_ok);
                self.cache.prepared(node, hash, e);
            }
            None => {
                Metrics::inc(&self.metrics.prepares_failed);
                self.shapes.prepare_failed(hash);
                debug!("PREPARE of a shape failed; it passes through for a while");
                self.cache.failed(node, hash, "prepare failed", now);
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
