//! Answers the proxy gives of its own: the one to a request in flight on an upstream
//! connection that ended, and Cassandra's once-per-connection warning about `USE` with
//! prepared statements in a server answer, found and taken out (the client had it from the
//! proxy already).

use crate::rewrite::literal_prepare;
use crate::wire::Wire;
use autoprep_protocol::envelope::Envelope;
use autoprep_protocol::envelope::ProtocolVersion;
use autoprep_protocol::envelope::{Flags, Header};
use autoprep_protocol::message::ResponseBody;
use bytes::BytesMut;

/// The answer to client stream `stream`'s request, in flight on the connection to `node`
/// (`what` it is to the client connection: "the replica", "the home node") when that
/// connection ended: `Overloaded`, since it may have run. Drivers retry what is idempotent,
/// as after a coordinator's failure.
pub(super) fn ended_in_flight(
    version: ProtocolVersion,
    stream: i16,
    what: &str,
    node: Option<std::net::SocketAddr>,
) -> BytesMut {
    let node = node.map(|a| format!(" {a}")).unwrap_or_default();
    let msg = format!(
        "autoprep: the connection to {what}{node} ended with this request in flight; it may have run"
    );
    crate::limit::overloaded(version, stream, &msg)
}

/// The response `env` without Cassandra's warning about `USE` with prepared statements (a
/// warning the server gives once per connection, which the client already had from the
/// proxy). The body is rebuilt uncompressed.
pub(super) fn without_use_warning(env: Envelope, wire: Wire) -> Envelope {
    use autoprep_protocol::primitives::write_string;
    let header = *env.header();
    let rebuilt = (|| {
        let body = wire.body(&env)?;
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
pub(super) fn carries_use_warning(env: &Envelope, wire: Wire) -> bool {
    let Some(body) = wire.body(env) else {
        return false;
    };
    ResponseBody::parse(env.header(), &body)
        .ok()
        .and_then(|rb| rb.warnings)
        .is_some_and(|mut w| {
            w.any(|m| m.is_ok_and(|m| m.starts_with(literal_prepare::USE_WARNING_PREFIX)))
        })
}
