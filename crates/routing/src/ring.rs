//! The token ring: which node owns which token, and where each node lives (datacenter, rack).
//!
//! Mirrors what Cassandra's `locator/TokenMetadata.java` keeps for placement: the sorted ring
//! tokens (`sortedTokens()`), the owner of each (`getEndpoint(token)`), and the topology (nodes
//! and racks per datacenter). A key's token belongs to the range `(previous ring token, t]` of
//! the first ring token `t >= token`, wrapping to the first ring token past the largest
//! (`TokenMetadata.firstTokenIndex` with `insertMin = false`). The proxy fills it from
//! `system.local` and `system.peers` (`tokens`, `data_center`, `rack`).
//!
//! Node ids are the caller's: the ring only needs them to be distinct.

use crate::token::Token;
use std::collections::{HashMap, HashSet};
use thiserror::Error;

/// An opaque node identifier chosen by the caller (an index into its own node table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// A node as the cluster describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: NodeId,
    pub datacenter: String,
    pub rack: String,
    /// The tokens the node owns (vnodes); a node with none is not part of the ring.
    pub tokens: Vec<Token>,
}

/// A set of nodes that does not make a ring.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RingError {
    /// No node owns a token.
    #[error("no node owns a token: the ring is empty")]
    Empty,
    /// The same node id was given twice.
    #[error("node {id:?} is listed twice")]
    DuplicateNode { id: NodeId },
    /// Two nodes claim the same token.
    #[error("token {token} is claimed by both {first:?} and {second:?}")]
    DuplicateToken {
        token: Token,
        first: NodeId,
        second: NodeId,
    },
}

#[derive(Debug, Clone)]
struct NodeInfo {
    id: NodeId,
    /// Index into `Ring::datacenters`.
    dc: usize,
    /// Index into `Ring::racks`: one per (datacenter, rack) pair, so equal rack names in two
    /// datacenters are different racks, as in Cassandra's `Pair<dc, rack>` locations.
    rack: usize,
}

#[derive(Debug, Clone)]
struct Datacenter {
    name: String,
    nodes: usize,
    racks: usize,
}

/// The token ring. Never empty.
#[derive(Debug, Clone)]
pub struct Ring {
    /// Sorted, distinct.
    tokens: Vec<Token>,
    /// `owners[i]` is the index into `nodes` of the owner of `tokens[i]`.
    owners: Vec<usize>,
    nodes: Vec<NodeInfo>,
    by_id: HashMap<NodeId, usize>,
    datacenters: Vec<Datacenter>,
    /// Rack names, by rack index.
    racks: Vec<String>,
}

impl Ring {
    /// Builds the ring. Nodes without tokens are left out (as Cassandra's topology holds only
    /// token owners); a token listed twice by the same node counts once.
    pub fn new(nodes: impl IntoIterator<Item = Node>) -> Result<Ring, RingError> {
        let mut infos: Vec<NodeInfo> = Vec::new();
        let mut by_id = HashMap::new();
        let mut datacenters: Vec<Datacenter> = Vec::new();
        let mut dc_index: HashMap<String, usize> = HashMap::new();
        let mut racks: Vec<String> = Vec::new();
        let mut rack_index: HashMap<(usize, String), usize> = HashMap::new();
        let mut pairs: Vec<(Token, usize)> = Vec::new();
        let mut seen_ids = HashSet::new();

        for node in nodes {
            if !seen_ids.insert(node.id) {
                return Err(RingError::DuplicateNode { id: node.id });
            }
            if node.tokens.is_empty() {
                continue;
            }
            let dc = *dc_index.entry(node.datacenter.clone()).or_insert_with(|| {
                datacenters.push(Datacenter {
                    name: node.datacenter.clone(),
                    nodes: 0,
                    racks: 0,
                });
                datacenters.len() - 1
            });
            let rack = *rack_index
                .entry((dc, node.rack.clone()))
                .or_insert_with(|| {
                    racks.push(node.rack.clone());
                    datacenters[dc].racks += 1;
                    racks.len() - 1
                });
            datacenters[dc].nodes += 1;
            let index = infos.len();
            by_id.insert(node.id, index);
            infos.push(NodeInfo {
                id: node.id,
                dc,
                rack,
            });
            pairs.extend(node.tokens.iter().map(|&t| (t, index)));
        }
        if pairs.is_empty() {
            return Err(RingError::Empty);
        }
        pairs.sort_unstable();
        pairs.dedup();
        for w in pairs.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(RingError::DuplicateToken {
                    token: w[0].0,
                    first: infos[w[0].1].id,
                    second: infos[w[1].1].id,
                });
            }
        }
        let (tokens, owners) = pairs.into_iter().unzip();
        Ok(Ring {
            tokens,
            owners,
            nodes: infos,
            by_id,
            datacenters,
            racks,
        })
    }

    /// The number of ring tokens (ranges).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Always false: [`Ring::new`] refuses an empty ring.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The ring tokens, sorted.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// The index of the ring token whose range holds `token`: the first ring token `>= token`,
    /// wrapping to 0 past the largest (`TokenMetadata.firstTokenIndex`).
    pub fn primary(&self, token: Token) -> usize {
        let i = self.tokens.partition_point(|t| *t < token);
        if i == self.tokens.len() {
            0
        } else {
            i
        }
    }

    /// The owner of the ring token at `index`.
    pub fn owner_at(&self, index: usize) -> Option<NodeId> {
        self.owners.get(index).map(|&n| self.nodes[n].id)
    }

    /// The ring indexes from `start` once around the ring (`TokenMetadata.ringIterator`).
    pub fn walk(&self, start: usize) -> impl Iterator<Item = usize> + '_ {
        let len = self.tokens.len();
        (0..len).map(move |k| (start + k) % len)
    }

    /// The nodes in the ring (those owning at least one token).
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().map(|n| n.id)
    }

    /// The number of nodes in the ring.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A node's datacenter.
    pub fn datacenter(&self, id: NodeId) -> Option<&str> {
        let n = self.by_id.get(&id)?;
        Some(&self.datacenters[self.nodes[*n].dc].name)
    }

    /// A node's rack.
    pub fn rack(&self, id: NodeId) -> Option<&str> {
        let n = self.by_id.get(&id)?;
        Some(&self.racks[self.nodes[*n].rack])
    }

    /// The number of nodes in a datacenter (0 for an unknown one).
    pub fn nodes_in(&self, datacenter: &str) -> usize {
        self.dc_index(datacenter)
            .map_or(0, |dc| self.datacenters[dc].nodes)
    }

    // Dense indexes for the placement code.

    /// Index into the node table of the owner of ring token `index`.
    pub(crate) fn owner_index(&self, index: usize) -> usize {
        self.owners[index]
    }

    pub(crate) fn node_id(&self, node: usize) -> NodeId {
        self.nodes[node].id
    }

    pub(crate) fn node_dc(&self, node: usize) -> usize {
        self.nodes[node].dc
    }

    pub(crate) fn node_rack(&self, node: usize) -> usize {
        self.nodes[node].rack
    }

    pub(crate) fn dc_index(&self, name: &str) -> Option<usize> {
        self.datacenters.iter().position(|d| d.name == name)
    }

    pub(crate) fn dc_count(&self) -> usize {
        self.datacenters.len()
    }

    pub(crate) fn dc_nodes(&self, dc: usize) -> usize {
        self.datacenters[dc].nodes
    }

    pub(crate) fn dc_racks(&self, dc: usize) -> usize {
        self.datacenters[dc].racks
    }

    pub(crate) fn rack_count(&self) -> usize {
        self.racks.len()
    }
}

/// A node for tests: `id` in `dc` / `rack` owning `tokens`.
#[cfg(test)]
pub(crate) fn node(id: u32, dc: &str, rack: &str, tokens: &[i64]) -> Node {
    Node {
        id: NodeId(id),
        datacenter: dc.into(),
        rack: rack.into(),
        tokens: tokens.iter().map(|&t| Token(t)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary_is_first_token_at_or_after_wrapping() {
        let ring = Ring::new([
            node(0, "dc1", "r1", &[0]),
            node(1, "dc1", "r1", &[10]),
            node(2, "dc1", "r1", &[20]),
        ])
        .unwrap();
        assert_eq!(ring.primary(Token(-100)), 0);
        assert_eq!(ring.primary(Token(0)), 0);
        assert_eq!(ring.primary(Token(1)), 1);
        assert_eq!(ring.primary(Token(10)), 1);
        assert_eq!(ring.primary(Token(19)), 2);
        assert_eq!(ring.primary(Token(20)), 2);
        assert_eq!(ring.primary(Token(21)), 0);
        assert_eq!(ring.primary(Token::MAX), 0);
        assert_eq!(ring.primary(Token::MIN), 0);
        assert_eq!(ring.owner_at(2), Some(NodeId(2)));
        assert_eq!(ring.owner_at(3), None);
        assert_eq!(ring.walk(2).collect::<Vec<_>>(), vec![2, 0, 1]);
    }

    #[test]
    fn tokens_are_sorted_across_nodes() {
        let ring = Ring::new([
            node(7, "dc1", "r1", &[50, -5]),
            node(3, "dc2", "r1", &[10, 70]),
        ])
        .unwrap();
        assert_eq!(ring.tokens(), &[Token(-5), Token(10), Token(50), Token(70)]);
        let owners: Vec<_> = (0..4).map(|i| ring.owner_at(i).unwrap().0).collect();
        assert_eq!(owners, vec![7, 3, 7, 3]);
        assert_eq!(ring.datacenter(NodeId(3)), Some("dc2"));
        assert_eq!(ring.rack(NodeId(7)), Some("r1"));
        assert_eq!(ring.nodes_in("dc1"), 1);
        assert_eq!(ring.nodes_in("nowhere"), 0);
        // Same rack name in two datacenters: two racks.
        assert_eq!(ring.rack_count(), 2);
    }

    #[test]
    fn refuses_bad_rings() {
        assert_eq!(Ring::new([]).unwrap_err(), RingError::Empty);
        assert_eq!(
            Ring::new([node(1, "dc", "r", &[])]).unwrap_err(),
            RingError::Empty
        );
        assert_eq!(
            Ring::new([node(1, "dc", "r", &[1]), node(1, "dc", "r", &[2])]).unwrap_err(),
            RingError::DuplicateNode { id: NodeId(1) }
        );
        assert_eq!(
            Ring::new([node(1, "dc", "r", &[5]), node(2, "dc", "r", &[5])]).unwrap_err(),
            RingError::DuplicateToken {
                token: Token(5),
                first: NodeId(1),
                second: NodeId(2)
            }
        );
    }

    #[test]
    fn tokenless_nodes_and_repeated_tokens() {
        let ring = Ring::new([node(1, "dc", "r", &[5, 5]), node(2, "dc", "r", &[])]).unwrap();
        assert_eq!(ring.len(), 1);
        assert_eq!(ring.node_count(), 1);
        assert_eq!(ring.datacenter(NodeId(2)), None);
    }
}
