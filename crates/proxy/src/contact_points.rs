//! The upstream contact points (`--upstream a:9042,b:9042`) and the choice of a node for each
//! new client connection.
//!
//! Every client connection gets its own upstream connection, to one node. The choice rotates:
//! each new connection starts its search one node further along the list (round-robin), so
//! connections spread over the nodes. A node that refuses a connection or does not accept it
//! within the connect timeout is skipped, and remembered as failed for [`BACKOFF`]: during
//! that time it is tried only after every other node (so a dead node costs one failed attempt
//! per back-off period, not one per connection), and never given up on entirely (when every
//! node is in back-off, all are still tried in order).
//!
//! With routing, connections are homed in the local datacenter only (see [`Homing`]): until
//! the cluster is read, every connection goes to the first contact point that answers, in the
//! configured order (the node whose datacenter becomes the local one); then round-robin over
//! the local datacenter's contact points, those whose datacenter is not known yet after them,
//! and those of other datacenters only with remote failover, after every other. So a `LOCAL_*`
//! consistency means the same datacenter on every client connection, as for a DC-aware driver.
//!
//! A node's index in the list is its identity for the prepared-statement cache: each node has
//! its own server-side cache, so a shape prepared on one node is prepared again on another.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use thiserror::Error;

/// How long a node that refused or timed out is tried only after the others.
pub const BACKOFF: Duration = Duration::from_secs(5);

/// A configuration problem with `--upstream`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ContactPointsError {
    /// The list names no node.
    #[error("--upstream names no node (expected host:port[,host:port...])")]
    Empty,
    /// An entry is not `host:port`.
    #[error("--upstream entry {entry:?} is not host:port")]
    NotHostPort { entry: String },
}

/// Why no upstream connection could be made.
#[derive(Debug, Error)]
#[error("no upstream node could be connected to: {}", .attempts.join("; "))]
pub struct ConnectError {
    /// One line per node tried: its address and what happened.
    pub attempts: Vec<String>,
}

/// One contact point.
#[derive(Debug)]
struct Node {
    /// `host:port` as configured (resolved at each connect, so DNS changes are followed).
    addr: String,
    /// Until when the node is tried last, after a failure.
    backoff_until: Mutex<Option<Instant>>,
    /// Its address: `addr` itself when it is an IP address, else the one a connection to it
    /// last reached (see [`ContactPoints::connected`]).
    resolved: Mutex<Option<SocketAddr>>,
}

/// Where a contact point lies, for the homing of a new client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// In the local datacenter.
    Local,
    /// Not known: a host name not connected to yet, or an address the cluster view lacks.
    Unknown,
    /// In another datacenter: tried after every other (remote failover).
    Remote,
    /// In another datacenter: never tried.
    Excluded,
}

/// How a new client connection chooses among the contact points.
pub enum Homing<'a> {
    /// Round-robin over every contact point (no datacenter matters: routing is off).
    Anywhere,
    /// The first that answers, in the configured order (the local datacenter is not known
    /// yet: it becomes this node's).
    First,
    /// Round-robin by [`Place`], as `place` places each contact point's address.
    Local(&'a (dyn Fn(SocketAddr) -> Place + Sync)),
}

/// The configured nodes and the round-robin cursor.
#[derive(Debug)]
pub struct ContactPoints {
    nodes: Vec<Node>,
    next: AtomicUsize,
}

/// The node a client connection went to: its index (the cache's node id) and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picked {
    /// Index in the `--upstream` list.
    pub node: u32,
    /// The node's address as configured.
    pub addr: String,
}

impl ContactPoints {
    /// Parses a comma-separated `host:port` list (whitespace around entries is ignored).
    pub fn parse(list: &str) -> Result<ContactPoints, ContactPointsError> {
        let mut nodes = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let ok = entry
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !ok {
                return Err(ContactPointsError::NotHostPort {
                    entry: entry.to_owned(),
                });
            }
            nodes.push(Node {
                addr: entry.to_owned(),
                backoff_until: Mutex::new(None),
                resolved: Mutex::new(entry.parse().ok()),
            });
        }
        if nodes.is_empty() {
            return Err(ContactPointsError::Empty);
        }
        Ok(ContactPoints {
            nodes,
            next: AtomicUsize::new(0),
        })
    }

    /// How many nodes are configured.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no node is configured (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The address of node `i`, as configured.
    pub fn addr(&self, i: usize) -> Option<&str> {
        self.nodes.get(i).map(|n| n.addr.as_str())
    }

    /// Every configured address, in order.
    pub fn addrs(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.addr.as_str())
    }

    /// The order in which to try the nodes for a new connection: nodes not in back-off first,
    /// then those in back-off (soonest to leave it first); with [`Homing::Local`], the local
    /// datacenter's before those not placed yet, those of other datacenters last or not at
    /// all. The best of them take turns (round-robin) unless [`Homing::First`]; the rest
    /// follow in the configured order.
    pub fn pick(&self, now: Instant, homing: &Homing<'_>) -> Vec<usize> {
        let mut order: Vec<_> = (0..self.nodes.len())
            .filter_map(|i| {
                let place = match homing {
                    Homing::Local(place) => self.resolved(i).map_or(Place::Unknown, place),
                    _ => Place::Local,
                };
                let backoff = self.backoff_until(i).filter(|until| *until > now);
                // Another datacenter's last, then back-off, then place.
                (place != Place::Excluded).then_some(((place == Place::Remote, backoff, place), i))
            })
            .collect();
        // Stable: equal keys keep the configured order.
        order.sort_by_key(|(key, _)| *key);
        let best = order
            .iter()
            .take_while(|(key, _)| Some(key) == order.first().map(|(k, _)| k))
            .count();
        if best > 1 && !matches!(homing, Homing::First) {
            let turn = self.next.fetch_add(1, Ordering::Relaxed) % best;
            order[..best].rotate_left(turn);
        }
        order.into_iter().map(|(_, i)| i).collect()
    }

    /// Node `i`'s address: as configured when an IP address, else as last connected to.
    pub fn resolved(&self, i: usize) -> Option<SocketAddr> {
        self.nodes
            .get(i)
            .and_then(|n| *n.resolved.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// A connection to node `i` reached `peer`: the node's address from now on (a host name's
    /// address, for placing it in a datacenter).
    pub fn connected(&self, i: usize, peer: SocketAddr) {
        if let Some(node) = self.nodes.get(i) {
            *node.resolved.lock().unwrap_or_else(|p| p.into_inner()) = Some(peer);
        }
    }

    fn backoff_until(&self, i: usize) -> Option<Instant> {
        *self.nodes[i]
            .backoff_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn set_backoff(&self, i: usize, until: Option<Instant>) {
        if let Some(node) = self.nodes.get(i) {
            *node.backoff_until.lock().unwrap_or_else(|p| p.into_inner()) = until;
        }
    }

    /// Records that node `i` refused or timed out at `now`.
    pub fn failed(&self, i: usize, now: Instant) {
        self.set_backoff(i, Some(now + BACKOFF));
    }

    /// Records that node `i` accepted a connection.
    pub fn succeeded(&self, i: usize) {
        if self.backoff_until(i).is_some() {
            self.set_backoff(i, None);
        }
    }

    /// Connects to a node for a new client connection: tries the nodes in [`pick`] order with
    /// `connect_one` (TCP and, when configured, TLS, within the connect timeout) and returns
    /// the first connection made, with the node's index. Each node that fails adds one to
    /// `failures`.
    ///
    /// [`pick`]: ContactPoints::pick
    pub async fn connect<S, E, F, Fut>(
        &self,
        failures: &AtomicU64,
        homing: &Homing<'_>,
        mut connect_one: F,
    ) -> Result<(S, Picked), ConnectError>
    where
        E: std::fmt::Display,
        F: FnMut(String) -> Fut,
        Fut: Future<Output = Result<S, E>>,
    {
        let mut attempts = Vec::new();
        let order = self.pick(Instant::now(), homing);
        if order.len() < self.nodes.len() {
            attempts.push(format!(
                "{} contact point(s) of other datacenters than the local one not tried (--routing-remote-failover)",
                self.nodes.len() - order.len()
            ));
        }
        for i in order {
            let addr = &self.nodes[i].addr;
            match connect_one(addr.clone()).await {
                Ok(sock) => {
                    self.succeeded(i);
                    let picked = Picked {
                        // The list is far shorter than u32::MAX.
                        node: u32::try_from(i).unwrap_or(u32::MAX),
                        addr: addr.clone(),
                    };
                    return Ok((sock, picked));
                }
                Err(e) => attempts.push(e.to_string()),
            }
            failures.fetch_add(1, Ordering::Relaxed);
            self.failed(i, Instant::now());
        }
        Err(ConnectError { attempts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists() {
        let cp = ContactPoints::parse(" a:9042, 10.0.0.2:9043 ,[::1]:9042,").unwrap();
        assert_eq!(
            cp.addrs().collect::<Vec<_>>(),
            ["a:9042", "10.0.0.2:9043", "[::1]:9042"]
        );
        assert_eq!(
            ContactPoints::parse(" , ").unwrap_err(),
            ContactPointsError::Empty
        );
        for bad in ["a", "a:", ":9042", "a:port", "a:70000"] {
            assert!(
                matches!(
                    ContactPoints::parse(bad),
                    Err(ContactPointsError::NotHostPort { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn round_robin_starting_point() {
        let cp = ContactPoints::parse("a:1,b:2,c:3").unwrap();
        let now = Instant::now();
        assert_eq!(cp.pick(now, &Homing::Anywhere), [0, 1, 2]);
        assert_eq!(cp.pick(now, &Homing::Anywhere), [1, 2, 0]);
        assert_eq!(cp.pick(now, &Homing::Anywhere), [2, 0, 1]);
        assert_eq!(cp.pick(now, &Homing::Anywhere), [0, 1, 2]);
    }

    #[test]
    fn failed_nodes_go_last_until_their_backoff_ends() {
        let cp = ContactPoints::parse("a:1,b:2,c:3").unwrap();
        let now = Instant::now();
        cp.failed(0, now);
        cp.failed(1, now - Duration::from_secs(1));
        // b leaves its back-off first, so it comes before a.
        assert_eq!(cp.pick(now, &Homing::Anywhere), [2, 1, 0]);
        assert_eq!(cp.pick(now, &Homing::Anywhere), [2, 1, 0]);
        // After the back-off all are healthy again, in round-robin order (the turns count only
        // picks with a choice: this is the first).
        assert_eq!(
            cp.pick(now + BACKOFF + Duration::from_millis(1), &Homing::Anywhere),
            [0, 1, 2]
        );
        cp.succeeded(0);
        // The second turn among the two healthy ones; b still backs off.
        assert_eq!(cp.pick(now, &Homing::Anywhere), [2, 0, 1]);
    }

    #[test]
    fn homes_stay_in_the_local_datacenter() {
        let cp = ContactPoints::parse("10.0.0.1:9042,db:9042,10.0.0.3:9042,10.0.0.4:9042").unwrap();
        let now = Instant::now();
        // Not read yet: the first that answers, in order, every time.
        assert_eq!(cp.pick(now, &Homing::First), [0, 1, 2, 3]);
        assert_eq!(cp.pick(now, &Homing::First), [0, 1, 2, 3]);
        // .1 and .4 are local, .3 remote; the host name is not placed until connected to.
        let place = |a: SocketAddr| match a.ip().to_string().as_str() {
            "10.0.0.1" | "10.0.0.4" => Place::Local,
            _ => Place::Excluded,
        };
        let local = Homing::Local(&place);
        let mut firsts = Vec::new();
        for _ in 0..4 {
            let order = cp.pick(now, &local);
            assert_eq!(order.len(), 3, "{order:?}");
            assert_eq!(order[2], 1, "the unplaced host name after the local ones");
            firsts.push(order[0]);
        }
        firsts.sort();
        assert_eq!(firsts, [0, 0, 3, 3], "round-robin over the local ones");
        // Connected, the host name turns out remote: never tried again.
        cp.connected(1, "10.0.0.2:9042".parse().unwrap());
        assert!(!cp.pick(now, &local).contains(&1));
        // A local node in back-off comes after the other local one, before nothing remote.
        cp.failed(0, now);
        assert_eq!(cp.pick(now, &local), [3, 0]);
        // With remote failover the others come last, healthy or not.
        let failover = |a: SocketAddr| match place(a) {
            Place::Excluded => Place::Remote,
            p => p,
        };
        let order = cp.pick(now, &Homing::Local(&failover));
        assert_eq!(&order[..2], [3, 0]);
        assert_eq!(order.len(), 4);
    }

    /// A connector that names the address in its error, as the session's does.
    async fn tcp(addr: String) -> Result<tokio::net::TcpStream, String> {
        tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| format!("{addr}: {e}"))
    }

    #[test]
    fn connect_skips_a_refusing_node() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let dead_addr = dead.local_addr().unwrap();
            drop(dead);
            let cp = ContactPoints::parse(&format!("{dead_addr},{}", live.local_addr().unwrap()))
                .unwrap();
            let failures = AtomicU64::new(0);
            for _ in 0..4 {
                let (sock, picked) = cp.connect(&failures, &Homing::Anywhere, tcp).await.unwrap();
                assert_eq!(picked.node, 1);
                assert_eq!(sock.peer_addr().unwrap(), live.local_addr().unwrap());
                let _ = live.accept().await.unwrap();
            }
            // The dead node cost one attempt: from then on it was tried after the live one.
            assert_eq!(failures.load(Ordering::Relaxed), 1);
            // The dead node was remembered: it is tried last now.
            assert_eq!(cp.pick(Instant::now(), &Homing::Anywhere)[1], 0);
            let all_dead = ContactPoints::parse(&dead_addr.to_string()).unwrap();
            let err = all_dead
                .connect(&failures, &Homing::Anywhere, tcp)
                .await
                .unwrap_err();
            assert_eq!(err.attempts.len(), 1);
            assert!(err.to_string().contains(&dead_addr.to_string()), "{err}");
        });
    }
}
