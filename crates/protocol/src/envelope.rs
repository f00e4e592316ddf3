//! Envelopes: the 9-byte header of protocol v3, v4 and v5 (spec section 2) and a decoder that
//! splits whole envelopes off a byte buffer without copying.
//!
//! The header is checked (version, direction, length against a maximum) as soon as its nine
//! bytes are buffered, before any of the body is waited for.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Length of the envelope header in protocol v3 and later.
pub const HEADER_LEN: usize = 9;

/// The most a decoder reserves ahead for a body that has not arrived yet.
pub const RESERVE_CAP: usize = 1024 * 1024;

/// The default maximum body length: the spec's 256 MB.
pub const DEFAULT_MAX_BODY_LEN: usize = 256 * 1024 * 1024;

/// A protocol version this codec understands (v3, v4, v5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    V3 = 3,
    V4 = 4,
    V5 = 5,
}

impl ProtocolVersion {
    /// The version for a header's low seven bits, if this codec understands it.
    pub fn from_byte(v: u8) -> Option<Self> {
        match v & 0x7f {
            3 => Some(Self::V3),
            4 => Some(Self::V4),
            5 => Some(Self::V5),
            _ => None,
        }
    }

    /// The version number.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// The opcode of a message (spec section 2.4). Unknown opcodes are carried as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode(pub u8);

impl Opcode {
    pub const ERROR: Opcode = Opcode(0x00);
    pub const STARTUP: Opcode = Opcode(0x01);
    pub const READY: Opcode = Opcode(0x02);
    pub const AUTHENTICATE: Opcode = Opcode(0x03);
    pub const OPTIONS: Opcode = Opcode(0x05);
    pub const SUPPORTED: Opcode = Opcode(0x06);
    pub const QUERY: Opcode = Opcode(0x07);
    pub const RESULT: Opcode = Opcode(0x08);
    pub const PREPARE: Opcode = Opcode(0x09);
    pub const EXECUTE: Opcode = Opcode(0x0A);
    pub const REGISTER: Opcode = Opcode(0x0B);
    pub const EVENT: Opcode = Opcode(0x0C);
    pub const BATCH: Opcode = Opcode(0x0D);
    pub const AUTH_CHALLENGE: Opcode = Opcode(0x0E);
    pub const AUTH_RESPONSE: Opcode = Opcode(0x0F);
    pub const AUTH_SUCCESS: Opcode = Opcode(0x10);

    /// The spec's name for the opcode, or `UNKNOWN`. Bounded: safe as a metrics label.
    pub fn name(self) -> &'static str {
        match self.0 {
            0x00 => "ERROR",
            0x01 => "STARTUP",
            0x02 => "READY",
            0x03 => "AUTHENTICATE",
            0x05 => "OPTIONS",
            0x06 => "SUPPORTED",
            0x07 => "QUERY",
            0x08 => "RESULT",
            0x09 => "PREPARE",
            0x0A => "EXECUTE",
            0x0B => "REGISTER",
            0x0C => "EVENT",
            0x0D => "BATCH",
            0x0E => "AUTH_CHALLENGE",
            0x0F => "AUTH_RESPONSE",
            0x10 => "AUTH_SUCCESS",
            _ => "UNKNOWN",
        }
    }
}

/// Header flags (spec section 2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u8);

impl Flags {
    pub const COMPRESSION: u8 = 0x01;
    pub const TRACING: u8 = 0x02;
    pub const CUSTOM_PAYLOAD: u8 = 0x04;
    pub const WARNING: u8 = 0x08;
    pub const USE_BETA: u8 = 0x10;

    /// True when every bit of `bit` is set.
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit == bit
    }
}

/// A stream id. Negative ids belong to the server; -1 carries events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub i16);

impl StreamId {
    /// The stream of server-pushed events.
    pub const EVENT: StreamId = StreamId(-1);
}

/// Whether an envelope is a request (client to server) or a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Request,
    Response,
}

/// A parsed envelope header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: ProtocolVersion,
    pub direction: Direction,
    pub flags: Flags,
    pub stream: StreamId,
    pub opcode: Opcode,
    /// Body length in bytes.
    pub length: usize,
}

/// A header or envelope the codec must refuse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvelopeError {
    /// The version byte names a version this codec does not speak.
    #[error("invalid or unsupported protocol version ({version})")]
    UnsupportedVersion {
        /// The raw version byte (direction bit included).
        byte: u8,
        /// The version number (low seven bits).
        version: u8,
        /// The stream id of the header, for the error response.
        stream: i16,
    },
    /// A request arrived with the response bit set, or the reverse.
    #[error("unexpected direction bit in version byte 0x{byte:02x}")]
    WrongDirection { byte: u8, stream: i16 },
    /// The length field was negative or above the configured maximum.
    #[error("envelope body length {length} exceeds the maximum of {max} bytes")]
    BodyTooLong {
        length: i64,
        max: usize,
        stream: i16,
        version: ProtocolVersion,
    },
}

impl EnvelopeError {
    /// The stream id of the refused header.
    pub fn stream(&self) -> i16 {
        match self {
            EnvelopeError::UnsupportedVersion { stream, .. }
            | EnvelopeError::WrongDirection { stream, .. }
            | EnvelopeError::BodyTooLong { stream, .. } => *stream,
        }
    }
}

impl Header {
    /// Parses and checks a header. `expected` is the direction the peer must send.
    pub fn parse(
        b: &[u8; HEADER_LEN],
        expected: Direction,
        max_body_len: usize,
    ) -> Result<Header, EnvelopeError> {
        let byte = b[0];
        let stream = i16::from_be_bytes([b[2], b[3]]);
        let version =
            ProtocolVersion::from_byte(byte).ok_or(EnvelopeError::UnsupportedVersion {
                byte,
                version: byte & 0x7f,
                stream,
            })?;
        let direction = if byte & 0x80 != 0 {
            Direction::Response
        } else {
            Direction::Request
        };
        if direction != expected {
            return Err(EnvelopeError::WrongDirection { byte, stream });
        }
        let raw_len = i32::from_be_bytes([b[5], b[6], b[7], b[8]]);
        let length = usize::try_from(raw_len)
            .ok()
            .filter(|l| *l <= max_body_len)
            .ok_or(EnvelopeError::BodyTooLong {
                length: raw_len.into(),
                max: max_body_len,
                stream,
                version,
            })?;
        Ok(Header {
            version,
            direction,
            flags: Flags(b[1]),
            stream: StreamId(stream),
            opcode: Opcode(b[4]),
            length,
        })
    }

    /// Writes the nine header bytes.
    pub fn write(&self, out: &mut impl BufMut) {
        let dir = match self.direction {
            Direction::Request => 0x00,
            Direction::Response => 0x80,
        };
        out.put_u8(self.version.as_u8() | dir);
        out.put_u8(self.flags.0);
        out.put_i16(self.stream.0);
        out.put_u8(self.opcode.0);
        // Lengths are bounded by the decoder's maximum, itself far below i32::MAX.
        out.put_u32(u32::try_from(self.length).unwrap_or(u32::MAX));
    }
}

/// One whole envelope: its header and the buffer holding header and body.
///
/// The body is kept as the peer sent it (compressed or not). Only the stream id is ever
/// patched in place, so forwarding an envelope never copies it.
#[derive(Debug, Clone)]
pub struct Envelope {
    header: Header,
    frame: BytesMut,
}

impl Envelope {
    /// Builds an envelope from a header and an (already compressed, if flagged) body.
    pub fn new(mut header: Header, body: &[u8]) -> Envelope {
        header.length = body.len();
        let mut frame = BytesMut::with_capacity(HEADER_LEN + body.len());
        header.write(&mut frame);
        frame.extend_from_slice(body);
        Envelope { header, frame }
    }

    /// The frame of a request of `opcode` with an uncompressed `body`, no flags, stream id 0
    /// (to be set when it is sent).
    pub fn request_frame(version: ProtocolVersion, opcode: Opcode, body: &[u8]) -> BytesMut {
        let header = Header {
            version,
            direction: Direction::Request,
            flags: Flags(0),
            stream: StreamId(0),
            opcode,
            length: 0,
        };
        Envelope::new(header, body).into_frame()
    }

    /// Wraps a buffer that holds exactly one envelope whose header is `header`.
    fn from_parts(header: Header, frame: BytesMut) -> Envelope {
        Envelope { header, frame }
    }

    /// The parsed header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The body bytes as sent (compressed when the compression flag is set, in v3/v4).
    pub fn body(&self) -> &[u8] {
        &self.frame[HEADER_LEN..]
    }

    /// A copy of the body as a buffer of its own. Cloning a `BytesMut` copies it, so a
    /// shared, copy-free body needs the envelope by value: see [`Envelope::into_body_bytes`].
    pub fn body_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.body())
    }

    /// The body as a shared buffer over the received bytes (no copy).
    pub fn into_body_bytes(self) -> Bytes {
        self.frame.freeze().slice(HEADER_LEN..)
    }

    /// Rewrites the stream id in place.
    pub fn set_stream(&mut self, stream: StreamId) {
        self.header.stream = stream;
        self.frame[2..4].copy_from_slice(&stream.0.to_be_bytes());
    }

    /// The whole envelope, header and body.
    pub fn as_bytes(&self) -> &[u8] {
        &self.frame
    }

    /// The whole envelope as a buffer, header and body.
    pub fn into_frame(self) -> BytesMut {
        self.frame
    }
}

/// Splits envelopes off a receive buffer (check-then-split, no copy).
#[derive(Debug, Clone)]
pub struct EnvelopeDecoder {
    direction: Direction,
    max_body_len: usize,
}

impl EnvelopeDecoder {
    /// A decoder for envelopes travelling in `direction`, refusing bodies above `max_body_len`.
    pub fn new(direction: Direction, max_body_len: usize) -> Self {
        EnvelopeDecoder {
            direction,
            max_body_len,
        }
    }

    /// Peeks at the header at the front of `buf` once nine bytes are buffered. An unsupported
    /// version is refused from the first byte alone: v1/v2 headers are only eight bytes long,
    /// and garbage need not wait for more garbage.
    pub fn peek_header(&self, buf: &[u8]) -> Result<Option<Header>, EnvelopeError> {
        if let Some(&byte) = buf.first() {
            if ProtocolVersion::from_byte(byte).is_none() {
                return Err(EnvelopeError::UnsupportedVersion {
                    byte,
                    version: byte & 0x7f,
                    // Cassandra answers a version it cannot speak on stream 0.
                    stream: 0,
                });
            }
        }
        let Some(h) = buf.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        Header::parse(h, self.direction, self.max_body_len).map(Some)
    }

    /// Splits one whole envelope off the front of `buf`; `Ok(None)` means more bytes are needed.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Envelope>, EnvelopeError> {
        let Some(header) = self.peek_header(buf)? else {
            return Ok(None);
        };
        let total = HEADER_LEN + header.length;
        if buf.len() < total {
            // Room for the rest, but never more than RESERVE_CAP at once: a header alone must
            // not make an unauthenticated peer cost hundreds of megabytes.
            buf.reserve((total - buf.len()).min(RESERVE_CAP));
            return Ok(None);
        }
        Ok(Some(Envelope::from_parts(header, buf.split_to(total))))
    }

    /// Splits off the front of `buf` the longest run of whole envelopes that `restream`
    /// accepts, each under the stream id `restream` gives it (written in place), as one
    /// buffer; `None` when the first envelope is not accepted. Only whole, well-formed
    /// envelopes are offered to `restream` (and each at most once): an incomplete or malformed
    /// one ends the run, and [`EnvelopeDecoder::decode`] then waits for it or reports it.
    ///
    /// This serves a forwarder passing a batch through with new stream ids: one split and one
    /// buffer for the batch, where decoding each envelope splits and joins once per envelope.
    pub fn take_run(
        &self,
        buf: &mut BytesMut,
        mut restream: impl FnMut(&Header) -> Option<StreamId>,
    ) -> Option<BytesMut> {
        let mut end = 0;
        while let Ok(Some(header)) = self.peek_header(&buf[end..]) {
            let total = HEADER_LEN + header.length;
            if buf.len() - end < total {
                break;
            }
            let Some(stream) = restream(&header) else {
                break;
            };
            buf[end + 2..end + 4].copy_from_slice(&stream.0.to_be_bytes());
            end += total;
        }
        (end > 0).then(|| buf.split_to(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(version: u8, stream: i16, opcode: u8, len: i32) -> Vec<u8> {
        let mut v = vec![version, 0];
        v.extend_from_slice(&stream.to_be_bytes());
        v.push(opcode);
        v.extend_from_slice(&len.to_be_bytes());
        v
    }

    #[test]
    fn waits_for_whole_envelope_then_splits_it() {
        let d = EnvelopeDecoder::new(Direction::Request, 1024);
        let mut buf = BytesMut::from(&header(4, 7, 5, 3)[..]);
        assert!(d.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"ab");
        assert!(d.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"cX");
        let mut e = d.decode(&mut buf).unwrap().unwrap();
        assert_eq!(e.header().stream, StreamId(7));
        assert_eq!(e.header().opcode, Opcode::OPTIONS);
        assert_eq!(e.body(), b"abc");
        assert_eq!(&buf[..], b"X");
        e.set_stream(StreamId(-300));
        assert_eq!(&e.as_bytes()[2..4], &(-300i16).to_be_bytes());
    }

    #[test]
    fn into_body_bytes_shares_the_received_buffer() {
        let d = EnvelopeDecoder::new(Direction::Request, 1024);
        let mut buf = BytesMut::from(&header(4, 7, 5, 3)[..]);
        buf.extend_from_slice(b"abc");
        let e = d.decode(&mut buf).unwrap().unwrap();
        let body_ptr = e.body().as_ptr();
        assert_eq!(&e.body_bytes()[..], b"abc");
        let shared = e.into_body_bytes();
        assert_eq!(&shared[..], b"abc");
        assert_eq!(shared.as_ptr(), body_ptr, "no copy");
    }

    #[test]
    fn oversize_length_is_refused_from_the_header_alone() {
        let d = EnvelopeDecoder::new(Direction::Request, 1024);
        let mut buf = BytesMut::from(&header(4, 1, 7, 1025)[..]);
        assert!(matches!(
            d.decode(&mut buf),
            Err(EnvelopeError::BodyTooLong { length: 1025, .. })
        ));
        let mut buf = BytesMut::from(&header(4, 1, 7, -5)[..]);
        assert!(matches!(
            d.decode(&mut buf),
            Err(EnvelopeError::BodyTooLong { length: -5, .. })
        ));
    }

    #[test]
    fn bad_version_and_direction() {
        let d = EnvelopeDecoder::new(Direction::Request, 1024);
        let mut buf = BytesMut::from(&header(2, 3, 5, 0)[..]);
        assert!(matches!(
            d.decode(&mut buf),
            Err(EnvelopeError::UnsupportedVersion {
                version: 2,
                stream: 0,
                ..
            })
        ));
        let mut buf = BytesMut::from(&header(0x84, 3, 5, 0)[..]);
        assert!(matches!(
            d.decode(&mut buf),
            Err(EnvelopeError::WrongDirection { .. })
        ));
    }

    proptest! {
        #[test]
        fn decoder_is_total(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let d = EnvelopeDecoder::new(Direction::Request, 32);
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some(_)) = d.decode(&mut buf) {}
        }

        #[test]
        fn round_trip(version in 3u8..=5, stream in any::<i16>(), opcode in any::<u8>(),
                      flags in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let h = Header {
                version: ProtocolVersion::from_byte(version).unwrap(),
                direction: Direction::Response,
                flags: Flags(flags),
                stream: StreamId(stream),
                opcode: Opcode(opcode),
                length: body.len(),
            };
            let e = Envelope::new(h, &body);
            let mut buf = BytesMut::from(e.as_bytes());
            let d = EnvelopeDecoder::new(Direction::Response, 1 << 20);
            let back = d.decode(&mut buf).unwrap().unwrap();
            prop_assert_eq!(back.header(), &h);
            prop_assert_eq!(back.body(), &body[..]);
            prop_assert!(buf.is_empty());
        }

        /// A run taken off a buffer is what decoding each envelope and setting its stream
        /// would give, joined; it ends at the first envelope refused, incomplete or malformed,
        /// and leaves the rest as it was.
        #[test]
        fn take_run_is_decode_and_set_stream(
            envelopes in proptest::collection::vec(
                (any::<i16>(), 0u8..20, proptest::collection::vec(any::<u8>(), 0..40)), 0..8),
            tail in proptest::collection::vec(any::<u8>(), 0..12),
            refuse_opcode in 0u8..20,
        ) {
            let mut wire = Vec::new();
            for (stream, opcode, body) in &envelopes {
                let mut v = header(4, *stream, *opcode, body.len() as i32);
                v.extend_from_slice(body);
                wire.extend_from_slice(&v);
            }
            wire.extend_from_slice(&tail);
            let d = EnvelopeDecoder::new(Direction::Request, 64);
            let restream = |h: &Header| {
                (h.opcode.0 != refuse_opcode).then(|| StreamId(h.stream.0.wrapping_add(1)))
            };

            let mut expected = BytesMut::new();
            let mut rest = BytesMut::from(&wire[..]);
            loop {
                let before = rest.clone();
                match d.decode(&mut rest) {
                    Ok(Some(mut e)) => match restream(e.header()) {
                        Some(s) => {
                            e.set_stream(s);
                            expected.extend_from_slice(e.as_bytes());
                        }
                        None => {
                            rest = before;
                            break;
                        }
                    },
                    _ => {
                        rest = before;
                        break;
                    }
                }
            }

            let mut buf = BytesMut::from(&wire[..]);
            let mut offered = 0;
            let run = d.take_run(&mut buf, |h| {
                offered += 1;
                restream(h)
            });
            prop_assert_eq!(run.as_deref().unwrap_or_default(), &expected[..]);
            prop_assert_eq!(run.is_none(), expected.is_empty());
            prop_assert_eq!(&buf[..], &rest[..]);
            prop_assert!(offered <= envelopes.len());
        }
    }
}
