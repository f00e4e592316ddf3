//! The ERROR frames the proxy answers malformed client input with, shaped the way Cassandra
//! answers the same input (a protocol error, 0x000A) so drivers react as they would directly.

use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeError, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::message::error::{code, encode_error};
use bytes::{BufMut, BytesMut};

/// The message Cassandra uses for an unsupported version, with the proxy's versions.
fn unsupported_version_message(version: u8) -> String {
    format!(
        "Invalid or unsupported protocol version ({version}); supported versions are (3/v3, 4/v4, 5/v5)"
    )
}

/// An ERROR envelope answering the refused header described by `err`.
pub fn for_envelope_error(err: &EnvelopeError) -> BytesMut {
    match err {
        EnvelopeError::UnsupportedVersion {
            version, stream, ..
        } if *version < 3 => {
            // v1/v2 clients read an 8-byte header with a one-byte stream; Cassandra answers so.
            let mut body = Vec::new();
            let _ = encode_error(
                code::PROTOCOL_ERROR,
                &unsupported_version_message(*version),
                &mut body,
            );
            let mut out = BytesMut::with_capacity(8 + body.len());
            out.put_u8(0x80 | version);
            out.put_u8(0);
            out.put_i8(*stream as i8);
            out.put_u8(Opcode::ERROR.0);
            out.put_u32(body.len() as u32);
            out.extend_from_slice(&body);
            out
        }
        EnvelopeError::UnsupportedVersion {
            version, stream, ..
        } => build(
            ProtocolVersion::V5,
            *stream,
            &unsupported_version_message(*version),
        ),
        EnvelopeError::WrongDirection { byte, stream } => build(
            ProtocolVersion::from_byte(*byte).unwrap_or(ProtocolVersion::V5),
            *stream,
            "Wrong protocol direction (expected REQUEST, got RESPONSE)",
        ),
        EnvelopeError::BodyTooLong {
            length,
            max,
            stream,
            version,
        } => build(
            *version,
            *stream,
            &format!("Request is too big: length {length} exceeds maximum allowed length {max}."),
        ),
    }
}

/// A protocol ERROR envelope with `message` on `stream`.
pub fn build(version: ProtocolVersion, stream: i16, message: &str) -> BytesMut {
    error_frame(version, stream, code::PROTOCOL_ERROR, message)
}

/// An unframed ERROR envelope of `error_code` with `message` on `stream`.
pub fn error_frame(
    version: ProtocolVersion,
    stream: i16,
    error_code: i32,
    message: &str,
) -> BytesMut {
    let mut body = Vec::new();
    let _ = encode_error(error_code, message, &mut body);
    Envelope::new(
        Header {
            version,
            direction: Direction::Response,
            flags: Flags(0),
            stream: StreamId(stream),
            opcode: Opcode::ERROR,
            length: 0,
        },
        &body,
    )
    .into_frame()
}
