//! The CQL normalizer (issue 3).
