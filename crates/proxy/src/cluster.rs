//! The cluster as autoprep routes in it (drivers keep seeing one node, see [`crate::topology`]):
//! every node's native address, datacenter and tokens, and each keyspace's replicas per token
//! range, learned by the proxy's own reads of `system.local`, `system.peers_v2` (or `peers`)
//! and `system_schema.keyspaces`.
//!
//! The reads go out on an authenticated client connection (as the proxy's PREPAREs do, so no
//! credentials of its own are needed), one refresh at a time for the whole process: first as
//! soon as a connection is authenticated and its client sends requests (or at the first
//! routable request, should that read fail), again when an event says the ring, a node's
//! status or a keyspace changed (at most once a second), and every [`REFRESH_EVERY`]
//! otherwise; once a view shows one node, only a topology or status event reads it again
//! (nothing else can be routed meanwhile). Their answers stop at the proxy. Until a view
//! exists, nothing is routed.
//!
//! It also remembers which prepared ids each node is known to hold (a node prepares only what
//! it is asked to; ids are the same on every node, md5 of keyspace and text): a request is routed
//! to a replica only once the id is known there.

use autoprep_cache::PreparedEntry;
use autoprep_protocol::message::result::{ResultView, RowsView};
use autoprep_routing::{Node, NodeId, ReplicaMap, ReplicationStrategy, Ring, Token};
use bytes::Bytes;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// A view is read again after this long even without events.
pub const REFRESH_EVERY: Duration = Duration::from_secs(60);

/// After a failed refresh, or between refreshes asked for by events, at least this long.
const REFRESH_PAUSE: Duration = Duration::from_secs(1);

/// The prepared ids whose nodes are remembered (beyond, the map starts again: routing then
/// waits for PREPAREs on the replica connections again). About 100 bytes each with 3 nodes.
const KNOWN_IDS: usize = 20_000;

/// The reads of one refresh, in the order they are sent.
pub const READS: [(Part, &str); 4] = [
    (
        Part::Local,
        "SELECT data_center, rack, tokens, partitioner FROM system.local WHERE key = 'local'",
    ),
    (
        Part::PeersV2,
        "SELECT native_address, native_port, data_center, rack, tokens FROM system.peers_v2",
    ),
    (
        Part::Peers,
        "SELECT rpc_address, data_center, rack, tokens FROM system.peers",
    ),
    (
        Part::Keyspaces,
        "SELECT keyspace_name, replication FROM system_schema.keyspaces",
    ),
];

/// Which read of a refresh an answer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Local,
    PeersV2,
    Peers,
    Keyspaces,
}

/// A node of the view.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Where its native transport listens.
    pub addr: SocketAddr,
    pub datacenter: String,
}

/// One consistent picture of the cluster.
#[derive(Debug)]
pub struct View {
    /// By [`NodeId`] (its index).
    nodes: Vec<NodeInfo>,
    /// Replicas per token range of each keyspace (keyspaces of one strategy share a map).
    keyspaces: HashMap<String, Arc<ReplicaMap>>,
    /// The datacenter replicas are preferred in.
    local_dc: String,
}

impl View {
    /// How many nodes the view has.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Every node's native-transport address.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(|n| n.addr).collect()
    }
}

/// Why a request is not routed to a replica (the `reason` of `autoprep_routed_total`).
pub type NotRouted = &'static str;

/// The rows of one answered read: cells by column name.
#[derive(Debug, Default)]
struct Rows(Vec<HashMap<String, Option<Vec<u8>>>>);

#[derive(Debug, Default)]
struct Collect {
    /// The connection's node (its native address): what `system.local` describes.
    home: Option<SocketAddr>,
    local: Option<Result<Rows, ()>>,
    peers_v2: Option<Result<Rows, ()>>,
    peers: Option<Result<Rows, ()>>,
    keyspaces: Option<Result<Rows, ()>>,
}

/// The shared view and its refresh state.
#[derive(Debug)]
pub struct ClusterView {
    enabled: bool,
    /// The local datacenter: configured, or decided by the first view read; never changed.
    local_dc: OnceLock<LocalDc>,
    /// The last view read had no node in the local datacenter (logged when it turns).
    local_dc_missing: AtomicBool,
    view: RwLock<Option<Arc<View>>>,
    stale: AtomicBool,
    refreshing: AtomicBool,
    last_refresh: Mutex<Option<Instant>>,
    /// When the next periodic refresh is due, in milliseconds since `base`: the per-request
    /// check reads only this and two flags.
    next_due_ms: AtomicU64,
    has_view: AtomicBool,
    /// The view has one node: nothing can be routed (the rewrite does not even compute
    /// tokens), until an event makes the view stale.
    single_node: AtomicBool,
    base: Instant,
    collect: Mutex<Collect>,
    rotation: AtomicUsize,
    /// The nodes (other than a connection's home) known to hold each prepared id.
    known: RwLock<HashMap<[u8; 16], Vec<SocketAddr>>>,
    /// The statements clients prepared themselves, by id, as their PREPARED answers
    /// described them (text, keyspace, partition-key indexes): their EXECUTEs route too.
    client_prepared: Mutex<lru::LruCache<Bytes, Arc<PreparedEntry>>>,
}

/// The local datacenter, and whether the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalDc {
    pub name: String,
    /// `--routing-local-dc`; otherwise the datacenter of the node the first view was read from.
    pub configured: bool,
}

/// Client-prepared statements remembered for routing (least recently used go first).
const CLIENT_PREPARED: usize = 10_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClusterView {
    /// A view that routes when `enabled`, preferring replicas in `local_dc` (by default the
    /// datacenter of the node the first refresh read `system.local` from).
    pub fn new(enabled: bool, local_dc: Option<String>) -> ClusterView {
        let decided = OnceLock::new();
        if let Some(name) = local_dc {
            let _ = decided.set(LocalDc {
                name,
                configured: true,
            });
        }
        ClusterView {
            enabled,
            local_dc: decided,
            local_dc_missing: AtomicBool::new(false),
            view: RwLock::new(None),
            stale: AtomicBool::new(false),
            refreshing: AtomicBool::new(false),
            last_refresh: Mutex::new(None),
            next_due_ms: AtomicU64::new(0),
            has_view: AtomicBool::new(false),
            single_node: AtomicBool::new(false),
            base: Instant::now(),
            collect: Mutex::new(Collect::default()),
            rotation: AtomicUsize::new(0),
            known: RwLock::new(HashMap::new()),
            client_prepared: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(CLIENT_PREPARED).unwrap_or(std::num::NonZeroUsize::MIN),
            )),
        }
    }

    /// Whether routing is on at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Routing is on and no view was read yet.
    pub fn needs_view(&self) -> bool {
        self.enabled && !self.has_view.load(Ordering::Relaxed)
    }

    /// Whether a request may be routed: routing is on, and the cluster is not known to be one
    /// node (with no view yet, a request is what asks for one).
    pub fn may_route(&self) -> bool {
        self.enabled
            && !(self.single_node.load(Ordering::Relaxed)
                && self.has_view.load(Ordering::Relaxed)
                && !self.stale.load(Ordering::Relaxed))
    }

    /// The view, once one was read.
    pub fn current(&self) -> Option<Arc<View>> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// An event was seen: the ring or a node (`topology`), or a keyspace may have changed. On
    /// a cluster of one node only the first matter (a node joined).
    pub fn event_seen(&self, topology: bool) {
        if self.enabled && (topology || !self.single_node.load(Ordering::Relaxed)) {
            self.stale.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the caller should send the reads of a refresh now (on the connection to
    /// `home`); when it returns true the caller owns the refresh and must send all of
    /// [`READS`] and hand each answer to [`ClusterView::answer`].
    pub fn begin_refresh(&self, home: SocketAddr, now: Instant) -> bool {
        if !self.enabled || self.refreshing.load(Ordering::Relaxed) {
            return false;
        }
        let now_ms = now.saturating_duration_since(self.base).as_millis() as u64;
        if self.has_view.load(Ordering::Relaxed)
            && !self.stale.load(Ordering::Relaxed)
            && now_ms < self.next_due_ms.load(Ordering::Relaxed)
        {
            return false;
        }
        let mut last = lock(&self.last_refresh);
        let due = match *last {
            None => true,
            Some(t) => {
                let age = now.saturating_duration_since(t);
                age >= REFRESH_EVERY
                    || (self.stale.load(Ordering::Relaxed) && age >= REFRESH_PAUSE)
                    || (self.current().is_none() && age >= REFRESH_PAUSE)
            }
        };
        if !due || self.refreshing.swap(true, Ordering::AcqRel) {
            return false;
        }
        *last = Some(now);
        self.next_due_ms
            .store(now_ms + REFRESH_EVERY.as_millis() as u64, Ordering::Relaxed);
        self.stale.store(false, Ordering::Relaxed);
        *lock(&self.collect) = Collect {
            home: Some(home),
            ..Collect::default()
        };
        true
    }

    /// The refresh's connection ended before every answer came: another may start.
    pub fn abandon_refresh(&self) {
        self.refreshing.store(false, Ordering::Release);
    }

    /// The answer to the read `part` of the refresh in progress (a RESULT body, or `None`
    /// for an error).
    pub fn answer(&self, part: Part, result: Option<ResultView<'_>>) {
        let rows = match result {
            Some(ResultView::Rows(r)) => read_rows(&r).ok_or(()),
            _ => Err(()),
        };
        let done = {
            let mut c = lock(&self.collect);
            let slot = match part {
                Part::Local => &mut c.local,
                Part::PeersV2 => &mut c.peers_v2,
                Part::Peers => &mut c.peers,
                Part::Keyspaces => &mut c.keyspaces,
            };
            *slot = Some(rows);
            (c.local.is_some()
                && c.peers_v2.is_some()
                && c.peers.is_some()
                && c.keyspaces.is_some())
            .then(|| std::mem::take(&mut *c))
        };
        let Some(c) = done else { return };
        match self.build(c) {
            Ok(view) => {
                info!(
                    nodes = view.nodes.len(),
                    keyspaces = view.keyspaces.len(),
                    local_dc = %view.local_dc,
                    "cluster view read"
                );
                self.single_node
                    .store(view.nodes.len() < 2, Ordering::Relaxed);
                self.prune_known(&view);
                *self.view.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(view));
                self.has_view.store(true, Ordering::Relaxed);
            }
            Err(why) => debug!(why, "cluster view not usable; nothing is routed"),
        }
        self.refreshing.store(false, Ordering::Release);
    }

    fn build(&self, c: Collect) -> Result<View, &'static str> {
        let home = c.home.ok_or("no connection")?;
        let local = c
            .local
            .and_then(Result::ok)
            .ok_or("system.local unreadable")?;
        let row = local.0.first().ok_or("system.local empty")?;
        let partitioner = text(row, "partitioner").unwrap_or_default();
        if !partitioner.ends_with("Murmur3Partitioner") {
            // Another partitioner: the proxy cannot compute tokens.
            *self.view.write().unwrap_or_else(|p| p.into_inner()) = None;
            return Err("not the Murmur3 partitioner");
        }
        let mut nodes = vec![node_of(row, home)?];
        let peers = match (
            c.peers_v2.and_then(Result::ok),
            c.peers.and_then(Result::ok),
        ) {
            (Some(v2), _) => {
                v2.0.iter()
                    .filter_map(|r| {
                        let ip = inet(r, "native_address")?;
                        let port = int(r, "native_port").and_then(|p| u16::try_from(p).ok());
                        node_of(r, SocketAddr::new(ip, port.unwrap_or(home.port()))).ok()
                    })
                    .collect::<Vec<_>>()
            }
            (None, Some(v1)) => {
                v1.0.iter()
                    .filter_map(|r| {
                        node_of(r, SocketAddr::new(inet(r, "rpc_address")?, home.port())).ok()
                    })
                    .collect()
            }
            (None, None) => return Err("system.peers unreadable"),
        };
        nodes.extend(peers.into_iter().filter(|(n, _)| n.addr != home));
        let local_dc = self.decide_local_dc(&nodes[0].0).name.clone();
        let missing = !nodes.iter().any(|(n, _)| n.datacenter == local_dc);
        if self.local_dc_missing.swap(missing, Ordering::Relaxed) != missing {
            if missing {
                warn!(local_dc = %local_dc, "no node of the cluster is in the local datacenter: requests go to replicas of other datacenters, and new client connections to their contact points only with remote failover");
            } else {
                info!(local_dc = %local_dc, "the local datacenter has nodes again");
            }
        }
        let ring = Ring::new(
            nodes
                .iter()
                .enumerate()
                .map(|(i, (n, (rack, tokens)))| Node {
                    id: NodeId(i as u32),
                    datacenter: n.datacenter.clone(),
                    rack: rack.clone(),
                    tokens: tokens.clone(),
                }),
        )
        .map_err(|_| "inconsistent ring")?;
        let nodes: Vec<NodeInfo> = nodes.into_iter().map(|(n, _)| n).collect();
        let ks_rows = c
            .keyspaces
            .and_then(Result::ok)
            .ok_or("keyspaces unreadable")?;
        let mut by_strategy: HashMap<ReplicationStrategy, Arc<ReplicaMap>> = HashMap::new();
        let mut keyspaces = HashMap::new();
        for r in &ks_rows.0 {
            let (Some(name), Some(options)) =
                (text(r, "keyspace_name"), text_map(r, "replication"))
            else {
                continue;
            };
            let Ok(strategy) = ReplicationStrategy::from_options(options) else {
                continue;
            };
            let map = by_strategy
                .entry(strategy.clone())
                .or_insert_with(|| Arc::new(ReplicaMap::new(&ring, &strategy)))
                .clone();
            keyspaces.insert(name, map);
        }
        Ok(View {
            nodes,
            keyspaces,
            local_dc,
        })
    }

    /// The local datacenter, once decided: configured, or the datacenter of `first` (the node
    /// the first view was read from, whose connection went to the first contact point that
    /// answered); decided once, logged once.
    fn decide_local_dc(&self, first: &NodeInfo) -> &LocalDc {
        self.local_dc.get_or_init(|| {
            info!(
                local_dc = %first.datacenter,
                node = %first.addr,
                "local datacenter decided: that of the first contact point that answered; it stays for the process's life (--routing-local-dc names one)"
            );
            LocalDc {
                name: first.datacenter.clone(),
                configured: false,
            }
        })
    }

    /// The local datacenter, once known.
    pub fn local_dc(&self) -> Option<&LocalDc> {
        self.local_dc.get()
    }

    /// How a new client connection chooses its contact point (see
    /// [`crate::contact_points::Homing`]), given `place`, which places a contact point by its
    /// address (see [`ClusterView::place`]).
    pub fn homing<'a>(
        &self,
        place: &'a (dyn Fn(SocketAddr) -> crate::contact_points::Place + Sync),
    ) -> crate::contact_points::Homing<'a> {
        use crate::contact_points::Homing;
        if !self.enabled {
            Homing::Anywhere
        } else if self.current().is_none() {
            Homing::First
        } else {
            Homing::Local(place)
        }
    }

    /// Where the node at `addr` lies for homing a client connection: in the local datacenter,
    /// not in the view, or in another (tried last with `remote_failover`, else never).
    pub fn place(&self, addr: SocketAddr, remote_failover: bool) -> crate::contact_points::Place {
        use crate::contact_points::Place;
        let (Some(view), Some(local)) = (self.current(), self.local_dc()) else {
            return Place::Unknown;
        };
        match view.nodes.iter().find(|n| n.addr == addr) {
            None => Place::Unknown,
            Some(n) if n.datacenter == local.name => Place::Local,
            Some(_) if remote_failover => Place::Remote,
            Some(_) => Place::Excluded,
        }
    }

    /// The replica a request of `keyspace` whose partition has `token` goes to, for a client
    /// connection whose upstream node is `home`: one in the preferred datacenter where it has
    /// one (the next in turn among them), otherwise any replica; `Err` says why none.
    ///
    /// A request at a `LOCAL_*` consistency (`local_only`) is answered by the replicas of its
    /// coordinator's datacenter: it only ever goes to a replica in `home`'s datacenter, so that
    /// it sees and waits for exactly the replicas it would directly.
    pub fn pick(
        &self,
        view: &View,
        keyspace: &str,
        token: Token,
        home: SocketAddr,
        local_only: bool,
    ) -> Result<SocketAddr, NotRouted> {
        let map = view.keyspaces.get(keyspace).ok_or("keyspace unknown")?;
        let replicas = map.replicas(token);
        if replicas.is_empty() {
            return Err("no replicas");
        }
        let home_dc = view
            .nodes
            .iter()
            .find(|n| n.addr == home)
            .map(|n| n.datacenter.as_str())
            .ok_or("home node not in the view")?;
        let dc = if local_only {
            home_dc
        } else {
            view.local_dc.as_str()
        };
        let in_dc = |id: &&NodeId| view.nodes[id.0 as usize].datacenter == dc;
        let local = replicas.iter().filter(in_dc).count();
        let turn = self.rotation.fetch_add(1, Ordering::Relaxed);
        let chosen = if local > 0 {
            replicas.iter().filter(in_dc).nth(turn % local)
        } else if local_only {
            return Err("no replica in the local datacenter");
        } else {
            replicas.get(turn % replicas.len())
        };
        chosen
            .map(|id| view.nodes[id.0 as usize].addr)
            .ok_or("no replicas")
    }

    /// Whether the node at `addr` is known to hold the prepared statement `id`, and whether
    /// every node of `view` but `home` (the asking connection's own node) is.
    ///
    /// "Every node but `home`" counts the known nodes other than `home` itself: the set was
    /// filled by connections of other homes, and may hold `home` but not this connection's
    /// replica. Counted with `home` in it, a node that only ever prepared the statement as some
    /// connection's home (whose PREPARE the proxy does not record per node) was never prepared
    /// on through a replica connection, and never routed to. The count is exact because the
    /// set holds only nodes of the current view (see `prune_known`), once each.
    pub fn is_known(
        &self,
        view: &View,
        home: SocketAddr,
        addr: SocketAddr,
        id: &[u8],
    ) -> (bool, bool) {
        let Ok(id) = <[u8; 16]>::try_from(id) else {
            return (false, false);
        };
        let known = self.known.read().unwrap_or_else(|p| p.into_inner());
        match known.get(&id) {
            Some(nodes) => {
                let others = nodes.len() - usize::from(nodes.contains(&home));
                (nodes.contains(&addr), others + 1 >= view.nodes.len())
            }
            None => (false, false),
        }
    }

    /// Forgets the nodes that left the cluster (so that [`ClusterView::is_known`] may count).
    fn prune_known(&self, view: &View) {
        let members: std::collections::HashSet<SocketAddr> =
            view.nodes.iter().map(|n| n.addr).collect();
        let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
        for nodes in known.values_mut() {
            nodes.retain(|a| members.contains(a));
        }
        known.retain(|_, nodes| !nodes.is_empty());
    }

    /// Whether `addr` is known to hold `id`.
    pub fn holds(&self, addr: SocketAddr, id: &[u8]) -> bool {
        <[u8; 16]>::try_from(id)
            .ok()
            .and_then(|id| {
                let known = self.known.read().unwrap_or_else(|p| p.into_inner());
                known.get(&id).map(|n| n.contains(&addr))
            })
            .unwrap_or(false)
    }

    /// The node at `addr` holds `id` (it answered a PREPARE of it).
    pub fn learn(&self, addr: SocketAddr, id: &[u8]) {
        let Ok(id) = <[u8; 16]>::try_from(id) else {
            return;
        };
        let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
        if known.len() >= KNOWN_IDS && !known.contains_key(&id) {
            known.clear();
        }
        let nodes = known.entry(id).or_default();
        if !nodes.contains(&addr) {
            nodes.push(addr);
        }
    }

    /// A client prepared `statement` itself (its id is the server's).
    pub fn client_prepared(&self, statement: ClientStatement) {
        if self.enabled {
            let entry = statement.entry();
            lock(&self.client_prepared).put(entry.id.clone(), Arc::new(entry));
        }
    }

    /// Every client-prepared statement remembered, least recently used first (so that, filed
    /// again in this order, the most recent stay most recent).
    pub fn client_statements(&self) -> Vec<ClientStatement> {
        lock(&self.client_prepared)
            .iter()
            .rev()
            .map(|(_, e)| ClientStatement::of(e))
            .collect()
    }

    /// The client-prepared statement `id`, if remembered.
    pub fn client_statement(&self, id: &[u8]) -> Option<Arc<PreparedEntry>> {
        lock(&self.client_prepared).get(id).cloned()
    }

    /// The node at `addr` answered UNPREPARED for `id`.
    pub fn forget(&self, addr: SocketAddr, id: &[u8]) {
        if let Ok(id) = <[u8; 16]>::try_from(id) {
            let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
            if let Some(nodes) = known.get_mut(&id) {
                nodes.retain(|a| *a != addr);
            }
        }
    }
}

/// A statement a client prepared, as routing knows it: from its PREPARED answer (the text and
/// keyspace it was prepared with, its ids, the partition key's bind indexes and the tables of
/// its bind variables), or from a draining process (see [`crate::handover`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientStatement {
    pub text: String,
    pub keyspace: Option<String>,
    pub id: Bytes,
    pub result_metadata_id: Option<Bytes>,
    pub pk_indexes: Vec<u16>,
    pub tables: Vec<(String, String)>,
}

impl ClientStatement {
    /// Its entry for routing; whether it is conditional and whether it may repeat are read
    /// from its text here.
    fn entry(self) -> PreparedEntry {
        use autoprep_protocol::cql::{conditional::is_conditional, idempotent::may_repeat};
        PreparedEntry {
            fingerprint: <[u8; 16]>::try_from(&self.id[..]).unwrap_or_default(),
            conditional: is_conditional(&self.text),
            repeatable: may_repeat(self.text.as_bytes()),
            text: self.text,
            keyspace: self.keyspace,
            id: self.id,
            result_metadata_id: self.result_metadata_id,
            bind_types: Vec::new(),
            pk_indexes: self.pk_indexes,
            result_metadata: Bytes::new(),
            tables: self.tables,
            prepared_message: Bytes::new(),
        }
    }

    fn of(e: &PreparedEntry) -> ClientStatement {
        ClientStatement {
            text: e.text.clone(),
            keyspace: e.keyspace.clone(),
            id: e.id.clone(),
            result_metadata_id: e.result_metadata_id.clone(),
            pk_indexes: e.pk_indexes.clone(),
            tables: e.tables.clone(),
        }
    }
}

/// The node a row of `system.local` or `system.peers[_v2]` describes, with its rack and tokens.
fn node_of(
    row: &HashMap<String, Option<Vec<u8>>>,
    addr: SocketAddr,
) -> Result<(NodeInfo, (String, Vec<Token>)), &'static str> {
    let datacenter = text(row, "data_center").ok_or("no data_center")?;
    let rack = text(row, "rack").unwrap_or_default();
    let tokens = text_set(row, "tokens")
        .ok_or("no tokens")?
        .iter()
        .filter_map(|t| t.parse().ok())
        .collect();
    Ok((NodeInfo { addr, datacenter }, (rack, tokens)))
}

fn read_rows(r: &RowsView<'_>) -> Option<Rows> {
    let names: Vec<String> = r
        .metadata
        .columns?
        .iter()
        .map(|c| c.name.to_owned())
        .collect();
    let mut out = Vec::new();
    for row in r.rows() {
        let row = row.ok()?;
        out.push(
            names
                .iter()
                .cloned()
                .zip(row.into_iter().map(|c| c.map(<[u8]>::to_vec)))
                .collect(),
        );
    }
    Some(Rows(out))
}

type Row = HashMap<String, Option<Vec<u8>>>;

fn cell<'r>(row: &'r Row, name: &str) -> Option<&'r [u8]> {
    row.get(name)?.as_deref()
}

fn text(row: &Row, name: &str) -> Option<String> {
    String::from_utf8(cell(row, name)?.to_vec()).ok()
}

fn int(row: &Row, name: &str) -> Option<i32> {
    Some(i32::from_be_bytes(cell(row, name)?.try_into().ok()?))
}

fn inet(row: &Row, name: &str) -> Option<IpAddr> {
    let b = cell(row, name)?;
    match b.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// The elements of a serialized collection of `[int n]` then `n` `[bytes]`, `per` bytes values
/// per element (1: set or list, 2: map).
fn collection(mut b: &[u8], per: usize) -> Option<Vec<Vec<u8>>> {
    let take = |b: &mut &[u8]| -> Option<Vec<u8>> {
        let (len, rest) = b.split_first_chunk::<4>()?;
        let len = usize::try_from(i32::from_be_bytes(*len)).ok()?;
        let v = rest.get(..len)?.to_vec();
        *b = &rest[len..];
        Some(v)
    };
    let (n, rest) = b.split_first_chunk::<4>()?;
    let n = usize::try_from(i32::from_be_bytes(*n)).ok()?;
    b = rest;
    let mut out = Vec::with_capacity(n.min(4096) * per);
    for _ in 0..n * per {
        out.push(take(&mut b)?);
    }
    Some(out)
}

fn text_set(row: &Row, name: &str) -> Option<Vec<String>> {
    collection(cell(row, name)?, 1)?
        .into_iter()
        .map(|v| String::from_utf8(v).ok())
        .collect()
}

fn text_map(row: &Row, name: &str) -> Option<Vec<(String, String)>> {
    let flat = collection(cell(row, name)?, 2)?;
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((String::from_utf8(k).ok()?, String::from_utf8(v).ok()?));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ser(items: &[&[u8]]) -> Vec<u8> {
        let mut out = (items.len() as i32).to_be_bytes().to_vec();
        for i in items {
            out.extend((i.len() as i32).to_be_bytes());
            out.extend(*i);
        }
        out
    }

    #[test]
    fn collections_are_read() {
        let mut row = Row::new();
        row.insert("tokens".into(), Some(ser(&[b"-5", b"7"])));
        row.insert("replication".into(), {
            let mut m = 1i32.to_be_bytes().to_vec();
            for s in [&b"class"[..], b"SimpleStrategy"] {
                m.extend((s.len() as i32).to_be_bytes());
                m.extend(s);
            }
            Some(m)
        });
        assert_eq!(text_set(&row, "tokens").unwrap(), vec!["-5", "7"]);
        assert_eq!(
            text_map(&row, "replication").unwrap(),
            vec![("class".to_owned(), "SimpleStrategy".to_owned())]
        );
        row.insert("tokens".into(), Some(vec![0, 0, 0, 9]));
        assert_eq!(text_set(&row, "tokens"), None);
    }

    #[test]
    fn the_local_datacenter_is_decided_once() {
        let node = |dc: &str, last: u8| NodeInfo {
            addr: SocketAddr::from(([127, 0, 0, last], 9042)),
            datacenter: dc.into(),
        };
        let v = ClusterView::new(true, None);
        assert_eq!(v.local_dc(), None);
        // A refresh read from a node of dc2 decides; a later one read from dc1 changes nothing.
        assert_eq!(v.decide_local_dc(&node("dc2", 3)).name, "dc2");
        assert_eq!(v.decide_local_dc(&node("dc1", 1)).name, "dc2");
        assert!(!v.local_dc().unwrap().configured);
        let v = ClusterView::new(true, Some("dc1".into()));
        assert_eq!(v.decide_local_dc(&node("dc2", 3)).name, "dc1");
        assert!(v.local_dc().unwrap().configured);
        // Homing: before a view, the first contact point; then by datacenter.
        use crate::contact_points::{Homing, Place};
        let place = |a| v.place(a, false);
        assert!(matches!(v.homing(&place), Homing::First));
        *v.view.write().unwrap() = Some(Arc::new(View {
            nodes: vec![node("dc1", 1), node("dc2", 3)],
            keyspaces: HashMap::new(),
            local_dc: "dc1".into(),
        }));
        assert!(matches!(v.homing(&place), Homing::Local(_)));
        assert_eq!(v.place(node("dc1", 1).addr, false), Place::Local);
        assert_eq!(v.place(node("dc2", 3).addr, false), Place::Excluded);
        assert_eq!(v.place(node("dc2", 3).addr, true), Place::Remote);
        assert_eq!(v.place(node("dc1", 9).addr, false), Place::Unknown);
        assert!(matches!(
            ClusterView::new(false, None).homing(&place),
            Homing::Anywhere
        ));
    }

    #[test]
    fn known_ids_are_per_node() {
        let v = ClusterView::new(true, None);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:1".parse().unwrap();
        let view = View {
            nodes: [a, b, "127.0.0.3:1".parse().unwrap()]
                .into_iter()
                .map(|addr| NodeInfo {
                    addr,
                    datacenter: "dc1".into(),
                })
                .collect(),
            keyspaces: HashMap::new(),
            local_dc: "dc1".into(),
        };
        let c: SocketAddr = "127.0.0.3:1".parse().unwrap();
        v.learn(a, &[7; 16]);
        assert_eq!(v.is_known(&view, c, a, &[7; 16]), (true, false));
        assert_eq!(v.is_known(&view, c, b, &[7; 16]), (false, false));
        v.learn(b, &[7; 16]);
        assert_eq!(v.is_known(&view, c, b, &[7; 16]), (true, true));
        // Known on a and b, the homes of other connections: for a connection whose home is a,
        // c is still to be prepared on (the count, 2 of 3 nodes, would have said "everywhere").
        assert_eq!(v.is_known(&view, a, c, &[7; 16]), (false, false));
        v.learn(c, &[7; 16]);
        assert_eq!(v.is_known(&view, a, c, &[7; 16]), (true, true));
        // A node that left is forgotten when a view without it is read: it counts no more.
        let gone: SocketAddr = "127.0.0.9:1".parse().unwrap();
        v.learn(gone, &[8; 16]);
        v.learn(a, &[8; 16]);
        assert_eq!(
            v.is_known(&view, b, a, &[8; 16]),
            (true, true),
            "counted before pruning"
        );
        v.prune_known(&view);
        assert_eq!(v.is_known(&view, b, a, &[8; 16]), (true, false));
        v.forget(a, &[7; 16]);
        assert!(!v.holds(a, &[7; 16]));
    }
}
