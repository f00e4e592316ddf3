//! autoprep-protocol: the CQL native protocol (v3, v4, v5) as a sans-IO, zero-copy codec, plus
//! the CQL lexer, normalizer and value encoder that the auto-prepare rewrite needs.
//!
//! # Layout
//! - [`primitives`]: the spec's notation (`[int]`, `[string]`, `[value]`, ...), borrowing readers.
//! - [`envelope`]: the 9-byte envelope header and the envelope decoder / encoder.
//! - [`segment`]: v5 framing (segments with CRC24 headers and CRC32 payloads, LZ4).
//! - [`compression`]: v4 body compression (LZ4 with a length prefix, Snappy).
//! - [`message`]: lazy views over request and response bodies, and request encoders.
//! - [`types`]: CQL types as reported in metadata, and literal-to-bytes encoding.
//! - [`cql`]: the CQL lexer and normalizer.
#![forbid(unsafe_code)]

pub mod compression;
pub mod cql;
pub mod envelope;
pub mod error;
pub mod message;
pub mod primitives;
pub mod segment;
pub mod types;
mod uuid;

pub use error::DecodeError;
