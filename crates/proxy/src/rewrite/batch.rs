//! The rewrite of a BATCH message: its text children become prepared ones when every one of
//! them is a shape prepared on the node; children the client prepared with literals inline run
//! as their shapes.

use super::{
    bind_values, client_values_fit, finish_frame, keyspace_field_fits, lookup_shape, pass,
    start_frame, ConnKeyspace, Decision, PrepareRequest, Rewriter, Used,
};
use autoprep_cache::Lookup;
use autoprep_protocol::cql::normalize::{normalize, Normalized};
use autoprep_protocol::envelope::{Header, Opcode};
use autoprep_protocol::message::batch::{encode_batch, BatchChild, BatchQuery, BatchView};
use autoprep_protocol::message::query::Values;
use autoprep_protocol::message::RequestBody;
use bytes::Bytes;
use std::time::Instant;

/// Decides the fate of a BATCH message: it becomes a BATCH of prepared children only when
/// every text child normalizes to a shape that is prepared on this node (`node`).
pub fn decide_batch(
    rw: &Rewriter,
    node: u32,
    header: &Header,
    body: &[u8],
    conn_keyspace: ConnKeyspace<'_>,
    now: Instant,
    scratch: &mut Vec<u8>,
) -> Decision {
    if !conn_keyspace.settled {
        return pass("use in flight");
    }
    let conn_keyspace = conn_keyspace.name;
    let version = header.version;
    let Ok(req) = RequestBody::parse(header, body) else {
        return pass("malformed batch");
    };
    let Ok(batch) = BatchView::parse(req.message, version) else {
        return pass("malformed batch");
    };
    if let Err(reason) = keyspace_field_fits(batch.params.keyspace, conn_keyspace) {
        return pass(reason);
    }
    let keyspace = batch.params.keyspace.or(conn_keyspace);
    // Per child: the prepared id and where its values sit in `scratch`.
    let mut children: Vec<(Bytes, u16, std::ops::Range<usize>)> =
        Vec::with_capacity(usize::from(batch.count));
    let mut prepared = Vec::new();
    let mut prepare = Vec::new();
    let mut missing: Option<&'static str> = None;
    scratch.clear();
    for child in batch.children() {
        let Ok(child) = child else {
            return pass("malformed batch");
        };
        let text = match child.query {
            BatchQuery::Prepared(id) => {
                let start = scratch.len();
                // A statement the client prepared with literals inline runs as its shape.
                match super::literal_prepare::batch_child(rw, node, id, child.values, scratch) {
                    Some(Ok((hash, shape_id, n))) => {
                        rw.metrics.literal_execute(Ok(()));
                        children.push((shape_id.clone(), n, start..scratch.len()));
                        prepared.push((hash, shape_id));
                        continue;
                    }
                    Some(Err(reason)) => {
                        rw.metrics.literal_execute(Err(reason));
                        return pass(reason);
                    }
                    None => {}
                }
                scratch.extend_from_slice(child.values.raw);
                children.push((
                    Bytes::copy_from_slice(id),
                    child.values.count,
                    start..scratch.len(),
                ));
                continue;
            }
            BatchQuery::Text(t) => t,
        };
        let shape = match normalize(text) {
            Ok(Normalized::Shape(s)) => s,
            Ok(Normalized::NotCandidate(nc)) => return pass(nc.reason()),
            Err(_) => return pass("lex error"),
        };
        if let Err(r) = client_values_fit(&shape, Some(child.values)) {
            return pass(r);
        }
        if rw.is_excluded(&shape.text) {
            return pass("excluded");
        }
        let hash = shape.hash(keyspace);
        let (found, scylla) = lookup_shape(rw, node, &shape, hash, keyspace, now);
        match found {
            Lookup::Ready(entry) if entry.bind_types.len() == shape.slots.len() => {
                let start = scratch.len();
                if let Err(r) = bind_values(
                    rw,
                    scylla,
                    &shape.slots,
                    &entry.bind_types,
                    Some(child.values),
                    scratch,
                ) {
                    return pass(r);
                }
                let Ok(n) = u16::try_from(shape.slots.len()) else {
                    return pass("too many values");
                };
                children.push((entry.id.clone(), n, start..scratch.len()));
                prepared.push((hash, entry.id.clone()));
            }
            Lookup::Ready(_) => {
                rw.cache
                    .failed(node, hash, "bind variable count differs", now);
                return pass("bind variable count differs");
            }
            Lookup::PrepareNow => {
                missing = Some("preparing");
                prepare.push(PrepareRequest::of(&shape, hash, keyspace));
            }
            Lookup::Wait => missing = missing.or(Some("not prepared yet")),
            Lookup::Negative(r) => return pass(r),
        }
    }
    if let Some(reason) = missing {
        return Decision::PassThrough {
            reason,
            prepare,
            use_keyspace: false,
        };
    }
    let built: Vec<BatchChild<'_>> = children
        .iter()
        .map(|(id, count, range)| BatchChild {
            query: BatchQuery::Prepared(id),
            values: Values {
                count: *count,
                named: false,
                raw: &scratch[range.clone()],
            },
        })
        .collect();
    let mut frame = start_frame(req.custom_payload, 32 + scratch.len() + 20 * built.len());
    let params = autoprep_protocol::message::batch::BatchParams {
        // The keyspace is part of each prepared statement.
        keyspace: None,
        ..batch.params
    };
    if encode_batch(version, batch.batch_type, &built, &params, &mut frame).is_err() {
        return pass("value too large");
    }
    Decision::Execute {
        frame: finish_frame(frame, header, Opcode::BATCH),
        used: Used::Many(prepared),
        route: None,
    }
}
