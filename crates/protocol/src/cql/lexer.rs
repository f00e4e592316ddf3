//! The CQL lexer (issue 3).
