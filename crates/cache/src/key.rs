//! The identity of a statement shape on one upstream node.

/// Which upstream node a prepared id belongs to (each node has its own server-side cache).
pub type NodeId = u32;

/// A shape on a node, as looked up on the hot path: borrowed, nothing allocated.
///
/// The map is keyed by `(node, fingerprint)`; the text and keyspace are compared on a hit so
/// that a fingerprint collision can never run the wrong statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeKey<'a> {
    pub node: NodeId,
    /// A hash of keyspace and text (`Shape::fingerprint` in `autoprep-protocol`).
    pub fingerprint: [u8; 16],
    pub keyspace: Option<&'a str>,
    pub text: &'a str,
}

impl ShapeKey<'_> {
    pub(crate) fn map_key(&self) -> (NodeId, [u8; 16]) {
        (self.node, self.fingerprint)
    }
}
