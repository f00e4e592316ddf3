//! Body compression of protocol v3/v4 (spec v4 section 5): LZ4 blocks prefixed with the
//! uncompressed length as a 4-byte big-endian integer, and raw Snappy. Negotiated by the
//! STARTUP option `COMPRESSION`; STARTUP itself is never compressed.

use crate::envelope::{Envelope, Flags, ProtocolVersion};
use std::borrow::Cow;
use thiserror::Error;

/// A compression algorithm a connection may negotiate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    Lz4,
    Snappy,
}

impl Compression {
    /// The algorithm named by a STARTUP `COMPRESSION` value (case-insensitive).
    pub fn from_startup_name(name: &str) -> Option<Compression> {
        if name.eq_ignore_ascii_case("lz4") {
            Some(Compression::Lz4)
        } else if name.eq_ignore_ascii_case("snappy") {
            Some(Compression::Snappy)
        } else {
            None
        }
    }
}

/// A compressed body that cannot be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompressionError {
    /// The LZ4 body is shorter than its 4-byte length prefix, or the prefix is negative.
    #[error("LZ4 body has no valid length prefix")]
    Lz4Prefix,
    /// The declared uncompressed size exceeds the maximum.
    #[error("declared uncompressed length {length} exceeds the maximum of {max}")]
    TooLong { length: usize, max: usize },
    /// The compressed bytes are corrupt.
    #[error("corrupt {algorithm} data")]
    Corrupt { algorithm: &'static str },
}

/// The body of `env` as plain bytes: decompressed with the `negotiated` algorithm when its
/// v3/v4 compression flag is set (a v5 envelope's body never is: its segments are). `None`
/// when the flag is set and nothing was negotiated, or the body does not decompress within
/// `max` bytes.
pub fn plain_body(
    env: &Envelope,
    negotiated: Option<Compression>,
    max: usize,
) -> Option<Cow<'_, [u8]>> {
    let h = env.header();
    if h.flags.has(Flags::COMPRESSION) && h.version < ProtocolVersion::V5 {
        decompress(negotiated?, env.body(), max)
            .ok()
            .map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(env.body()))
    }
}

/// Decompresses a v4 body compressed with `alg`, refusing outputs above `max_len` bytes.
pub fn decompress(
    alg: Compression,
    body: &[u8],
    max_len: usize,
) -> Result<Vec<u8>, CompressionError> {
    match alg {
        Compression::Lz4 => {
            let (prefix, block) = body
                .split_first_chunk::<4>()
                .ok_or(CompressionError::Lz4Prefix)?;
            let n = usize::try_from(i32::from_be_bytes(*prefix))
                .map_err(|_| CompressionError::Lz4Prefix)?;
            if n > max_len {
                return Err(CompressionError::TooLong {
                    length: n,
                    max: max_len,
                });
            }
            lz4_block_decompress(block, n)
        }
        Compression::Snappy => {
            let n = snap::raw::decompress_len(body).map_err(|_| CompressionError::Corrupt {
                algorithm: "snappy",
            })?;
            if n > max_len {
                return Err(CompressionError::TooLong {
                    length: n,
                    max: max_len,
                });
            }
            snap::raw::Decoder::new()
                .decompress_vec(body)
                .map_err(|_| CompressionError::Corrupt {
                    algorithm: "snappy",
                })
        }
    }
}

/// Decompresses one LZ4 block whose uncompressed size is exactly `n`.
pub fn lz4_block_decompress(block: &[u8], n: usize) -> Result<Vec<u8>, CompressionError> {
    let out = lz4_flex::block::decompress(block, n)
        .map_err(|_| CompressionError::Corrupt { algorithm: "lz4" })?;
    if out.len() != n {
        return Err(CompressionError::Corrupt { algorithm: "lz4" });
    }
    Ok(out)
}

/// Compresses a v4 body with `alg`, appending to `out`.
pub fn compress(alg: Compression, body: &[u8], out: &mut Vec<u8>) {
    match alg {
        Compression::Lz4 => {
            // Bodies are bounded by the envelope maximum, far below i32::MAX.
            let n = i32::try_from(body.len()).unwrap_or(i32::MAX);
            out.extend_from_slice(&n.to_be_bytes());
            out.extend_from_slice(&lz4_flex::block::compress(body));
        }
        Compression::Snappy => {
            let start = out.len();
            out.resize(start + snap::raw::max_compress_len(body.len()), 0);
            match snap::raw::Encoder::new().compress(body, &mut out[start..]) {
                Ok(n) => out.truncate(start + n),
                // Only fails for inputs above 4 GiB, which envelopes never are.
                Err(_) => out.truncate(start),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(body in proptest::collection::vec(any::<u8>(), 0..2000), lz4 in any::<bool>()) {
            let alg = if lz4 { Compression::Lz4 } else { Compression::Snappy };
            let mut out = Vec::new();
            compress(alg, &body, &mut out);
            prop_assert_eq!(decompress(alg, &out, 1 << 20).unwrap(), body);
        }

        #[test]
        fn garbage_is_an_error_not_a_panic(body in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = decompress(Compression::Lz4, &body, 1 << 16);
            let _ = decompress(Compression::Snappy, &body, 1 << 16);
        }
    }

    #[test]
    fn declared_size_above_maximum_is_refused() {
        let mut out = Vec::new();
        compress(Compression::Lz4, &[0u8; 100], &mut out);
        assert!(matches!(
            decompress(Compression::Lz4, &out, 50),
            Err(CompressionError::TooLong { .. })
        ));
    }
}
