//! The wire of a connection: its read side ([`FrameReader`]: the buffer, sized by what
//! arrives, and the decoder of the wire state, v4 envelopes or v5 segments) and the answers to
//! input that is not the protocol.

use super::end::End;
use crate::protocol_error;
use crate::writer::{Out, Outbox};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, EnvelopeError, Header, ProtocolVersion, StreamId,
    HEADER_LEN,
};
use autoprep_protocol::segment::{FramedDecoder, SegmentDecoder, SegmentError};
use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};

/// One direction's read side of a connection: what was read and not decoded yet, and how the
/// bytes are framed (envelopes, then v5 segments once framing starts).
#[derive(Debug)]
pub(super) struct FrameReader {
    buf: BytesMut,
    envelopes: EnvelopeDecoder,
    framed: Option<FramedDecoder>,
}

impl FrameReader {
    /// A reader of envelopes sent in `direction`, bodies of at most `max_body` bytes.
    pub(super) fn new(direction: Direction, max_body: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::new(),
            envelopes: EnvelopeDecoder::new(direction, max_body),
            framed: None,
        }
    }

    /// Whether v5 framing started.
    pub(super) fn is_framed(&self) -> bool {
        self.framed.is_some()
    }

    /// From the next byte on, envelopes arrive in v5 segments (`lz4`: compressed ones).
    pub(super) fn start_framing(&mut self, lz4: bool) {
        self.framed = Some(FramedDecoder::new(
            SegmentDecoder::new(lz4),
            self.envelopes.clone(),
        ));
    }

    /// The next whole envelope read, `None` when more bytes are needed.
    pub(super) fn next(&mut self) -> Result<Option<Envelope>, SegmentError> {
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
    pub(super) fn may_have_run(&self) -> bool {
        let n = match &self.framed {
            Some(f) => f.decoded_len(),
            None => self.buf.len(),
        };
        n >= HEADER_LEN
    }

    /// The whole envelopes at the front of what was read that `restream` accepts, under the
    /// stream ids it gives them, as one buffer (see [`EnvelopeDecoder::take_run`]); `None` when
    /// the first is not accepted. Under v5 framing only what [`FrameReader::next`] decoded
    /// from a segment is looked at (see [`FramedDecoder::take_run`]): the first envelope of
    /// each segment comes from `next`, the rest of the segment as a run.
    pub(super) fn take_run(
        &mut self,
        restream: impl FnMut(&Header) -> Option<StreamId>,
    ) -> Option<BytesMut> {
        match &mut self.framed {
            Some(f) => f.take_run(restream),
            None => self.envelopes.take_run(&mut self.buf, restream),
        }
    }

    /// Reads more bytes from `rd` (see [`reserve_read_room`]); `Ok(0)` at its end.
    pub(super) async fn read_from(
        &mut self,
        rd: &mut (impl AsyncRead + Unpin),
    ) -> std::io::Result<usize> {
        reserve_read_room(&mut self.buf);
        rd.read_buf(&mut self.buf).await
    }

    /// Bytes read and not decoded yet.
    pub(super) fn unread(&self) -> &[u8] {
        &self.buf
    }

    /// The envelope decoder (for the header of an incomplete frame).
    pub(super) fn envelopes(&self) -> &EnvelopeDecoder {
        &self.envelopes
    }
}

/// The client stopped sending in the middle of a frame: answer (it may still be reading).
pub(super) async fn refuse_truncated(
    buf: &[u8],
    envelopes: &EnvelopeDecoder,
    to_client: &Outbox,
) -> End {
    let (version, stream) = match envelopes.peek_header(buf) {
        Ok(Some(h)) => (h.version, h.stream.0),
        _ => (ProtocolVersion::V4, 0),
    };
    let msg = format!(
        "truncated frame: the connection ended after {} bytes of an incomplete frame",
        buf.len()
    );
    let _ = to_client
        .send(Out::Envelope(protocol_error::build(version, stream, &msg)))
        .await;
    End::BadClientInput(msg)
}

/// A read buffer's room for the next read: it starts at [`READ_MIN`] and doubles while reads
/// fill it (a large frame arrives in a few large reads), and once every byte read has been
/// handled, a buffer grown past [`READ_KEEP`] is given back (an idle connection holds only
/// what it needs; the frames split from it keep their own part alive until written).
pub(super) fn reserve_read_room(buf: &mut BytesMut) {
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
pub(super) const READ_MIN: usize = 4 * 1024;

/// A drained read buffer larger than this is given back.
pub(super) const READ_KEEP: usize = 64 * 1024;

/// Answers malformed client input with a protocol ERROR; the session then ends.
pub(super) async fn refuse(err: SegmentError, to_client: &Outbox) -> End {
    let frame = match &err {
        SegmentError::Envelope(e) => protocol_error::for_envelope_error(e),
        other => protocol_error::build(ProtocolVersion::V5, 0, &other.to_string()),
    };
    let _ = to_client.send(Out::Envelope(frame)).await;
    match err {
        SegmentError::Envelope(EnvelopeError::UnsupportedVersion { .. }) => {
            End::VersionRefused(err.to_string())
        }
        _ => End::BadClientInput(err.to_string()),
    }
}
