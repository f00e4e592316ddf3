//! The identity of a statement shape on one upstream node.

pub use autoprep_protocol::cql::normalize::ShapeHash;

/// Which upstream node a prepared id belongs to (each node has its own server-side cache).
pub type NodeId = u32;

/// A shape on a node, as looked up on the hot path: borrowed, nothing allocated.
///
/// The map is keyed by `(node, hash)`; the text and keyspace are compared on a hit so that two
/// shapes with the same hash can never run each other's statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeKey<'a> {
    pub node: NodeId,
    /// The seeded hash of keyspace and text (`Shape::hash` in `autoprep-protocol`).
    pub hash: ShapeHash,
    pub keyspace: Option<&'a str>,
    pub text: &'a str,
}

impl ShapeKey<'_> {
    pub(crate) fn map_key(&self) -> (NodeId, ShapeHash) {
        (self.node, self.hash)
    }
}
