//! The benchmark's own token-aware client: which node a statement goes to, computed as a
//! token-aware driver computes it, with the `autoprep-routing` crate.
//!
//! [`TokenAware::read`] reads the ring the way drivers do, on one connection to the contact
//! node: `system.local` (its datacenter, rack, tokens and partitioner), `system.peers_v2` (or
//! `system.peers` on servers without it: every other node's native address, datacenter, rack and
//! tokens) and the keyspace's row of `system_schema.keyspaces` (its replication map). A request
//! then goes to a replica of its partition's Murmur3 token: the replicas in the contact node's
//! datacenter first, one of them in turn (as the DataStax drivers' token-aware policy over a
//! datacenter-aware one does); the first replica of another datacenter when the local one has
//! none; the contact node for a keyspace with no placement (`LocalStrategy`).
//!
//! It is independent of the proxy's own cluster view (`crates/proxy/src/cluster.rs`): the two
//! share only the placement arithmetic of `autoprep-routing`, which is checked against the
//! server's `token()` in that crate's tests.

use crate::load::Conn;
use anyhow::{bail, Context, Result};
use autoprep_routing::{token, Node, NodeId, ReplicaMap, ReplicationStrategy, Ring, Token};
use std::net::{IpAddr, SocketAddr};

/// The only partitioner whose tokens the routing crate computes.
const MURMUR3: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

/// A node as the client reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientNode {
    /// Its native transport address.
    pub addr: SocketAddr,
    pub datacenter: String,
}

/// The ring and one keyspace's replicas per range, from the client's side.
#[derive(Debug, Clone)]
pub struct TokenAware {
    /// By [`NodeId`]: node `i` is `NodeId(i)`; the contact node is 0.
    nodes: Vec<ClientNode>,
    map: ReplicaMap,
    /// Per node: whether it is in the contact node's datacenter.
    local: Vec<bool>,
}

impl TokenAware {
    /// Reads the ring and `keyspace`'s replication on `conn`, a connection to `contact`.
    pub async fn read(conn: &mut Conn, contact: SocketAddr, keyspace: &str) -> Result<TokenAware> {
        let local = conn
            .rows("SELECT data_center, rack, tokens, partitioner FROM system.local")
            .await?;
        let [dc, rack, tokens, partitioner] = one_row(local, "system.local")?;
        let partitioner = text(partitioner.as_deref()).context("system.local partitioner")?;
        if partitioner != MURMUR3 {
            bail!("the cluster's partitioner is {partitioner}: only {MURMUR3} is computed here");
        }
        let mut nodes = vec![(
            ClientNode {
                addr: contact,
                datacenter: text(dc.as_deref()).context("system.local data_center")?,
            },
            text(rack.as_deref()).context("system.local rack")?,
            token_set(tokens.as_deref()).context("system.local tokens")?,
        )];
        let peers = match conn
            .rows("SELECT native_address, native_port, data_center, rack, tokens FROM system.peers_v2")
            .await
        {
            Ok(rows) => rows,
            // Before Cassandra 4.0: system.peers, the native port the contact's.
            Err(_) => conn
                .rows("SELECT rpc_address, data_center, rack, tokens FROM system.peers")
                .await?
                .into_iter()
                .map(|mut r| {
                    r.insert(1, Some(i32::from(contact.port()).to_be_bytes().to_vec()));
                    r
                })
                .collect(),
        };
        for row in peers {
            let [addr, port, dc, rack, tokens] = fixed(row, "system.peers_v2")?;
            let ip = inet(addr.as_deref()).context("peer native address")?;
            let port = int(port.as_deref())
                .and_then(|p| u16::try_from(p).ok())
                .context("peer native port")?;
            nodes.push((
                ClientNode {
                    addr: SocketAddr::new(ip, port),
                    datacenter: text(dc.as_deref()).context("peer data_center")?,
                },
                text(rack.as_deref()).context("peer rack")?,
                token_set(tokens.as_deref()).context("peer tokens")?,
            ));
        }
        let ks = conn
            .rows(&format!(
                "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = '{keyspace}'"
            ))
            .await?;
        let [replication] = one_row(ks, &format!("keyspace {keyspace}"))?;
        let options = text_map(replication.as_deref()).context("replication map")?;
        let strategy = ReplicationStrategy::from_options(options)?;
        TokenAware::new(nodes, &strategy)
    }

    /// The view of `nodes` (the contact node first: its datacenter is the local one), each with
    /// its rack and tokens, under `strategy`.
    pub fn new(
        nodes: Vec<(ClientNode, String, Vec<Token>)>,
        strategy: &ReplicationStrategy,
    ) -> Result<TokenAware> {
        let ring = Ring::new(nodes.iter().enumerate().map(|(i, (n, rack, tokens))| Node {
            id: NodeId(i as u32),
            datacenter: n.datacenter.clone(),
            rack: rack.clone(),
            tokens: tokens.clone(),
        }))?;
        let map = ReplicaMap::new(&ring, strategy);
        let nodes: Vec<ClientNode> = nodes.into_iter().map(|(n, ..)| n).collect();
        let local = nodes
            .iter()
            .map(|n| n.datacenter == nodes[0].datacenter)
            .collect();
        Ok(TokenAware { nodes, map, local })
    }

    /// The nodes, by the index [`TokenAware::node_for`] returns.
    pub fn nodes(&self) -> &[ClientNode] {
        &self.nodes
    }

    /// The replicas of the first range (the replication factor of a keyspace placed on every
    /// range alike).
    pub fn replication_factor(&self) -> usize {
        self.map.replicas(Token(0)).len()
    }

    /// The node (index into [`TokenAware::nodes`]) a request for the partition whose routing
    /// key is `key` goes to; `turn` picks among several local replicas.
    pub fn node_for(&self, key: &[u8], turn: u64) -> usize {
        let replicas = self.map.replicas(token(key));
        let is_local = |id: &&NodeId| self.local.get(id.0 as usize).copied().unwrap_or(false);
        let locals = replicas.iter().filter(is_local).count();
        let pick = if locals > 0 {
            replicas
                .iter()
                .filter(is_local)
                .nth((turn % locals as u64) as usize)
        } else {
            replicas.first()
        };
        pick.map_or(0, |id| id.0 as usize)
    }
}

/// The cells of the one row of `rows`, which must have `N` columns.
fn one_row<const N: usize>(
    rows: Vec<Vec<Option<Vec<u8>>>>,
    what: &str,
) -> Result<[Option<Vec<u8>>; N]> {
    let mut rows = rows.into_iter();
    match (rows.next(), rows.next()) {
        (Some(row), None) => fixed(row, what),
        _ => bail!("{what}: expected one row"),
    }
}

fn fixed<const N: usize>(row: Vec<Option<Vec<u8>>>, what: &str) -> Result<[Option<Vec<u8>>; N]> {
    let len = row.len();
    row.try_into()
        .map_err(|_| anyhow::anyhow!("{what}: {len} columns, expected {N}"))
}

fn text(cell: Option<&[u8]>) -> Option<String> {
    String::from_utf8(cell?.to_vec()).ok()
}

fn int(cell: Option<&[u8]>) -> Option<i32> {
    Some(i32::from_be_bytes(cell?.try_into().ok()?))
}

/// An `inet` cell: 4 or 16 address bytes.
fn inet(cell: Option<&[u8]>) -> Option<IpAddr> {
    match cell? {
        b if b.len() == 4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        b if b.len() == 16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// The elements of a serialized collection (v3+: an int count, then `per` `[int length][bytes]`
/// items per element), as owned byte strings.
fn collection(cell: &[u8], per: usize) -> Option<Vec<Vec<u8>>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    let mut b = cell;
    let count = usize::try_from(i32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?)).ok()?;
    // Each item takes at least its 4-byte length: a count beyond that is malformed.
    if count.checked_mul(per * 4)? > b.len() {
        return None;
    }
    let mut out = Vec::with_capacity(count * per);
    for _ in 0..count * per {
        let len = usize::try_from(i32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?)).ok()?;
        out.push(take(&mut b, len)?.to_vec());
    }
    b.is_empty().then_some(out)
}

/// A `set<text>` of decimal tokens.
fn token_set(cell: Option<&[u8]>) -> Option<Vec<Token>> {
    collection(cell?, 1)?
        .into_iter()
        .map(|t| std::str::from_utf8(&t).ok()?.parse::<i64>().ok().map(Token))
        .collect()
}

/// A `map<text, text>`.
fn text_map(cell: Option<&[u8]>) -> Option<Vec<(String, String)>> {
    let items = collection(cell?, 2)?;
    items
        .chunks(2)
        .map(|kv| Some((text(Some(kv[0].as_slice()))?, text(Some(kv[1].as_slice()))?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ser(items: &[&[u8]]) -> Vec<u8> {
        let mut out = (items.len() as i32).to_be_bytes().to_vec();
        for i in items {
            out.extend_from_slice(&(i.len() as i32).to_be_bytes());
            out.extend_from_slice(i);
        }
        out
    }

    #[test]
    fn cells_are_read() {
        assert_eq!(
            token_set(Some(&ser(&[b"-5", b"9223372036854775807"]))),
            Some(vec![Token(-5), Token(i64::MAX)])
        );
        assert_eq!(token_set(Some(&[0, 0, 0, 9])), None);
        assert_eq!(token_set(Some(&ser(&[b"x"]))), None);
        let mut map = 2i32.to_be_bytes().to_vec();
        for s in ["class", "SimpleStrategy", "replication_factor", "1"] {
            map.extend_from_slice(&(s.len() as i32).to_be_bytes());
            map.extend_from_slice(s.as_bytes());
        }
        assert_eq!(
            text_map(Some(&map)).unwrap(),
            vec![
                ("class".into(), "SimpleStrategy".into()),
                ("replication_factor".into(), "1".into())
            ]
        );
        assert_eq!(
            inet(Some(&[127, 0, 0, 52])),
            Some("127.0.0.52".parse().unwrap())
        );
        assert_eq!(inet(Some(&[1, 2, 3])), None);
        assert_eq!(int(Some(&9042i32.to_be_bytes())), Some(9042));
    }

    fn node(last: u8, dc: &str, rack: &str, tokens: &[i64]) -> (ClientNode, String, Vec<Token>) {
        (
            ClientNode {
                addr: SocketAddr::from(([127, 0, 0, last], 9042)),
                datacenter: dc.into(),
            },
            rack.into(),
            tokens.iter().map(|&t| Token(t)).collect(),
        )
    }

    /// Three nodes, dc1 (two racks) and dc2, as scripts/cluster.sh lays them out.
    fn three() -> Vec<(ClientNode, String, Vec<Token>)> {
        vec![
            node(51, "dc1", "r1", &[i64::MIN / 2, 3 * (i64::MAX / 4)]),
            node(52, "dc1", "r2", &[0]),
            node(53, "dc2", "r1", &[i64::MAX / 2]),
        ]
    }

    #[test]
    fn rf1_goes_to_the_one_replica() {
        let ta = TokenAware::new(
            three(),
            &ReplicationStrategy::Simple {
                replication_factor: 1,
            },
        )
        .unwrap();
        assert_eq!(ta.replication_factor(), 1);
        for k in 0..200u32 {
            let key = format!("s-{k}");
            let t = token(key.as_bytes()).0;
            let owner = if t <= i64::MIN / 2 || t > 3 * (i64::MAX / 4) {
                0
            } else if t <= 0 {
                1
            } else if t <= i64::MAX / 2 {
                2
            } else {
                0
            };
            for turn in 0..3 {
                assert_eq!(ta.node_for(key.as_bytes(), turn), owner, "{key}");
            }
        }
    }

    #[test]
    fn network_topology_prefers_the_local_datacenter_in_turn() {
        let ta = TokenAware::new(
            three(),
            &ReplicationStrategy::NetworkTopology {
                datacenters: BTreeMap::from([("dc1".into(), 2), ("dc2".into(), 1)]),
            },
        )
        .unwrap();
        assert_eq!(ta.replication_factor(), 3);
        let picks: Vec<usize> = (0..4).map(|turn| ta.node_for(b"s-1", turn)).collect();
        assert!(picks.iter().all(|&n| n < 2), "{picks:?}");
        assert_ne!(picks[0], picks[1], "{picks:?}");
        // Only dc2 holds data: its replica, wherever the client is.
        let ta = TokenAware::new(
            three(),
            &ReplicationStrategy::NetworkTopology {
                datacenters: BTreeMap::from([("dc2".into(), 1)]),
            },
        )
        .unwrap();
        assert_eq!(ta.node_for(b"s-1", 0), 2);
        let ta = TokenAware::new(three(), &ReplicationStrategy::Local).unwrap();
        assert_eq!(ta.node_for(b"s-1", 5), 0);
    }
}
