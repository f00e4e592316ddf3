//! autoprep-cache: the prepared-statement cache shared by every client connection.
//!
//! # Layout
//! - [`key`]: what identifies a shape on a node (node, keyspace, canonical text).
//! - [`entry`]: what the server told us when it prepared a shape.
//! - [`cache`]: the bounded LRU with admission, single-flight preparation, negative entries
//!   and statistics.
#![forbid(unsafe_code)]

pub mod cache;
pub mod entry;
pub mod key;

pub use cache::{CacheConfig, CacheStats, Lookup, PreparedCache};
pub use entry::PreparedEntry;
pub use key::{ShapeHash, ShapeKey};
