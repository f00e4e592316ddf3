//! v5 segments and v4 body compression, structure-aware: random bytes almost never pass a
//! segment's CRC24 and CRC32, so the target writes valid checksums around the fuzzer's
//! headers and payloads (plain, LZ4-compressed, or raw bytes claimed to be LZ4) and decodes.
//!
//! Checked:
//! - decoding never panics, and decoding the bytes fed in arbitrary pieces gives what
//!   decoding them at once gives (the same envelopes, then the same error or wait);
//! - envelopes packed by `SegmentEncoder` decode back byte for byte, plain and LZ4. (Envelopes
//!   larger than a segment are left to segment.rs's own tests: compressing 128 KiB per run
//!   cost this target three quarters of its executions.)
//! - a v4 body compressed with LZ4 or Snappy decompresses to itself, and decompressing the
//!   fuzzer's bytes never panics.
#![no_main]

use arbitrary::Arbitrary;
use autoprep_protocol::compression::{compress, decompress, Compression};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::segment::{
    crc24, crc32, FramedDecoder, SegmentDecoder, SegmentEncoder, MAX_PAYLOAD,
};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

const MAX_BODY: usize = 1 << 20;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    lz4: bool,
    response: bool,
    segments: Vec<RawSegment<'a>>,
    /// Where the decoder is fed the next piece (lengths, cycled).
    cuts: Vec<u8>,
    envelopes: Vec<Env<'a>>,
    body: &'a [u8],
}

#[derive(Debug, Arbitrary)]
struct RawSegment<'a> {
    self_contained: bool,
    /// LZ4: compress the payload for real, or claim these raw bytes decompress to
    /// `claimed_len` bytes.
    compress: bool,
    claimed_len: u32,
    /// Break a checksum: 1 the header's, 2 the payload's.
    corrupt: u8,
    payload: &'a [u8],
}

#[derive(Debug, Arbitrary)]
struct Env<'a> {
    v5: bool,
    flags: u8,
    stream: i16,
    opcode: u8,
    body: &'a [u8],
}

fn put_le(out: &mut Vec<u8>, v: u64, len: usize) {
    for i in 0..len {
        out.push((v >> (8 * i)) as u8);
    }
}

/// One segment with valid checksums (unless told to break one).
fn segment(lz4: bool, s: &RawSegment<'_>, out: &mut Vec<u8>) {
    let sc = u64::from(s.self_contained);
    let (body, uncompressed): (Vec<u8>, u64) = if lz4 && s.compress {
        let mut c = Vec::new();
        compress(Compression::Lz4, s.payload, &mut c);
        (c[4..].to_vec(), s.payload.len() as u64)
    } else if lz4 {
        (s.payload.to_vec(), u64::from(s.claimed_len) & 0x1FFFF)
    } else {
        (s.payload.to_vec(), 0)
    };
    let body = &body[..body.len().min(MAX_PAYLOAD)];
    let uncompressed = uncompressed.min(MAX_PAYLOAD as u64);
    let (field, field_len) = if lz4 {
        (body.len() as u64 | uncompressed << 17 | sc << 34, 5)
    } else {
        (body.len() as u64 | sc << 17, 3)
    };
    put_le(out, field, field_len);
    let header_crc = crc24(field, field_len) ^ u32::from(s.corrupt == 1);
    put_le(out, header_crc.into(), 3);
    out.extend_from_slice(body);
    put_le(out, (crc32(body) ^ u32::from(s.corrupt == 2)).into(), 4);
}

fn decoder(lz4: bool, dir: Direction) -> FramedDecoder {
    FramedDecoder::new(
        SegmentDecoder::new(lz4),
        EnvelopeDecoder::new(dir, MAX_BODY),
    )
}

/// Everything `d` decodes from `bytes` fed in pieces of the `cuts` lengths (all at once when
/// there are none): the envelopes, then how it ended (an error, or waiting with bytes left).
fn decode_all(mut d: FramedDecoder, bytes: &[u8], cuts: &[u8]) -> (Vec<Vec<u8>>, String) {
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut out = Vec::new();
    let mut cut = cuts.iter().cycle();
    loop {
        match d.decode(&mut buf) {
            Ok(Some(env)) => out.push(env.as_bytes().to_vec()),
            Ok(None) if fed < bytes.len() => {
                let n = match cut.next() {
                    Some(&c) => usize::from(c) + 1,
                    None => bytes.len(),
                };
                let end = (fed + n).min(bytes.len());
                buf.extend_from_slice(&bytes[fed..end]);
                fed = end;
            }
            Ok(None) => {
                return (
                    out,
                    format!("waiting, {} + {} bytes", buf.len(), d.decoded_len()),
                )
            }
            Err(e) => return (out, format!("error {e}")),
        }
    }
}

fuzz_target!(|input: Input<'_>| {
    let dir = if input.response {
        Direction::Response
    } else {
        Direction::Request
    };

    // Hostile segments with valid checksums: at once and in pieces alike.
    let mut wire = Vec::new();
    for s in &input.segments {
        segment(input.lz4, s, &mut wire);
    }
    let whole = decode_all(decoder(input.lz4, dir), &wire, &[]);
    if !input.cuts.is_empty() {
        let pieces = decode_all(decoder(input.lz4, dir), &wire, &input.cuts);
        assert_eq!(whole, pieces, "decoding in pieces differs");
    }

    // Well-formed envelopes packed into segments decode back as they were.
    let mut envelopes = Vec::new();
    for e in &input.envelopes {
        envelopes.push(envelope(e, dir));
    }
    let mut enc = SegmentEncoder::new(input.lz4);
    let mut out = BytesMut::new();
    for e in &envelopes {
        enc.push(e, &mut out);
    }
    enc.finish(&mut out);
    let (back, end) = decode_all(decoder(input.lz4, dir), &out, &input.cuts);
    assert_eq!(back, envelopes, "segments decoded back ({end})");
    assert!(end.starts_with("waiting, 0 + 0"), "{end}");

    // v4 body compression.
    for alg in [Compression::Lz4, Compression::Snappy] {
        let mut c = Vec::new();
        compress(alg, input.body, &mut c);
        assert_eq!(
            decompress(alg, &c, MAX_BODY).as_deref(),
            Ok(input.body),
            "{alg:?} round trip"
        );
        if let Ok(plain) = decompress(alg, input.body, MAX_BODY) {
            assert!(plain.len() <= MAX_BODY);
        }
    }
});

/// The bytes of a valid envelope with the fuzzer's fields.
fn envelope(e: &Env<'_>, direction: Direction) -> Vec<u8> {
    let header = Header {
        version: if e.v5 {
            ProtocolVersion::V5
        } else {
            ProtocolVersion::V4
        },
        direction,
        // v5 envelopes have no compression flag; beta stays off.
        flags: Flags(e.flags & !(Flags::COMPRESSION | Flags::USE_BETA)),
        stream: StreamId(e.stream),
        opcode: Opcode(e.opcode),
        length: 0,
    };
    Envelope::new(header, e.body).as_bytes().to_vec()
}
