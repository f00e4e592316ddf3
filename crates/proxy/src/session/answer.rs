//! Reads and edits of server answers the session needs (a `USE`'s keyspace, an UNPREPARED
//! id, Cassandra's warning about `USE` with prepared statements).

use crate::rewrite::literal_prepare;
use autoprep_protocol::compression::{plain_body, Compression};
use autoprep_protocol::envelope::Envelope;
use autoprep_protocol::envelope::{Flags, Header};
use autoprep_protocol::message::error::{ErrorDetail, ErrorView};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::ResponseBody;
use bytes::Bytes;

/// The response `env` without Cassandra's warning about `USE` with prepared statements (a
/// warning the server gives once per connection, which the client already had from the
/// proxy). The body is rebuilt uncompressed.
pub(super) fn without_use_warning(
    env: Envelope,
    compression: Option<Compression>,
    max: usize,
) -> Envelope {
    use autoprep_protocol::primitives::write_string;
    let header = *env.header();
    let rebuilt = (|| {
        let body = plain_body(&env, compression, max)?;
        let rb = ResponseBody::parse(&header, &body).ok()?;
        let kept: Vec<&str> = rb
            .warnings?
            .collect::<Result<Vec<_>, _>>()
            .ok()?
            .into_iter()
            .filter(|w| !w.starts_with(literal_prepare::USE_WARNING_PREFIX))
            .collect();
        let mut out = Vec::with_capacity(body.len());
        out.extend_from_slice(rb.tracing_id.unwrap_or_default());
        if !kept.is_empty() {
            out.extend_from_slice(&(kept.len() as u16).to_be_bytes());
            for w in &kept {
                write_string(&mut out, w).ok()?;
            }
        }
        out.extend_from_slice(rb.custom_payload.unwrap_or_default());
        out.extend_from_slice(rb.message);
        let mut flags = header.flags.0 & !Flags::COMPRESSION;
        if kept.is_empty() {
            flags &= !Flags::WARNING;
        }
        Some(Envelope::new(
            Header {
                flags: Flags(flags),
                ..header
            },
            &out,
        ))
    })();
    rebuilt.unwrap_or(env)
}

/// Whether a response carries Cassandra's once-per-connection warning about `USE` with
/// prepared statements (the proxy gives it to the client itself when it answers a PREPARE:
/// see [`literal_prepare`]).
pub(super) fn carries_use_warning(
    env: &Envelope,
    compression: Option<Compression>,
    max: usize,
) -> bool {
    let Some(body) = plain_body(env, compression, max) else {
        return false;
    };
    ResponseBody::parse(env.header(), &body)
        .ok()
        .and_then(|rb| rb.warnings)
        .is_some_and(|mut w| {
            w.any(|m| m.is_ok_and(|m| m.starts_with(literal_prepare::USE_WARNING_PREFIX)))
        })
}

pub(super) fn set_keyspace(
    env: &Envelope,
    compression: Option<Compression>,
    max: usize,
) -> Option<String> {
    let body = plain_body(env, compression, max)?;
    let rb = ResponseBody::parse(env.header(), &body).ok()?;
    match ResultView::parse(rb.message, env.header().version).ok()? {
        ResultView::SetKeyspace(k) => Some(k.to_owned()),
        _ => None,
    }
}

/// The id of an UNPREPARED error, if `env` is one.
pub(super) fn unprepared_id(
    env: &Envelope,
    compression: Option<Compression>,
    max: usize,
) -> Option<Bytes> {
    let body = plain_body(env, compression, max)?;
    let rb = ResponseBody::parse(env.header(), &body).ok()?;
    match ErrorView::parse(rb.message, env.header().version)
        .ok()?
        .detail
    {
        ErrorDetail::Unprepared { id } => Some(Bytes::copy_from_slice(id)),
        _ => None,
    }
}
