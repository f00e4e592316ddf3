//! The rewrite of a BATCH message: its text children become prepared ones when every one of
//! them is a shape prepared on the node; children the client prepared with literals inline run
//! as their shapes.

use super::{
    bind_values, client_values_fit, finish_frame, keyspace_field_fits, lookup_shape, pass,
    start_frame, ConnKeyspace, Decision, PrepareRequest, Rewriter, Used,
};
use autoprep_cache::{Lookup, ShapeHash};
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
    let mut c = Children {
        list: Vec::with_capacity(usize::from(batch.count)),
        prepared: Vec::new(),
        prepare: Vec::new(),
        missing: None,
    };
    scratch.clear();
    for child in batch.children() {
        let Ok(child) = child else {
            return pass("malformed batch");
        };
        let added = match child.query {
            BatchQuery::Prepared(id) => prepared_child(rw, node, id, child.values, scratch, &mut c),
            BatchQuery::Text(text) => {
                let at = (node, keyspace, now);
                text_child(rw, at, text, child.values, scratch, &mut c)
            }
        };
        if let Err(reason) = added {
            return pass(reason);
        }
    }
    if let Some(reason) = c.missing {
        return Decision::PassThrough {
            reason,
            prepare: c.prepare,
            use_keyspace: false,
        };
    }
    let built: Vec<BatchChild<'_>> = c
        .list
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
        used: Used::Many(c.prepared),
        route: None,
    }
}

/// The children of a BATCH as the rewrite makes them, so far.
struct Children {
    /// Per child: the prepared id and where its values sit in the scratch buffer.
    list: Vec<(Bytes, u16, std::ops::Range<usize>)>,
    /// The shapes the rewritten BATCH uses.
    prepared: Vec<(ShapeHash, Bytes)>,
    /// The shapes to prepare now.
    prepare: Vec<PrepareRequest>,
    /// Why the BATCH cannot be rewritten yet (a shape not prepared).
    missing: Option<&'static str>,
}

/// A child the client prepared: with its own id and values, or, prepared with literals inline,
/// as its shape.
fn prepared_child(
    rw: &Rewriter,
    node: u32,
    id: &[u8],
    values: Values<'_>,
    scratch: &mut Vec<u8>,
    c: &mut Children,
) -> Result<(), &'static str> {
    let start = scratch.len();
    match super::literal_prepare::batch_child(rw, node, id, values, scratch) {
        Some(Ok((hash, shape_id, n))) => {
            rw.metrics.literal_execute(Ok(()));
            c.list.push((shape_id.clone(), n, start..scratch.len()));
            c.prepared.push((hash, shape_id));
        }
        Some(Err(reason)) => {
            rw.metrics.literal_execute(Err(reason));
            return Err(reason);
        }
        None => {
            scratch.extend_from_slice(values.raw);
            let id = Bytes::copy_from_slice(id);
            c.list.push((id, values.count, start..scratch.len()));
        }
    }
    Ok(())
}

/// A text child: its shape's id and the values bound to it when the shape is prepared on
/// `node` (at `now`, in `keyspace`); otherwise the shape is noted as missing.
fn text_child(
    rw: &Rewriter,
    (node, keyspace, now): (u32, Option<&str>, Instant),
    text: &[u8],
    values: Values<'_>,
    scratch: &mut Vec<u8>,
    c: &mut Children,
) -> Result<(), &'static str> {
    let shape = match normalize(text) {
        Ok(Normalized::Shape(s)) => s,
        Ok(Normalized::NotCandidate(nc)) => return Err(nc.reason()),
        Err(_) => return Err("lex error"),
    };
    client_values_fit(&shape, Some(values))?;
    if rw.is_excluded(&shape.text) {
        return Err("excluded");
    }
    let hash = shape.hash(keyspace);
    let (found, scylla) = lookup_shape(rw, node, &shape, hash, keyspace, now);
    match found {
        Lookup::Ready(entry) if entry.bind_types.len() == shape.slots.len() => {
            let start = scratch.len();
            let types = &entry.bind_types;
            bind_values(rw, scylla, &shape.slots, types, Some(values), scratch)?;
            let n = u16::try_from(shape.slots.len()).map_err(|_| "too many values")?;
            c.list.push((entry.id.clone(), n, start..scratch.len()));
            c.prepared.push((hash, entry.id.clone()));
        }
        Lookup::Ready(_) => {
            rw.cache
                .failed(node, hash, "bind variable count differs", now);
            return Err("bind variable count differs");
        }
        Lookup::PrepareNow => {
            c.missing = Some("preparing");
            c.prepare.push(PrepareRequest::of(&shape, hash, keyspace));
        }
        Lookup::Wait => c.missing = c.missing.or(Some("not prepared yet")),
        Lookup::Negative(r) => return Err(r),
    }
    Ok(())
}
