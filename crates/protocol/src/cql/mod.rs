//! The CQL language as far as the rewrite needs it: the lexer, the literal values, and the
//! normalizer that turns a literal-bearing statement into a canonical shape plus its literals.

pub mod lexer;
pub mod literal;
pub mod normalize;

pub use literal::Literal;
