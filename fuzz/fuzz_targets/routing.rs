//! Routing: the partition key taken out of a request's bound values, its routing key and
//! token, the ring and replica placement built from what the cluster reports, and ScyllaDB
//! shards. Checked:
//! - the proxy's extraction of the key values (`rewrite::partition_token`) agrees with
//!   reading the values independently here and asking `autoprep_routing::partition_token`;
//! - a routing key hashes to that token, and a composite one splits back into its components;
//! - a ring that builds places the same replicas whether asked directly or through a
//!   `ReplicaMap`, never twice the same node, never more than the ring's nodes;
//! - a token's shard is below the shard count; a source port chosen for a shard lands on it.
#![no_main]

use arbitrary::Arbitrary;
use autoprep_routing::{
    partition_token, replicas, routing_key, shard_of, shard_of_port, source_ports, split_composite,
    token, Node, NodeId, ReplicaMap, ReplicationStrategy, Ring, Token,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    pk: Vec<u16>,
    /// Bound values as an EXECUTE carries them (`[value]` each), possibly malformed.
    values: &'a [u8],
    nodes: Vec<NodeSpec>,
    options: Vec<(Opt<'a>, &'a str)>,
    tokens: Vec<i64>,
    nr_shards: u16,
    ignore_msb: u8,
    port_start: u16,
    port_range: (u16, u16),
}

#[derive(Debug, Arbitrary)]
struct NodeSpec {
    id: u8,
    dc: u8,
    rack: u8,
    tokens: Vec<i64>,
}

#[derive(Debug, Arbitrary)]
enum Opt<'a> {
    Class,
    Factor,
    Dc(u8),
    Other(&'a str),
}

const CLASSES: [&str; 6] = [
    "SimpleStrategy",
    "org.apache.cassandra.locator.NetworkTopologyStrategy",
    "NetworkTopologyStrategy",
    "LocalStrategy",
    "EverywhereStrategy",
    "org.example.Custom",
];

fuzz_target!(|input: Input<'_>| {
    key(&input);
    ring(&input);
    shards(&input);
});

/// The `i`th `[value]` of `values`: `Some(None)` for null or unset, `None` when there are
/// fewer or they are malformed (read here independently of the proxy).
fn nth(values: &[u8], i: u16) -> Option<Option<&[u8]>> {
    let mut rest = values;
    let mut cell = None;
    for _ in 0..=i {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = i32::from_be_bytes(*len);
        if len < 0 {
            rest = tail;
            cell = Some(None);
        } else {
            let n = len as usize;
            cell = Some(Some(tail.get(..n)?));
            rest = &tail[n..];
        }
    }
    cell
}

fn key(input: &Input<'_>) {
    let pk: Vec<u16> = input.pk.iter().take(8).copied().collect();
    let proxy = autoprep::rewrite::partition_token(&pk, input.values);
    let components: Option<Vec<Option<&[u8]>>> = pk.iter().map(|&i| nth(input.values, i)).collect();
    let expected = match &components {
        _ if pk.is_empty() => None,
        Some(c) => partition_token(c).ok().flatten(),
        None => None,
    };
    assert_eq!(proxy, expected, "the partition token of {pk:?}");

    let Some(components) = components else { return };
    match routing_key(&components) {
        Ok(Some(k)) => {
            assert_eq!(Some(token(&k)), partition_token(&components).ok().flatten());
            if components.len() > 1 {
                let parts = split_composite(&k).expect("a composite key splits");
                let want: Vec<&[u8]> = components.iter().map(|c| c.unwrap()).collect();
                assert_eq!(parts, want, "composite key components");
            }
        }
        Ok(None) => assert!(components.iter().any(Option::is_none)),
        Err(_) => assert!(partition_token(&components).is_err()),
    }
    // Splitting arbitrary bytes never panics.
    let _ = split_composite(input.values);
}

fn ring(input: &Input<'_>) {
    let nodes: Vec<Node> = input
        .nodes
        .iter()
        .take(16)
        .map(|n| Node {
            id: NodeId(u32::from(n.id % 24)),
            datacenter: format!("dc{}", n.dc % 3),
            rack: format!("r{}", n.rack % 3),
            tokens: n.tokens.iter().take(16).map(|&t| Token(t)).collect(),
        })
        .collect();
    let Ok(ring) = Ring::new(nodes) else { return };
    let options: Vec<(String, String)> = input
        .options
        .iter()
        .map(|(k, v)| {
            let k = match k {
                Opt::Class => "class".to_owned(),
                Opt::Factor => "replication_factor".to_owned(),
                Opt::Dc(d) => format!("dc{}", d % 4),
                Opt::Other(s) => (*s).to_owned(),
            };
            let v = match (k.as_str(), v.len()) {
                ("class", 1) => CLASSES[usize::from(v.as_bytes()[0]) % CLASSES.len()].to_owned(),
                _ => (*v).to_owned(),
            };
            (k, v)
        })
        .collect();
    let Ok(strategy) = ReplicationStrategy::from_options(options) else {
        return;
    };
    // Factors beyond the ring's size are capped by placement; keep the work bounded.
    let huge = match &strategy {
        ReplicationStrategy::Simple { replication_factor } => *replication_factor > 64,
        ReplicationStrategy::NetworkTopology { datacenters } => {
            datacenters.values().any(|&f| f > 64)
        }
        _ => false,
    };
    if huge {
        return;
    }
    let map = ReplicaMap::new(&ring, &strategy);
    let mut probes: Vec<Token> = input.tokens.iter().take(8).map(|&t| Token(t)).collect();
    probes.extend(ring.tokens().iter().take(4));
    probes.extend([Token(i64::MIN), Token(i64::MAX), Token(0)]);
    for t in probes {
        let direct = replicas(&ring, &strategy, t);
        assert_eq!(direct, map.replicas(t), "replicas of {t:?}");
        let mut seen = direct.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), direct.len(), "a node placed twice");
        assert!(direct.len() <= ring.node_count());
        let primary = ring.primary(t);
        assert!(primary < ring.tokens().len());
    }
}

fn shards(input: &Input<'_>) {
    for &t in input.tokens.iter().take(8) {
        let s = shard_of(Token(t), input.nr_shards, input.ignore_msb);
        assert!(s < input.nr_shards.max(1));
    }
    let n = input.nr_shards;
    let (lo, hi) = input.port_range;
    for shard in [0, 1, n.saturating_sub(1), n] {
        let mut count = 0;
        for p in source_ports(shard, n, input.port_start, lo..hi).take(64) {
            assert!((lo..hi).contains(&p), "port {p} outside {lo}..{hi}");
            assert_eq!(
                shard_of_port(p, n),
                Some(shard),
                "port {p} of shard {shard}/{n}"
            );
            count += 1;
        }
        if count == 0 && shard < n && hi > lo && (hi - lo) >= n {
            panic!("no port of shard {shard}/{n} in {lo}..{hi}");
        }
    }
}
