//! Errors raised while decoding bytes of the native protocol.

use thiserror::Error;

/// A failure to read a protocol structure from untrusted bytes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes remained than the structure needs.
    #[error("need {expected} bytes for {what}, only {received} remain")]
    TooFewBytes {
        what: &'static str,
        expected: usize,
        received: usize,
    },
    /// A length field was negative where that is not allowed.
    #[error("negative length {length} for {what}")]
    NegativeLength { what: &'static str, length: i32 },
    /// A string was not valid UTF-8.
    #[error("invalid UTF-8 in {what}")]
    InvalidUtf8 { what: &'static str },
    /// An enumerated field had a value the protocol does not define.
    #[error("unknown {what} 0x{value:x}")]
    UnknownValue { what: &'static str, value: u32 },
    /// The structure was otherwise malformed.
    #[error("malformed {what}: {reason}")]
    Malformed {
        what: &'static str,
        reason: &'static str,
    },
}
