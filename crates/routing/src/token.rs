//! The position of a partition on the ring under Murmur3Partitioner: a signed 64-bit integer.
//!
//! Cassandra's `Murmur3Partitioner.LongToken` orders tokens as signed longs; `Long.MIN_VALUE` is
//! the ring's minimum and never the token of a non-empty key (see [`crate::murmur3::token`]).
//! Nodes advertise their tokens as decimal text (`system.local.tokens`, `system.peers.tokens`),
//! hence the [`FromStr`] implementation.

use std::fmt;
use std::str::FromStr;

/// A Murmur3Partitioner token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(pub i64);

impl Token {
    /// The ring's minimum (`Murmur3Partitioner.MINIMUM`): the token of the empty key only.
    pub const MIN: Token = Token(i64::MIN);
    /// The largest token; also what a hash of `i64::MIN` is normalized to.
    pub const MAX: Token = Token(i64::MAX);
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for Token {
    type Err = std::num::ParseIntError;

    /// Parses the decimal form the server uses in `system.local` / `system.peers`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim().parse().map(Token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_decimal() {
        let t: Token = "-9223372036854775808".parse().unwrap();
        assert_eq!(t, Token::MIN);
        assert_eq!(Token(-42).to_string(), "-42");
        assert_eq!(" 17 ".parse::<Token>().unwrap(), Token(17));
        assert!("9223372036854775808".parse::<Token>().is_err());
    }

    #[test]
    fn orders_as_signed() {
        assert!(Token(-1) < Token(0));
        assert!(Token::MIN < Token(-1));
        assert!(Token(1) < Token::MAX);
    }
}
