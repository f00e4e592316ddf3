//! v5 segments (issue 2).
