//! Replicas precomputed for every ring range, so that routing a request is one binary search.
//!
//! All tokens of one ring range `(previous ring token, t]` have the same replicas, so a
//! strategy's placement is computed once per ring token when the ring or the schema changes, and
//! a lookup is [`Ring::primary`]'s binary search followed by a slice.
//!
//! # Memory
//!
//! For a ring of `T` tokens (nodes x vnodes) and `R` replicas per range the map holds the ring
//! tokens (8 bytes each), one `u32` offset per range plus one, and `R` node ids of 4 bytes per
//! range: `T * (12 + 4 * R) + 4` bytes. 12 nodes with 16 vnodes and RF 3: 192 ranges, 4.6 KiB;
//! 100 nodes with 256 vnodes and RF 3 (25,600 ranges): 600 KiB. `EverywhereStrategy` stores every
//! node for every range (`R` = node count), the one case that grows quadratically. Keyspaces with
//! equal strategies can share one map: key a cache by [`ReplicationStrategy`] (it is `Hash + Eq`).
//! [`ReplicaMap::memory_bytes`] reports the actual figure.

use crate::replication::{Placer, ReplicationStrategy};
use crate::ring::{NodeId, Ring};
use crate::token::Token;

/// The replicas of every ring range under one strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaMap {
    /// The ring tokens, sorted (a copy, so a lookup needs only the map).
    tokens: Vec<Token>,
    /// Range `i`'s replicas are `replicas[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<u32>,
    replicas: Vec<NodeId>,
}

impl ReplicaMap {
    /// Computes the replicas of every range of `ring` under `strategy`.
    pub fn new(ring: &Ring, strategy: &ReplicationStrategy) -> ReplicaMap {
        let mut placer = Placer::new(ring, strategy);
        let mut offsets = Vec::with_capacity(ring.len() + 1);
        let mut replicas = Vec::new();
        offsets.push(0);
        for start in 0..ring.len() {
            placer.place(start, &mut replicas);
            // A ring of 2^32 replica slots would need 16 GiB: saturating here is unreachable.
            offsets.push(u32::try_from(replicas.len()).unwrap_or(u32::MAX));
        }
        replicas.shrink_to_fit();
        ReplicaMap {
            tokens: ring.tokens().to_vec(),
            offsets,
            replicas,
        }
    }

    /// The replicas of `token`, primary first (empty for strategies without placement).
    pub fn replicas(&self, token: Token) -> &[NodeId] {
        let i = self.tokens.partition_point(|t| *t < token);
        let i = if i == self.tokens.len() { 0 } else { i };
        self.replicas_of_range(i)
    }

    /// The replicas of the range ending at ring token index `range` ([`Ring::primary`]); empty
    /// for an index past the ring.
    pub fn replicas_of_range(&self, range: usize) -> &[NodeId] {
        let (Some(&from), Some(&to)) = (self.offsets.get(range), self.offsets.get(range + 1))
        else {
            return &[];
        };
        self.replicas
            .get(from as usize..to as usize)
            .unwrap_or_default()
    }

    /// The number of ranges (ring tokens).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True for a map of no ranges (never built from a [`Ring`], which is never empty).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Heap bytes held by the map.
    pub fn memory_bytes(&self) -> usize {
        self.tokens.capacity() * std::mem::size_of::<Token>()
            + self.offsets.capacity() * std::mem::size_of::<u32>()
            + self.replicas.capacity() * std::mem::size_of::<NodeId>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::replicas;
    use crate::ring::Node;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn cluster(vnodes: u64, nodes: u32) -> Ring {
        // Evenly spread tokens, interleaved between nodes; two datacenters, three racks each.
        let step = u64::MAX / (vnodes * u64::from(nodes));
        Ring::new((0..nodes).map(|n| {
            Node {
                id: NodeId(n),
                datacenter: format!("dc{}", n % 2),
                rack: format!("r{}", n % 3),
                tokens: (0..vnodes)
                    .map(|v| {
                        let slot = v * u64::from(nodes) + u64::from(n);
                        Token(i64::MIN.wrapping_add((step * slot) as i64) + 1)
                    })
                    .collect(),
            }
        }))
        .unwrap()
    }

    #[test]
    fn matches_direct_placement_everywhere() {
        let ring = cluster(8, 12);
        let strategies = [
            ReplicationStrategy::Simple {
                replication_factor: 3,
            },
            ReplicationStrategy::NetworkTopology {
                datacenters: BTreeMap::from([("dc0".into(), 3), ("dc1".into(), 2)]),
            },
            ReplicationStrategy::Everywhere,
            ReplicationStrategy::Local,
        ];
        for s in &strategies {
            let map = ReplicaMap::new(&ring, s);
            assert_eq!(map.len(), ring.len());
            for (i, t) in ring.tokens().iter().enumerate() {
                for probe in [Token(t.0.saturating_sub(1)), *t] {
                    assert_eq!(map.replicas(probe), &replicas(&ring, s, probe)[..], "{s:?}");
                }
                assert_eq!(map.replicas_of_range(i), &replicas(&ring, s, *t)[..]);
            }
            assert_eq!(
                map.replicas(Token::MAX),
                &replicas(&ring, s, Token::MAX)[..]
            );
        }
        assert!(ReplicaMap::new(&ring, &ReplicationStrategy::Local)
            .replicas(Token(0))
            .is_empty());
    }

    #[test]
    fn memory_matches_the_documented_formula() {
        let ring = cluster(16, 12);
        let rf3 = ReplicationStrategy::Simple {
            replication_factor: 3,
        };
        let map = ReplicaMap::new(&ring, &rf3);
        let t = ring.len();
        assert_eq!(map.memory_bytes(), t * (12 + 4 * 3) + 4);
        assert_eq!(map.replicas_of_range(t), &[] as &[NodeId]);
    }

    proptest! {
        #[test]
        fn lookup_equals_direct_placement(probe in any::<i64>(), rf in 0..5usize) {
            let ring = cluster(4, 7);
            let s = ReplicationStrategy::NetworkTopology {
                datacenters: BTreeMap::from([("dc0".into(), rf), ("dc1".into(), 2)]),
            };
            let map = ReplicaMap::new(&ring, &s);
            prop_assert_eq!(map.replicas(Token(probe)), &replicas(&ring, &s, Token(probe))[..]);
        }
    }
}
