//! The CQL language as far as the rewrite needs it: the lexer, the literal values, and the
//! normalizer that turns a literal-bearing statement into a canonical shape plus its literals,
//! the table a SELECT reads (for the proxy's topology rewriting), whether a statement is
//! conditional (for routing by its serial consistency), and whether it is idempotent
//! by its form (sent again when its connection ended).

pub mod conditional;
pub mod idempotent;
pub mod lexer;
pub mod literal;
pub mod normalize;
pub mod source_table;

pub use literal::Literal;
