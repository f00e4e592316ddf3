//! The auto-prepare rewrite of one QUERY: normalize its text, look the shape up in the shared
//! cache, and either build the EXECUTE that replaces it or say why it goes through unchanged.
//!
//! The EXECUTE carries every parameter of the QUERY (consistency, page size, paging state,
//! serial consistency, default timestamp, now_in_seconds, the tracing flag and the custom
//! payload) with the literals encoded as the server would have converted them, merged in order
//! with the values the client bound to its own markers. It never sets skip_metadata: the client
//! sent a QUERY and expects metadata.

use crate::context::Context;
use crate::shapes::ShapeRef;
use autoprep_cache::{Lookup, ShapeKey};
use autoprep_protocol::cql::normalize::{normalize, Normalized, NotCandidate, Slot};
use autoprep_protocol::envelope::{
    Direction, Flags, Header, Opcode, ProtocolVersion, StreamId, HEADER_LEN,
};
use autoprep_protocol::message::query::{QueryParams, QueryView, Values};
use autoprep_protocol::message::RequestBody;
use autoprep_protocol::primitives::{write_short_bytes, write_value};
use autoprep_protocol::types::encode_literal;
use bytes::{BufMut, Bytes, BytesMut};
use std::time::Instant;

/// The upstream node prepared ids belong to (one upstream per process for now).
pub const NODE: u32 = 0;

/// A PREPARE the session should send in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareRequest {
    pub fingerprint: [u8; 16],
    pub text: String,
    /// The keyspace the statement runs in (the cache entry's identity).
    pub keyspace: Option<String>,
    /// The v5 QUERY keyspace, which goes onto the PREPARE as its keyspace flag.
    pub request_keyspace: Option<String>,
}

/// What to do with one QUERY.
#[derive(Debug)]
pub enum Decision {
    /// Send this EXECUTE envelope (its stream id still to be set) instead of the QUERY.
    Execute {
        frame: BytesMut,
        fingerprint: [u8; 16],
        id: Bytes,
    },
    /// Forward the QUERY unchanged, counting `reason`; `prepare` asks for a background PREPARE;
    /// `use_keyspace` marks a `USE` whose result the session tracks.
    PassThrough {
        reason: &'static str,
        prepare: Option<PrepareRequest>,
        use_keyspace: bool,
    },
}

fn pass(reason: &'static str) -> Decision {
    Decision::PassThrough {
        reason,
        prepare: None,
        use_keyspace: false,
    }
}

/// Decides the fate of a QUERY whose (decompressed) body is `body`.
/// `scratch` is a buffer the caller reuses between calls. When the text normalized to a shape,
/// `shape_stats` receives the shape's statistics (its execution counted), for the caller to record
/// the outcome and latency on.
pub fn decide(
    ctx: &Context,
    header: &Header,
    body: &[u8],
    conn_keyspace: Option<&str>,
    now: Instant,
    scratch: &mut Vec<u8>,
    shape_stats: &mut Option<ShapeRef>,
) -> Decision {
    let version = header.version;
    let Ok(req) = RequestBody::parse(header, body) else {
        return pass("malformed query");
    };
    let Ok(query) = QueryView::parse(req.message, version) else {
        return pass("malformed query");
    };
    let shape = match normalize(query.query) {
        Ok(Normalized::Shape(s)) => s,
        Ok(Normalized::NotCandidate(NotCandidate::Use { .. })) => {
            return Decision::PassThrough {
                reason: "use",
                prepare: None,
                use_keyspace: true,
            }
        }
        Ok(Normalized::NotCandidate(nc)) => return pass(nc.reason()),
        Err(_) => return pass("lex error"),
    };
    let params = query.params;
    if params.values.is_some_and(|v| v.named)
        || shape
            .slots
            .iter()
            .any(|s| matches!(s, Slot::ClientNamed { .. }))
    {
        return pass("named values");
    }
    let client_markers = shape.client_marker_count();
    if client_markers != params.values.map_or(0, |v| usize::from(v.count)) {
        // The server will answer this with its own error; let it.
        return pass("client value count");
    }
    if ctx
        .cfg
        .exclude
        .iter()
        .any(|e| shape.text.contains(e.as_str()))
    {
        return pass("excluded");
    }
    let keyspace = params.keyspace.or(conn_keyspace);
    let fingerprint = shape.fingerprint(keyspace);
    *shape_stats = Some(ctx.shapes.enter(fingerprint, keyspace, &shape.text));
    let key = ShapeKey {
        node: NODE,
        fingerprint,
        keyspace,
        text: &shape.text,
    };
    let entry = match ctx.cache.lookup(&key, now) {
        Lookup::Ready(e) => e,
        Lookup::PrepareNow => {
            return Decision::PassThrough {
                reason: "preparing",
                prepare: Some(PrepareRequest {
                    fingerprint,
                    text: shape.text.clone(),
                    keyspace: keyspace.map(str::to_owned),
                    request_keyspace: params.keyspace.map(str::to_owned),
                }),
                use_keyspace: false,
            }
        }
        Lookup::Wait => return pass("not prepared yet"),
        Lookup::Negative(reason) => return pass(reason),
    };
    if entry.bind_types.len() != shape.slots.len() {
        ctx.cache
            .failed(NODE, fingerprint, "bind variable count differs", now);
        return pass("bind variable count differs");
    }

    // Values: literals encoded for the server-reported types, client values copied in order.
    scratch.clear();
    let mut client_values = params.values.map(|v| v.iter());
    for (slot, ty) in shape.slots.iter().zip(&entry.bind_types) {
        match slot {
            Slot::Literal(lit) => {
                if let Err(e) = encode_literal(lit, ty, &ctx.encode, scratch) {
                    return pass(e.label());
                }
            }
            Slot::ClientMarker { .. } => {
                let Some(Ok((_, v))) = client_values.as_mut().and_then(Iterator::next) else {
                    return pass("client value count");
                };
                if write_value(scratch, v).is_err() {
                    return pass("value too large");
                }
            }
            Slot::ClientNamed { .. } => return pass("named values"),
        }
    }
    let Ok(count) = u16::try_from(shape.slots.len()) else {
        return pass("too many values");
    };
    let exec_params = QueryParams {
        values: Some(Values {
            count,
            named: false,
            raw: scratch,
        }),
        // The keyspace is part of the prepared statement; EXECUTE has no use for it.
        keyspace: None,
        flags: 0,
        ..params
    };
    let mut frame = BytesMut::with_capacity(HEADER_LEN + 64 + scratch.len() + shape.text.len() / 4);
    frame.put_bytes(0, HEADER_LEN);
    if let Some(cp) = req.custom_payload {
        frame.put_slice(cp);
    }
    let built = write_short_bytes(&mut frame, &entry.id).is_ok()
        && (version < ProtocolVersion::V5
            || write_short_bytes(
                &mut frame,
                entry.result_metadata_id.as_deref().unwrap_or(&[]),
            )
            .is_ok())
        && exec_params.write(version, &mut frame).is_ok();
    if !built {
        return pass("value too large");
    }
    let h = Header {
        version,
        direction: Direction::Request,
        // Sent uncompressed: the compression flag is per envelope in v3/v4.
        flags: Flags(header.flags.0 & !Flags::COMPRESSION),
        stream: StreamId(0),
        opcode: Opcode::EXECUTE,
        length: frame.len() - HEADER_LEN,
    };
    h.write(&mut &mut frame[..HEADER_LEN]);
    Decision::Execute {
        frame,
        fingerprint,
        id: entry.id.clone(),
    }
}
