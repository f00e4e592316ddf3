//! Replication strategies, parsed from `system_schema.keyspaces.replication`, and the replicas
//! they place a token on.
//!
//! Placement follows Apache Cassandra 5.0 (`src/java/org/apache/cassandra/locator/`):
//! - `SimpleStrategy.calculateNaturalReplicas`: walk the ring from the token's primary range
//!   (`TokenMetadata.ringIterator`) and take the owners of the ring tokens, skipping a node
//!   already taken, until `replication_factor` nodes (or the ring is exhausted).
//! - `NetworkTopologyStrategy.calculateNaturalReplicas` (with its `DatacenterEndpoints`): one walk
//!   of the ring for all datacenters. Each datacenter with a factor > 0 and at least one node
//!   wants `min(rf, nodes in dc)` replicas and may repeat a rack `rf - racks in dc` times. A node
//!   of that datacenter that is not taken yet is taken when its rack is new, or else when a rack
//!   repeat is still allowed (and then uses one up); otherwise it is skipped for good. So
//!   distinct racks come first only while the repeat budget is spent: a node of a seen rack is
//!   accepted *as it is met*. (Cassandra before 3.0 instead kept skipped nodes aside and
//!   appended them after every rack was seen; the set is the same, the order is not. This
//!   crate follows 5.0.) Replicas are listed in the order they were taken, so the first is the
//!   primary replica.
//! - `ReplicationFactor.fromString`: a factor is `"n"` or the transient form `"n/t"`, where `n`
//!   counts all replicas (full and transient); placement uses `n`.
//! - `AbstractReplicationStrategy.getClass`: a class name without a package is looked up in
//!   `org.apache.cassandra.locator`.
//!
//! `LocalStrategy` (system keyspaces: every node keeps its own data, nothing is replicated) and
//! unknown classes have no replicas: route those requests by load balancing alone.
//! `EverywhereStrategy` (DSE, ScyllaDB) replicates to every node; the list starts at the
//! primary and follows the ring.

use crate::ring::{NodeId, Ring};
use crate::token::Token;
use std::collections::BTreeMap;
use thiserror::Error;

/// The package a bare strategy class name is looked up in.
const LOCATOR_PACKAGE: &str = "org.apache.cassandra.locator.";

/// A keyspace's replication strategy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReplicationStrategy {
    /// `SimpleStrategy`: the next `replication_factor` distinct nodes on the ring.
    Simple { replication_factor: usize },
    /// `NetworkTopologyStrategy`: a factor per datacenter, rack-aware.
    NetworkTopology {
        datacenters: BTreeMap<String, usize>,
    },
    /// `LocalStrategy`: not replicated; no replicas.
    Local,
    /// `EverywhereStrategy`: every node.
    Everywhere,
    /// Any other class (e.g. `OldNetworkTopologyStrategy`, a custom class): no replicas.
    Unknown { class: String },
}

/// A replication map that does not describe a strategy.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReplicationError {
    /// The map has no `class` entry.
    #[error("replication options have no 'class'")]
    MissingClass,
    /// `SimpleStrategy` without `replication_factor`.
    #[error("{class} needs a 'replication_factor' option")]
    MissingReplicationFactor { class: &'static str },
    /// A factor that is neither `n` nor `n/t`.
    #[error("replication factor {value:?} of option {option:?} is not a count")]
    InvalidFactor { option: String, value: String },
    /// An option the strategy does not accept (`replication_factor` on NetworkTopologyStrategy,
    /// which the server expands into datacenters before storing the map).
    #[error("{class} does not take option {option:?}")]
    UnexpectedOption { class: &'static str, option: String },
}

impl ReplicationStrategy {
    /// Parses a `system_schema.keyspaces.replication` map (any iterable of string pairs).
    pub fn from_options<I, K, V>(options: I) -> Result<Self, ReplicationError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut class = None;
        let mut rest: Vec<(String, String)> = Vec::new();
        for (k, v) in options {
            let (k, v) = (k.as_ref(), v.as_ref());
            if k == "class" {
                class = Some(v.to_owned());
            } else {
                rest.push((k.to_owned(), v.to_owned()));
            }
        }
        let class = class.ok_or(ReplicationError::MissingClass)?;
        let short = match class.strip_prefix(LOCATOR_PACKAGE) {
            Some(s) => s,
            None if !class.contains('.') => class.as_str(),
            None => "",
        };
        match short {
            "SimpleStrategy" => {
                let (option, value) = rest.iter().find(|(k, _)| k == "replication_factor").ok_or(
                    ReplicationError::MissingReplicationFactor {
                        class: "SimpleStrategy",
                    },
                )?;
                let replication_factor =
                    parse_factor(value).ok_or_else(|| ReplicationError::InvalidFactor {
                        option: option.clone(),
                        value: value.clone(),
                    })?;
                Ok(ReplicationStrategy::Simple { replication_factor })
            }
            "NetworkTopologyStrategy" => {
                let mut datacenters = BTreeMap::new();
                for (option, value) in rest {
                    if option.eq_ignore_ascii_case("replication_factor") {
                        return Err(ReplicationError::UnexpectedOption {
                            class: "NetworkTopologyStrategy",
                            option,
                        });
                    }
                    let Some(rf) = parse_factor(&value) else {
                        return Err(ReplicationError::InvalidFactor { option, value });
                    };
                    datacenters.insert(option, rf);
                }
                Ok(ReplicationStrategy::NetworkTopology { datacenters })
            }
            "LocalStrategy" => Ok(ReplicationStrategy::Local),
            "EverywhereStrategy" => Ok(ReplicationStrategy::Everywhere),
            _ => Ok(ReplicationStrategy::Unknown { class }),
        }
    }
}

/// A replication factor as stored: `"3"`, or `"3/1"` (three replicas of which one transient);
/// the count before `/` is the number of replicas placed.
pub fn parse_factor(value: &str) -> Option<usize> {
    let all = match value.split_once('/') {
        Some((all, transient)) => {
            transient.trim().parse::<usize>().ok()?;
            all
        }
        None => value,
    };
    all.trim().parse().ok()
}

/// The replicas of `token` under `strategy`, primary first. Empty for `LocalStrategy` and
/// unknown strategies. For repeated lookups build a [`crate::ReplicaMap`] instead.
pub fn replicas(ring: &Ring, strategy: &ReplicationStrategy, token: Token) -> Vec<NodeId> {
    let mut out = Vec::new();
    Placer::new(ring, strategy).place(ring.primary(token), &mut out);
    out
}

/// Per-datacenter progress of a NetworkTopologyStrategy walk (`DatacenterEndpoints`).
#[derive(Debug, Clone, Copy)]
struct DcFill {
    /// Replicas still wanted: starts at `min(rf, nodes in dc)`.
    left: usize,
    /// Rack repeats still allowed: starts at `rf - racks in dc`, may be negative.
    repeats: i64,
}

enum Plan {
    /// Walk the ring taking distinct nodes until `target` are taken.
    Distinct { target: usize },
    /// NetworkTopologyStrategy: the initial fill state per ring datacenter, and how many
    /// datacenters want replicas.
    Topology {
        initial: Vec<Option<DcFill>>,
        to_fill: usize,
    },
    /// No replicas.
    None,
}

/// Places replicas for one strategy on one ring, reusing its scratch space across calls (a
/// [`crate::ReplicaMap`] calls it once per ring token).
pub(crate) struct Placer<'r> {
    ring: &'r Ring,
    plan: Plan,
    /// Scratch, all false between calls: node (dense index) already taken.
    taken: Vec<bool>,
    /// Scratch, all false between calls: rack (dense index) already holding a replica.
    rack_seen: Vec<bool>,
    /// Scratch: the fill state of the walk in progress.
    fill: Vec<Option<DcFill>>,
    /// Scratch: what to reset in `taken` / `rack_seen` after a walk.
    touched_nodes: Vec<usize>,
    touched_racks: Vec<usize>,
}

impl<'r> Placer<'r> {
    pub(crate) fn new(ring: &'r Ring, strategy: &ReplicationStrategy) -> Self {
        let plan = match strategy {
            ReplicationStrategy::Simple { replication_factor } => Plan::Distinct {
                target: (*replication_factor).min(ring.node_count()),
            },
            ReplicationStrategy::Everywhere => Plan::Distinct {
                target: ring.node_count(),
            },
            ReplicationStrategy::NetworkTopology { datacenters } => {
                let mut initial = vec![None; ring.dc_count()];
                let mut to_fill = 0;
                for (name, &rf) in datacenters {
                    let Some(dc) = ring.dc_index(name) else {
                        continue;
                    };
                    let nodes = ring.dc_nodes(dc);
                    if rf == 0 || nodes == 0 {
                        continue;
                    }
                    let rf_i = i64::try_from(rf).unwrap_or(i64::MAX);
                    let racks = i64::try_from(ring.dc_racks(dc)).unwrap_or(i64::MAX);
                    initial[dc] = Some(DcFill {
                        left: rf.min(nodes),
                        repeats: rf_i.saturating_sub(racks),
                    });
                    to_fill += 1;
                }
                Plan::Topology { initial, to_fill }
            }
            ReplicationStrategy::Local | ReplicationStrategy::Unknown { .. } => Plan::None,
        };
        Placer {
            ring,
            plan,
            taken: vec![false; ring.node_count()],
            rack_seen: vec![false; ring.rack_count()],
            fill: Vec::new(),
            touched_nodes: Vec::new(),
            touched_racks: Vec::new(),
        }
    }

    /// Appends to `out` the replicas of the range whose ring token index is `start`.
    pub(crate) fn place(&mut self, start: usize, out: &mut Vec<NodeId>) {
        let ring = self.ring;
        match &self.plan {
            Plan::None => {}
            Plan::Distinct { target } => {
                let target = *target;
                let mut count = 0;
                for idx in ring.walk(start) {
                    if count == target {
                        break;
                    }
                    let node = ring.owner_index(idx);
                    if !self.taken[node] {
                        self.taken[node] = true;
                        self.touched_nodes.push(node);
                        out.push(ring.node_id(node));
                        count += 1;
                    }
                }
            }
            Plan::Topology { initial, to_fill } => {
                self.fill.clone_from(initial);
                let mut to_fill = *to_fill;
                for idx in ring.walk(start) {
                    if to_fill == 0 {
                        break;
                    }
                    let node = ring.owner_index(idx);
                    let Some(fill) = self.fill[ring.node_dc(node)].as_mut() else {
                        continue;
                    };
                    if fill.left == 0 || self.taken[node] {
                        continue;
                    }
                    let rack = ring.node_rack(node);
                    if !self.rack_seen[rack] {
                        self.rack_seen[rack] = true;
                        self.touched_racks.push(rack);
                    } else if fill.repeats > 0 {
                        fill.repeats -= 1;
                    } else {
                        continue;
                    }
                    fill.left -= 1;
                    if fill.left == 0 {
                        to_fill -= 1;
                    }
                    self.taken[node] = true;
                    self.touched_nodes.push(node);
                    out.push(ring.node_id(node));
                }
            }
        }
        for n in self.touched_nodes.drain(..) {
            self.taken[n] = false;
        }
        for r in self.touched_racks.drain(..) {
            self.rack_seen[r] = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{node, Node};
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashMap};

    fn ids(v: Vec<NodeId>) -> Vec<u32> {
        v.into_iter().map(|n| n.0).collect()
    }

    fn nts(dcs: &[(&str, usize)]) -> ReplicationStrategy {
        ReplicationStrategy::NetworkTopology {
            datacenters: dcs.iter().map(|(d, n)| (d.to_string(), *n)).collect(),
        }
    }

    #[test]
    fn parses_replication_maps() {
        let simple = [
            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
            ("replication_factor", "3"),
        ];
        assert_eq!(
            ReplicationStrategy::from_options(simple).unwrap(),
            ReplicationStrategy::Simple {
                replication_factor: 3
            }
        );
        let short = BTreeMap::from([
            ("class".to_string(), "SimpleStrategy".to_string()),
            ("replication_factor".to_string(), "2/1".to_string()),
        ]);
        assert_eq!(
            ReplicationStrategy::from_options(&short).unwrap(),
            ReplicationStrategy::Simple {
                replication_factor: 2
            }
        );
        let n = HashMap::from([
            (
                "class",
                "org.apache.cassandra.locator.NetworkTopologyStrategy",
            ),
            ("dc1", "3"),
            ("dc2", "5/2"),
        ]);
        assert_eq!(
            ReplicationStrategy::from_options(n).unwrap(),
            nts(&[("dc1", 3), ("dc2", 5)])
        );
        assert_eq!(
            ReplicationStrategy::from_options([(
                "class",
                "org.apache.cassandra.locator.LocalStrategy"
            )])
            .unwrap(),
            ReplicationStrategy::Local
        );
        assert_eq!(
            ReplicationStrategy::from_options([("class", "EverywhereStrategy")]).unwrap(),
            ReplicationStrategy::Everywhere
        );
        for class in [
            "org.apache.cassandra.locator.OldNetworkTopologyStrategy",
            "com.example.SimpleStrategy",
        ] {
            assert_eq!(
                ReplicationStrategy::from_options([("class", class)]).unwrap(),
                ReplicationStrategy::Unknown {
                    class: class.into()
                }
            );
        }
    }

    #[test]
    fn refuses_bad_maps() {
        assert_eq!(
            ReplicationStrategy::from_options([("replication_factor", "3")]),
            Err(ReplicationError::MissingClass)
        );
        assert_eq!(
            ReplicationStrategy::from_options([("class", "SimpleStrategy")]),
            Err(ReplicationError::MissingReplicationFactor {
                class: "SimpleStrategy"
            })
        );
        assert_eq!(
            ReplicationStrategy::from_options([
                ("class", "SimpleStrategy"),
                ("replication_factor", "three")
            ]),
            Err(ReplicationError::InvalidFactor {
                option: "replication_factor".into(),
                value: "three".into()
            })
        );
        assert_eq!(
            ReplicationStrategy::from_options([
                ("class", "NetworkTopologyStrategy"),
                ("dc1", "-1")
            ]),
            Err(ReplicationError::InvalidFactor {
                option: "dc1".into(),
                value: "-1".into()
            })
        );
        assert_eq!(
            ReplicationStrategy::from_options([
                ("class", "NetworkTopologyStrategy"),
                ("replication_factor", "3")
            ]),
            Err(ReplicationError::UnexpectedOption {
                class: "NetworkTopologyStrategy",
                option: "replication_factor".into()
            })
        );
    }

    #[test]
    fn factors() {
        assert_eq!(parse_factor("3"), Some(3));
        assert_eq!(parse_factor("3/1"), Some(3));
        assert_eq!(parse_factor("0"), Some(0));
        assert_eq!(parse_factor("3/x"), None);
        assert_eq!(parse_factor("/1"), None);
        assert_eq!(parse_factor(""), None);
    }

    /// datastax/csharp-driver, src/Cassandra.Tests/TokenTests.cs,
    /// `TokenMapSimpleStrategyWithKeyspaceTest`: nodes .0/.1/.2 own tokens 0/10/20.
    #[test]
    fn simple_strategy_csharp_driver_vectors() {
        let ring = Ring::new([
            node(0, "dc1", "rack1", &[0]),
            node(1, "dc1", "rack1", &[10]),
            node(2, "dc1", "rack1", &[20]),
        ])
        .unwrap();
        let rf2 = ReplicationStrategy::Simple {
            replication_factor: 2,
        };
        let rf10 = ReplicationStrategy::Simple {
            replication_factor: 10,
        };
        assert_eq!(ids(replicas(&ring, &rf2, Token(0))), vec![0, 1]);
        assert_eq!(ids(replicas(&ring, &rf2, Token(-100))), vec![0, 1]);
        assert_eq!(ids(replicas(&ring, &rf2, Token(500000))), vec![0, 1]);
        assert_eq!(ids(replicas(&ring, &rf2, Token(20))), vec![2, 0]);
        assert_eq!(ids(replicas(&ring, &rf2, Token(19))), vec![2, 0]);
        assert_eq!(ids(replicas(&ring, &rf10, Token(5))), vec![1, 2, 0]);
    }

    /// datastax/csharp-driver, src/Cassandra.Tests/TokenTests.cs,
    /// `TokenMapNetworkTopologyStrategyWithKeyspaceTest` (one rack everywhere): dc1 nodes
    /// .0/.1/.2 own 0/100/200, dc2 nodes .100/.101/.102 own 1/101/201. Node ids are the last
    /// address byte.
    #[test]
    fn network_topology_csharp_driver_vectors() {
        let ring = Ring::new([
            node(0, "dc1", "rack1", &[0]),
            node(1, "dc1", "rack1", &[100]),
            node(2, "dc1", "rack1", &[200]),
            node(100, "dc2", "rack1", &[1]),
            node(101, "dc2", "rack1", &[101]),
            node(102, "dc2", "rack1", &[201]),
        ])
        .unwrap();
        let ks1 = nts(&[("dc1", 2), ("dc2", 2)]);
        assert_eq!(ids(replicas(&ring, &ks1, Token(0))), vec![0, 100, 1, 101]);
        assert_eq!(ids(replicas(&ring, &ks1, Token(200))), vec![2, 102, 0, 100]);
        assert_eq!(ids(replicas(&ring, &ks1, Token(190))), vec![2, 102, 0, 100]);
        let ks2 = ReplicationStrategy::Simple {
            replication_factor: 3,
        };
        assert_eq!(ids(replicas(&ring, &ks2, Token(5000))), vec![0, 100, 1]);
        let ks3 = nts(&[("dc1", 3), ("dc2", 1), ("dc3", 5)]);
        assert_eq!(ids(replicas(&ring, &ks3, Token(0))), vec![0, 100, 1, 2]);
        assert_eq!(ids(replicas(&ring, &ks3, Token(201))), vec![102, 0, 1, 2]);
        let ks4 = nts(&[("dc1", 5)]);
        assert_eq!(ids(replicas(&ring, &ks4, Token(0))), vec![0, 1, 2]);
    }

    /// Racks, worked by hand from Cassandra 5.0's `DatacenterEndpoints.addEndpointAndCheckIfDone`.
    #[test]
    fn network_topology_racks() {
        // Ring order: a1(rA) a2(rA) b1(rB) a3(rA) c1(rC) b2(rB).
        let ring = Ring::new([
            node(1, "dc", "rA", &[10]),
            node(2, "dc", "rA", &[20]),
            node(3, "dc", "rB", &[30]),
            node(4, "dc", "rA", &[40]),
            node(5, "dc", "rC", &[50]),
            node(6, "dc", "rB", &[60]),
        ])
        .unwrap();
        // RF 3 over 3 racks: no repeats allowed, one per rack.
        assert_eq!(
            ids(replicas(&ring, &nts(&[("dc", 3)]), Token(10))),
            vec![1, 3, 5]
        );
        // RF 2: the first two racks met.
        assert_eq!(
            ids(replicas(&ring, &nts(&[("dc", 2)]), Token(15))),
            vec![2, 3]
        );
        // RF 4 over 3 racks: one repeat, spent on the first seen-rack node met (a2), before
        // rack C is reached; later repeats (a3) are skipped.
        assert_eq!(
            ids(replicas(&ring, &nts(&[("dc", 4)]), Token(10))),
            vec![1, 2, 3, 5]
        );
        // RF 5: two repeats (a2, a3).
        assert_eq!(
            ids(replicas(&ring, &nts(&[("dc", 5)]), Token(10))),
            vec![1, 2, 3, 4, 5]
        );
        // RF 9 over 6 nodes: everyone, in ring order from the primary.
        assert_eq!(
            ids(replicas(&ring, &nts(&[("dc", 9)]), Token(45))),
            vec![5, 6, 1, 2, 3, 4]
        );
    }

    #[test]
    fn vnodes_do_not_repeat_a_node() {
        // Node 1 owns consecutive tokens: it is taken once.
        let ring = Ring::new([
            node(1, "dc", "r1", &[10, 20, 30]),
            node(2, "dc", "r2", &[40]),
            node(3, "dc", "r1", &[50]),
        ])
        .unwrap();
        let simple = ReplicationStrategy::Simple {
            replication_factor: 2,
        };
        assert_eq!(ids(replicas(&ring, &simple, Token(0))), vec![1, 2]);
        assert_eq!(
            ids(replicas(&ring, &nts(&[("dc", 3)]), Token(0))),
            vec![1, 2, 3]
        );
        assert_eq!(
            ids(replicas(&ring, &nts(&[("dc", 2)]), Token(0))),
            vec![1, 2]
        );
    }

    #[test]
    fn local_unknown_and_everywhere() {
        let ring = Ring::new([
            node(1, "dc", "r", &[10]),
            node(2, "dc2", "r", &[20]),
            node(3, "dc", "r", &[30]),
        ])
        .unwrap();
        assert!(replicas(&ring, &ReplicationStrategy::Local, Token(0)).is_empty());
        let unknown = ReplicationStrategy::Unknown {
            class: "x.Y".into(),
        };
        assert!(replicas(&ring, &unknown, Token(0)).is_empty());
        assert_eq!(
            ids(replicas(&ring, &ReplicationStrategy::Everywhere, Token(15))),
            vec![2, 3, 1]
        );
        let zero = ReplicationStrategy::Simple {
            replication_factor: 0,
        };
        assert!(replicas(&ring, &zero, Token(0)).is_empty());
        assert!(replicas(&ring, &nts(&[("dc", 0), ("nowhere", 3)]), Token(0)).is_empty());
    }

    /// A random cluster: up to 3 datacenters with up to 4 racks, each node with a few tokens.
    fn arb_cluster() -> impl Strategy<Value = (Vec<Node>, BTreeMap<String, usize>)> {
        let nodes = proptest::collection::vec(
            (
                0..3usize,
                0..4usize,
                proptest::collection::vec(any::<i64>(), 1..5),
            ),
            1..14,
        );
        let rfs = proptest::collection::vec(0..6usize, 4);
        (nodes, rfs).prop_map(|(nodes, rfs)| {
            let nodes = nodes
                .into_iter()
                .enumerate()
                .map(|(i, (dc, rack, tokens))| Node {
                    id: NodeId(i as u32),
                    datacenter: format!("dc{dc}"),
                    rack: format!("r{rack}"),
                    tokens: tokens.into_iter().map(Token).collect(),
                })
                .collect();
            // dc3 never has nodes: a factor for an empty datacenter is ignored.
            let dcs = rfs
                .into_iter()
                .enumerate()
                .map(|(i, rf)| (format!("dc{i}"), rf))
                .collect();
            (nodes, dcs)
        })
    }

    proptest! {
        #[test]
        fn network_topology_invariants((nodes, dcs) in arb_cluster(), probe in any::<i64>()) {
            // Random tokens may collide across nodes; such a ring is refused.
            let Ok(ring) = Ring::new(nodes.clone()) else { return Ok(()) };
            let strategy = ReplicationStrategy::NetworkTopology { datacenters: dcs.clone() };
            let got = replicas(&ring, &strategy, Token(probe));
            let distinct: BTreeSet<_> = got.iter().collect();
            prop_assert_eq!(distinct.len(), got.len(), "a node twice: {:?}", got);
            for (dc, &rf) in &dcs {
                let in_dc: Vec<_> = got.iter().filter(|n| ring.datacenter(**n) == Some(dc)).collect();
                prop_assert_eq!(in_dc.len(), rf.min(ring.nodes_in(dc)), "dc {}", dc);
                let racks_in_dc: BTreeSet<_> = ring
                    .nodes()
                    .filter(|n| ring.datacenter(*n) == Some(dc))
                    .map(|n| ring.rack(n))
                    .collect();
                let racks_used: BTreeSet<_> = in_dc.iter().map(|n| ring.rack(**n)).collect();
                prop_assert_eq!(racks_used.len(), rf.min(racks_in_dc.len()), "dc {}", dc);
            }
            let total: usize = dcs.iter().map(|(dc, rf)| (*rf).min(ring.nodes_in(dc))).sum();
            prop_assert_eq!(got.len(), total);
        }

        #[test]
        fn simple_invariants((nodes, _) in arb_cluster(), rf in 0..8usize, probe in any::<i64>()) {
            let Ok(ring) = Ring::new(nodes) else { return Ok(()) };
            let strategy = ReplicationStrategy::Simple { replication_factor: rf };
            let got = replicas(&ring, &strategy, Token(probe));
            let distinct: BTreeSet<_> = got.iter().collect();
            prop_assert_eq!(distinct.len(), got.len());
            prop_assert_eq!(got.len(), rf.min(ring.node_count()));
            if rf > 0 {
                prop_assert_eq!(Some(got[0]), ring.owner_at(ring.primary(Token(probe))));
            }
        }
    }
}
