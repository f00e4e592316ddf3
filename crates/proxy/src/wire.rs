//! The wire of every link the proxy holds (a client connection, its home upstream connection,
//! a replica connection): reading frames ([`FrameReader`]: the buffer, sized by what arrives,
//! and the decoder, v3/v4 envelopes or v5 segments), what the handshake negotiated for reading
//! bodies ([`Wire`]: compression and the frame limit, set once at STARTUP and read without a
//! lock through [`Negotiated`]), the decoding of the answers the proxy reads (a `USE`'s
//! keyspace, a PREPARED id, an UNPREPARED id) and the one stream-id patch ([`set_stream`]).
//!
//! Native protocol v4 section 2 (the envelope header), v5 section 2 (segments), section 4.2.5
//! (RESULT kinds), section 9 (UNPREPARED's id).

use autoprep_protocol::compression::{plain_body, Compression};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Header, Opcode, StreamId, HEADER_LEN,
};
use autoprep_protocol::message::error::{ErrorDetail, ErrorView};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::message::ResponseBody;
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder, SegmentError};
use bytes::{Bytes, BytesMut};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, Ordering};
use tokio::io::{AsyncRead, AsyncReadExt};

/// What reading a link's bodies needs: the compression its STARTUP negotiated (v3/v4 bodies)
/// and the largest body the proxy accepts, decompressed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wire {
    pub compression: Option<Compression>,
    pub max_frame: usize,
}

impl Wire {
    /// The body of `env` as plain bytes (see [`plain_body`]).
    pub fn body<'a>(&self, env: &'a Envelope) -> Option<Cow<'a, [u8]>> {
        plain_body(env, self.compression, self.max_frame)
    }

    /// `f` of the RESULT message of `env`, or `None` when `env` is not a readable RESULT.
    pub fn with_result<T>(
        &self,
        env: &Envelope,
        f: impl FnOnce(ResultView<'_>) -> Option<T>,
    ) -> Option<T> {
        if env.header().opcode != autoprep_protocol::envelope::Opcode::RESULT {
            return None;
        }
        let body = self.body(env)?;
        let rb = ResponseBody::parse(env.header(), &body).ok()?;
        f(ResultView::parse(rb.message, env.header().version).ok()?)
    }

    /// The keyspace of a Set_keyspace RESULT (the answer to `USE`).
    pub fn set_keyspace(&self, env: &Envelope) -> Option<String> {
        self.with_result(env, |r| match r {
            ResultView::SetKeyspace(k) => Some(k.to_owned()),
            _ => None,
        })
    }

    /// The id of a Prepared RESULT.
    pub fn prepared_id(&self, env: &Envelope) -> Option<Bytes> {
        self.with_result(env, |r| match r {
            ResultView::Prepared(p) => Some(Bytes::copy_from_slice(p.id)),
            _ => None,
        })
    }

    /// The id of an UNPREPARED error, if `env` is one.
    pub fn unprepared_id(&self, env: &Envelope) -> Option<Bytes> {
        if env.header().opcode != autoprep_protocol::envelope::Opcode::ERROR {
            return None;
        }
        let body = self.body(env)?;
        let rb = ResponseBody::parse(env.header(), &body).ok()?;
        match ErrorView::parse(rb.message, env.header().version)
            .ok()?
            .detail
        {
            ErrorDetail::Unprepared { id } => Some(Bytes::copy_from_slice(id)),
            _ => None,
        }
    }
}

/// The compression a connection's STARTUP negotiated, stored where both of its readers (and
/// its replica links) read it without a lock. STARTUP sets it; a client whose STARTUP failed
/// may send another, which sets it again.
#[derive(Debug, Default)]
pub struct Negotiated(AtomicU8);

impl Negotiated {
    const NONE: u8 = 0;
    const LZ4: u8 = 1;
    const SNAPPY: u8 = 2;

    /// What STARTUP asked for.
    pub fn set(&self, compression: Option<Compression>) {
        let v = match compression {
            None => Self::NONE,
            Some(Compression::Lz4) => Self::LZ4,
            Some(Compression::Snappy) => Self::SNAPPY,
        };
        self.0.store(v, Ordering::Release);
    }

    /// The negotiated compression.
    pub fn get(&self) -> Option<Compression> {
        match self.0.load(Ordering::Acquire) {
            Self::LZ4 => Some(Compression::Lz4),
            Self::SNAPPY => Some(Compression::Snappy),
            _ => None,
        }
    }

    /// The link's [`Wire`], with `max_frame` the proxy's frame limit.
    pub fn wire(&self, max_frame: usize) -> Wire {
        Wire {
            compression: self.get(),
            max_frame,
        }
    }
}

/// Writes upstream (or client) stream id `id` into a whole envelope's header: the one patch the
/// proxy makes to a frame it forwards.
pub fn set_stream(frame: &mut BytesMut, id: i16) {
    frame[2..4].copy_from_slice(&id.to_be_bytes());
}

/// One direction's read side of a link: what was read and not decoded yet, and how the bytes
/// are framed (envelopes, then v5 segments once framing starts).
#[derive(Debug)]
pub struct FrameReader {
    buf: BytesMut,
    envelopes: EnvelopeDecoder,
    framed: Option<FramedDecoder>,
}

impl FrameReader {
    /// A reader of envelopes sent in `direction`, bodies of at most `max_body` bytes.
    pub fn new(direction: Direction, max_body: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::new(),
            envelopes: EnvelopeDecoder::new(direction, max_body),
            framed: None,
        }
    }

    /// A reader that goes on from another's [`FrameReader::carried`] bytes (`framing`: v5
    /// framing started there, with LZ4-compressed segments or not): a connection taken over
    /// from a draining process (see [`crate::handover`]).
    pub fn resume(
        direction: Direction,
        max_body: usize,
        unread: &[u8],
        framing: Option<bool>,
    ) -> FrameReader {
        let mut reader = FrameReader::new(direction, max_body);
        if let Some(lz4) = framing {
            reader.start_framing(lz4);
        }
        reader.buf.extend_from_slice(unread);
        reader
    }

    /// The bytes read and not handled yet, when another reader can go on from them (see
    /// [`FrameReader::resume`]): `None` when v5 segments already gave part of an envelope
    /// (one larger than a segment), which only this reader holds.
    pub fn carried(&self) -> Option<&[u8]> {
        match &self.framed {
            Some(f) if f.decoded_len() > 0 => None,
            _ => Some(&self.buf),
        }
    }

    /// Whether v5 framing started.
    pub fn is_framed(&self) -> bool {
        self.framed.is_some()
    }

    /// From the next byte on, envelopes arrive in v5 segments (`lz4`: compressed ones).
    pub fn start_framing(&mut self, lz4: bool) {
        self.framed = Some(FramedDecoder::new(
            SegmentDecoder::new(lz4),
            self.envelopes.clone(),
        ));
    }

    /// The next whole envelope read, `None` when more bytes are needed.
    pub fn decode(&mut self) -> Result<Option<Envelope>, SegmentError> {
        match &mut self.framed {
            Some(f) => f.decode(&mut self.buf),
            None => self
                .envelopes
                .decode(&mut self.buf)
                .map_err(SegmentError::from),
        }
    }

    /// Whether a run may be taken ([`FrameReader::take_run`]): a whole header's worth of
    /// bytes is read (v4) or decoded from a segment (v5).
    pub fn may_have_run(&self) -> bool {
        self.next_header().is_some()
    }

    /// The opcode of the next envelope, when a whole header's worth of it is read (v4) or
    /// decoded from a segment (v5): a run of EXECUTEs is looked for only in front of one.
    pub fn next_opcode(&self) -> Option<Opcode> {
        self.next_header().map(|h| Opcode(h[4]))
    }

    fn next_header(&self) -> Option<&[u8; HEADER_LEN]> {
        match &self.framed {
            Some(f) => f.decoded().first_chunk(),
            None => self.buf.first_chunk(),
        }
    }

    /// The whole envelopes at the front of what was read that `restream` accepts, under the
    /// stream ids it gives them, as one buffer (see [`EnvelopeDecoder::take_run`]); `None` when
    /// the first is not accepted. Under v5 framing only what [`FrameReader::decode`] decoded
    /// from a segment is looked at (see [`FramedDecoder::take_run`]): the first envelope of
    /// each segment comes from `decode`, the rest of the segment as a run.
    pub fn take_run(
        &mut self,
        restream: impl FnMut(&Header) -> Option<StreamId>,
    ) -> Option<BytesMut> {
        match &mut self.framed {
            Some(f) => f.take_run(restream),
            None => self.envelopes.take_run(&mut self.buf, restream),
        }
    }

    /// Reads more bytes from `rd` (see [`reserve_read_room`]); `Ok(0)` at its end.
    pub async fn read_from(&mut self, rd: &mut (impl AsyncRead + Unpin)) -> std::io::Result<usize> {
        reserve_read_room(&mut self.buf);
        rd.read_buf(&mut self.buf).await
    }

    /// Bytes read and not decoded yet.
    pub fn unread(&self) -> &[u8] {
        &self.buf
    }

    /// The envelope decoder (for the header of an incomplete frame).
    pub fn envelopes(&self) -> &EnvelopeDecoder {
        &self.envelopes
    }
}

/// A read buffer's room for the next read: it starts at [`READ_MIN`] and doubles while reads
/// fill it (a large frame arrives in a few large reads), and once every byte read has been
/// handled, a buffer grown past [`READ_KEEP`] is given back (an idle connection holds only
/// what it needs; the frames split from it keep their own part alive until written).
pub fn reserve_read_room(buf: &mut BytesMut) {
    // An empty buffer may still share its allocation with frames split from it (a large
    // answer being written): it keeps that allocation only when it is its sole owner and the
    // allocation is small; otherwise it lets go of it.
    if buf.is_empty() {
        let keep =
            buf.capacity() <= READ_KEEP && buf.try_reclaim(READ_MIN) && buf.capacity() <= READ_KEEP;
        if !keep {
            *buf = BytesMut::new();
        }
    }
    if buf.capacity() - buf.len() < READ_MIN {
        buf.reserve(buf.len().max(READ_MIN));
    }
}

/// The smallest room a read is given.
pub const READ_MIN: usize = 4 * 1024;

/// A drained read buffer larger than this is given back.
pub const READ_KEEP: usize = 64 * 1024;

/// The wire unit tests use: no compression, a 256 MiB frame limit.
#[cfg(test)]
pub const TEST_WIRE: Wire = Wire {
    compression: None,
    max_frame: 256 * 1024 * 1024,
};

#[cfg(test)]
mod tests {
    use super::*;
    use autoprep_protocol::envelope::{Flags, Opcode, ProtocolVersion};

    fn response(opcode: Opcode, message: &[u8]) -> Envelope {
        let header = Header {
            version: ProtocolVersion::V4,
            flags: Flags(0),
            stream: StreamId(3),
            opcode,
            direction: Direction::Response,
            length: 0,
        };
        Envelope::new(header, message)
    }

    fn string(s: &str) -> Vec<u8> {
        let mut v = (s.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    }

    #[test]
    fn set_keyspace_reads_the_use_answer() {
        let mut m = 3i32.to_be_bytes().to_vec();
        m.extend(string("ks1"));
        let env = response(Opcode::RESULT, &m);
        assert_eq!(TEST_WIRE.set_keyspace(&env).as_deref(), Some("ks1"));
        assert_eq!(TEST_WIRE.prepared_id(&env), None);
        assert_eq!(TEST_WIRE.unprepared_id(&env), None);
    }

    #[test]
    fn unprepared_id_reads_the_error() {
        let mut m = 0x2500i32.to_be_bytes().to_vec();
        m.extend(string("unknown id"));
        m.extend_from_slice(&2u16.to_be_bytes());
        m.extend_from_slice(&[0xab, 0xcd]);
        let env = response(Opcode::ERROR, &m);
        assert_eq!(
            TEST_WIRE.unprepared_id(&env).as_deref(),
            Some(&[0xab, 0xcd][..])
        );
        // Another error code is not UNPREPARED.
        let mut m = 0x2200i32.to_be_bytes().to_vec();
        m.extend(string("invalid"));
        assert_eq!(TEST_WIRE.unprepared_id(&response(Opcode::ERROR, &m)), None);
    }

    #[test]
    fn a_compressed_body_without_negotiation_is_unread() {
        let mut m = 3i32.to_be_bytes().to_vec();
        m.extend(string("ks1"));
        let mut frame = response(Opcode::RESULT, &m).into_frame();
        frame[1] |= Flags::COMPRESSION;
        let env = EnvelopeDecoder::new(Direction::Response, 1 << 20)
            .decode(&mut frame)
            .expect("decodes")
            .expect("whole");
        assert_eq!(TEST_WIRE.set_keyspace(&env), None);
    }

    #[test]
    fn negotiated_round_trips() {
        let n = Negotiated::default();
        assert_eq!(n.get(), None);
        for c in [Some(Compression::Lz4), Some(Compression::Snappy), None] {
            n.set(c);
            assert_eq!(n.wire(7).compression, c);
            assert_eq!(n.wire(7).max_frame, 7);
        }
    }

    #[test]
    fn set_stream_patches_the_header_only() {
        let env = response(Opcode::RESULT, &1i32.to_be_bytes());
        let mut frame = env.into_frame();
        let before = frame.clone();
        set_stream(&mut frame, -2);
        assert_eq!(&frame[2..4], &(-2i16).to_be_bytes());
        assert_eq!(frame[..2], before[..2]);
        assert_eq!(frame[4..], before[4..]);
    }
}
