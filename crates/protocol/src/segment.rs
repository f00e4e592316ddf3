//! Protocol v5 framing (spec v5 section 2): envelopes travel inside segments ("frames") with a
//! CRC24-protected header and a CRC32-protected payload, optionally LZ4-compressed. Framing
//! starts after the server's READY or AUTHENTICATE; everything before is unframed.
//!
//! A self-contained segment holds one or more whole envelopes; an envelope larger than the
//! maximum payload is carried by several segments that are not self-contained.

use crate::envelope::{Envelope, EnvelopeDecoder, EnvelopeError, Header, StreamId, HEADER_LEN};
use bytes::{BufMut, BytesMut};
use thiserror::Error;

/// The largest payload one segment carries: 128 KiB - 1.
pub const MAX_PAYLOAD: usize = (1 << 17) - 1;

const CRC24_INIT: u32 = 0x875060;
const CRC24_POLY: u32 = 0x1974F0B;
const CRC32_INITIAL_BYTES: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];

/// CRC24 of the `len` low bytes of `bytes`, least significant first, as v5 headers use it.
pub fn crc24(mut bytes: u64, len: usize) -> u32 {
    let mut crc = CRC24_INIT;
    for _ in 0..len {
        crc ^= ((bytes & 0xff) as u32) << 16;
        bytes >>= 8;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
        }
    }
    crc & 0xff_ffff
}

/// CRC32 of a payload as v5 segments use it: zlib CRC32 pre-fed with `FA 2D 55 CA`.
pub fn crc32(payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&CRC32_INITIAL_BYTES);
    h.update(payload);
    h.finalize()
}

fn read_le(b: &[u8]) -> u64 {
    b.iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

fn put_le(out: &mut impl BufMut, v: u64, len: usize) {
    for i in 0..len {
        out.put_u8((v >> (8 * i)) as u8);
    }
}

/// A segment that must be refused; the connection cannot continue after it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SegmentError {
    #[error("segment header CRC24 mismatch")]
    HeaderCrc,
    #[error("segment payload CRC32 mismatch")]
    PayloadCrc,
    #[error("corrupt LZ4 segment payload")]
    Lz4,
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
}

/// One decoded segment.
#[derive(Debug, Clone)]
pub struct Segment {
    /// True when the payload holds only whole envelopes.
    pub self_contained: bool,
    /// The (decompressed) payload.
    pub payload: BytesMut,
}

/// Splits segments off a receive buffer.
#[derive(Debug, Clone, Copy)]
pub struct SegmentDecoder {
    lz4: bool,
}

impl SegmentDecoder {
    /// A decoder for uncompressed (`lz4 == false`) or LZ4 segments.
    pub fn new(lz4: bool) -> Self {
        SegmentDecoder { lz4 }
    }

    /// Splits one segment off `buf`; `Ok(None)` means more bytes are needed.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Segment>, SegmentError> {
        let header_len = if self.lz4 { 8 } else { 6 };
        let field_len = header_len - 3;
        if buf.len() < header_len {
            return Ok(None);
        }
        let field = read_le(&buf[..field_len]);
        if crc24(field, field_len) as u64 != read_le(&buf[field_len..header_len]) {
            return Err(SegmentError::HeaderCrc);
        }
        let payload_len = (field & 0x1FFFF) as usize;
        let (uncompressed_len, self_contained) = if self.lz4 {
            (((field >> 17) & 0x1FFFF) as usize, field & (1 << 34) != 0)
        } else {
            (0, field & (1 << 17) != 0)
        };
        let total = header_len + payload_len + 4;
        if buf.len() < total {
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        let mut seg = buf.split_to(total);
        let _ = seg.split_to(header_len);
        let trailer = seg.split_off(payload_len);
        if crc32(&seg) as u64 != read_le(&trailer) {
            return Err(SegmentError::PayloadCrc);
        }
        let payload = if self.lz4 && uncompressed_len != 0 {
            let out = crate::compression::lz4_block_decompress(&seg, uncompressed_len)
                .map_err(|_| SegmentError::Lz4)?;
            BytesMut::from(&out[..])
        } else {
            seg
        };
        Ok(Some(Segment {
            self_contained,
            payload,
        }))
    }
}

/// Reads envelopes out of a stream of segments, reassembling the ones that span several.
#[derive(Debug, Clone)]
pub struct FramedDecoder {
    segments: SegmentDecoder,
    envelopes: EnvelopeDecoder,
    pending: BytesMut,
}

impl FramedDecoder {
    /// Decodes segments with `segments` and the envelopes inside them with `envelopes`.
    pub fn new(segments: SegmentDecoder, envelopes: EnvelopeDecoder) -> Self {
        FramedDecoder {
            segments,
            envelopes,
            pending: BytesMut::new(),
        }
    }

    /// Returns the next whole envelope, reading segments off `buf` as needed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Envelope>, SegmentError> {
        loop {
            if let Some(e) = self.envelopes.decode(&mut self.pending)? {
                return Ok(Some(e));
            }
            let Some(seg) = self.segments.decode(buf)? else {
                return Ok(None);
            };
            if self.pending.is_empty() {
                self.pending = seg.payload;
            } else {
                self.pending.extend_from_slice(&seg.payload);
            }
        }
    }

    /// Bytes of segment payload decoded and not yet taken as envelopes.
    pub fn decoded_len(&self) -> usize {
        self.pending.len()
    }

    /// The payload decoded and not yet taken (its front is the next envelope's).
    pub fn decoded(&self) -> &[u8] {
        &self.pending
    }

    /// The longest run of whole envelopes at the front of the payload already decoded that
    /// `restream` accepts (see [`EnvelopeDecoder::take_run`]); no segment is read. A run thus
    /// lies within one segment's payload, and it never exceeds [`MAX_PAYLOAD`] (should a peer
    /// have split envelopes across self-contained segments): framed again whole, it fits one
    /// self-contained segment.
    pub fn take_run(
        &mut self,
        mut restream: impl FnMut(&Header) -> Option<StreamId>,
    ) -> Option<BytesMut> {
        let mut len = 0;
        self.envelopes.take_run(&mut self.pending, |h| {
            len += HEADER_LEN + h.length;
            if len > MAX_PAYLOAD {
                return None;
            }
            restream(h)
        })
    }
}

/// Packs envelopes into segments: as many whole envelopes per self-contained segment as fit,
/// and an envelope above the maximum payload split over segments that are not self-contained.
#[derive(Debug, Default)]
pub struct SegmentEncoder {
    lz4: bool,
    /// Uncompressed payload being gathered (LZ4 only; uncompressed segments are written in place).
    scratch: Vec<u8>,
    /// Offset in `out` of the open uncompressed segment's header.
    open: Option<usize>,
}

impl SegmentEncoder {
    /// An encoder producing uncompressed or LZ4 segments.
    pub fn new(lz4: bool) -> Self {
        SegmentEncoder {
            lz4,
            scratch: Vec::new(),
            open: None,
        }
    }

    /// Adds one whole envelope's bytes to the segments being written to `out`.
    pub fn push(&mut self, envelope: &[u8], out: &mut BytesMut) {
        if envelope.len() > MAX_PAYLOAD {
            self.finish(out);
            for chunk in envelope.chunks(MAX_PAYLOAD) {
                self.write_segment(chunk, false, out);
            }
            return;
        }
        if self.pending_len(out) + envelope.len() > MAX_PAYLOAD {
            self.finish(out);
        }
        if self.lz4 {
            self.scratch.extend_from_slice(envelope);
        } else {
            if self.open.is_none() {
                self.open = Some(out.len());
                out.put_bytes(0, 6);
            }
            out.extend_from_slice(envelope);
        }
    }

    fn pending_len(&self, out: &BytesMut) -> usize {
        match self.open {
            Some(start) => out.len() - start - 6,
            None => self.scratch.len(),
        }
    }

    /// Closes the segment being gathered, if any. Call after the last `push` of a batch.
    pub fn finish(&mut self, out: &mut BytesMut) {
        if let Some(start) = self.open.take() {
            let len = out.len() - start - 6;
            let field = len as u64 | 1 << 17;
            let mut h = [0u8; 6];
            let mut hv = &mut h[..];
            put_le(&mut hv, field, 3);
            put_le(&mut hv, crc24(field, 3).into(), 3);
            out[start..start + 6].copy_from_slice(&h);
            let crc = crc32(&out[start + 6..]);
            put_le(out, crc.into(), 4);
        } else if !self.scratch.is_empty() {
            let payload = std::mem::take(&mut self.scratch);
            self.write_segment(&payload, true, out);
            self.scratch = payload;
            self.scratch.clear();
        }
    }

    fn write_segment(&self, payload: &[u8], self_contained: bool, out: &mut BytesMut) {
        let sc = u64::from(self_contained);
        if self.lz4 {
            let compressed = lz4_flex::block::compress(payload);
            // Spec: an uncompressed length of 0 means the payload is stored as it is.
            let (body, uncompressed_len): (&[u8], usize) = if compressed.len() < payload.len() {
                (&compressed, payload.len())
            } else {
                (payload, 0)
            };
            let field = body.len() as u64 | (uncompressed_len as u64) << 17 | sc << 34;
            put_le(out, field, 5);
            put_le(out, crc24(field, 5).into(), 3);
            out.extend_from_slice(body);
            put_le(out, crc32(body).into(), 4);
        } else {
            let field = payload.len() as u64 | sc << 17;
            put_le(out, field, 3);
            put_le(out, crc24(field, 3).into(), 3);
            out.extend_from_slice(payload);
            put_le(out, crc32(payload).into(), 4);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{Direction, Flags, Header, Opcode, ProtocolVersion, StreamId};
    use proptest::prelude::*;

    fn envelope(stream: i16, body: &[u8]) -> Envelope {
        Envelope::new(
            Header {
                version: ProtocolVersion::V5,
                direction: Direction::Response,
                flags: Flags(0),
                stream: StreamId(stream),
                opcode: Opcode::RESULT,
                length: 0,
            },
            body,
        )
    }

    fn decode_all(lz4: bool, mut wire: BytesMut) -> Vec<Envelope> {
        let mut d = FramedDecoder::new(
            SegmentDecoder::new(lz4),
            EnvelopeDecoder::new(Direction::Response, 1 << 24),
        );
        let mut out = Vec::new();
        while let Some(e) = d.decode(&mut wire).unwrap() {
            out.push(e);
        }
        assert!(wire.is_empty());
        out
    }

    #[test]
    fn header_crc_is_checked() {
        let mut out = BytesMut::new();
        let mut e = SegmentEncoder::new(false);
        e.push(envelope(1, b"hello").as_bytes(), &mut out);
        e.finish(&mut out);
        out[4] ^= 1;
        let d = SegmentDecoder::new(false);
        assert_eq!(d.decode(&mut out).unwrap_err(), SegmentError::HeaderCrc);
    }

    #[test]
    fn payload_crc_is_checked() {
        let mut out = BytesMut::new();
        let mut e = SegmentEncoder::new(false);
        e.push(envelope(1, b"hello").as_bytes(), &mut out);
        e.finish(&mut out);
        out[10] ^= 1;
        let d = SegmentDecoder::new(false);
        assert_eq!(d.decode(&mut out).unwrap_err(), SegmentError::PayloadCrc);
    }

    #[test]
    fn large_envelope_spans_segments() {
        for lz4 in [false, true] {
            let big: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
            let mut out = BytesMut::new();
            let mut e = SegmentEncoder::new(lz4);
            e.push(envelope(1, b"small").as_bytes(), &mut out);
            e.push(envelope(2, &big).as_bytes(), &mut out);
            e.push(envelope(3, b"after").as_bytes(), &mut out);
            e.finish(&mut out);
            let back = decode_all(lz4, out);
            assert_eq!(back.len(), 3);
            assert_eq!(back[1].body(), &big[..]);
            assert_eq!(back[2].body(), b"after");
        }
    }

    #[test]
    fn a_run_takes_the_rest_of_the_decoded_segment_only() {
        for lz4 in [false, true] {
            let mut wire = BytesMut::new();
            let mut e = SegmentEncoder::new(lz4);
            for i in 0..4 {
                e.push(envelope(i, b"first segment").as_bytes(), &mut wire);
            }
            e.finish(&mut wire);
            e.push(envelope(4, b"second segment").as_bytes(), &mut wire);
            e.finish(&mut wire);
            let mut d = FramedDecoder::new(
                SegmentDecoder::new(lz4),
                EnvelopeDecoder::new(Direction::Response, 1 << 20),
            );
            assert!(
                d.take_run(|_| Some(StreamId(9))).is_none(),
                "no segment read yet"
            );
            assert_eq!(
                d.decode(&mut wire).unwrap().unwrap().header().stream,
                StreamId(0)
            );
            let run = d.take_run(|h| Some(StreamId(h.stream.0 + 100))).unwrap();
            let mut expected = BytesMut::new();
            for i in 1..4 {
                let mut env = envelope(i, b"first segment");
                env.set_stream(StreamId(i + 100));
                expected.extend_from_slice(env.as_bytes());
            }
            assert_eq!(run, expected);
            assert_eq!(d.decoded_len(), 0);
            assert!(d.take_run(|_| Some(StreamId(9))).is_none());
            assert_eq!(
                d.decode(&mut wire).unwrap().unwrap().header().stream,
                StreamId(4)
            );
        }
    }

    proptest! {
        // Few cases: each one moves up to a few hundred KiB through LZ4 in a debug build.
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn round_trip(bodies in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..70_000), 0..5), lz4 in any::<bool>()) {
            let mut out = BytesMut::new();
            let mut e = SegmentEncoder::new(lz4);
            for (i, b) in bodies.iter().enumerate() {
                e.push(envelope(i as i16, b).as_bytes(), &mut out);
            }
            e.finish(&mut out);
            let back = decode_all(lz4, out);
            prop_assert_eq!(back.len(), bodies.len());
            for (b, e) in bodies.iter().zip(&back) {
                prop_assert_eq!(e.body(), &b[..]);
            }
        }

        #[test]
        fn decoder_is_total(data in proptest::collection::vec(any::<u8>(), 0..200), lz4 in any::<bool>()) {
            let mut d = FramedDecoder::new(SegmentDecoder::new(lz4), EnvelopeDecoder::new(Direction::Response, 1 << 16));
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some(_)) = d.decode(&mut buf) {}
        }
    }
}
