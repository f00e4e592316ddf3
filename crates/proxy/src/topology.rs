//! Keeps drivers on the proxy: the cluster a driver discovers through autoprep is autoprep
//! itself, one node at the advertised address that owns the whole token ring.
//!
//! - **Topology reads.** A QUERY, PREPARE or EXECUTE that selects from `system.local`,
//!   `system.peers` or `system.peers_v2` (whatever its column list or WHERE clause: drivers
//!   send all sorts) is marked on the request side; its Rows answer is rewritten:
//!   - `system.local`: the address columns (`rpc_address`, `broadcast_address`,
//!     `listen_address`, and `native_address` / `native_transport_address` where a server has
//!     them) become the advertised address, the native port columns (`rpc_port`, `native_port`,
//!     `native_transport_port[_ssl]`) the advertised port, `host_id` a UUID derived from the
//!     advertised address (stable whichever node the connection went to), and `tokens` the
//!     first of the node's own tokens: one token, so the driver's ring has exactly one node
//!     owning every range (see [`first_token`] for why not all tokens of all nodes).
//!   - `system.peers`, `system.peers_v2` and ScyllaDB's `system.client_routes`: no rows.
//!     Metadata and paging state are untouched.
//!
//!   Only cell values change; every other byte of the answer is the server's. Compressed v4
//!   bodies are decompressed and compressed again with the same algorithm; v5 envelopes are
//!   re-framed by the writer as usual.
//! - **Events.** TOPOLOGY_CHANGE, STATUS_CHANGE and ScyllaDB's CLIENT_ROUTES_CHANGE events are
//!   about nodes the driver does not know (or the proxied node itself, whose address the
//!   driver never saw): all are dropped. SCHEMA_CHANGE passes.
//! - **SUPPORTED.** ScyllaDB's sharding keys (`SCYLLA_SHARD`, `SCYLLA_NR_SHARDS`,
//!   `SCYLLA_SHARD_AWARE_PORT[_SSL]`, ...) would send shard-aware drivers to the node's
//!   shard-aware port, and tablet routing (`TABLETS_ROUTING_*`) names replicas by host id:
//!   both are removed, so drivers see a node with `enable_shard_aware_drivers: false`. So is
//!   `SCYLLA_USE_METADATA_ID`, which changes the v4 PREPARED and EXECUTE layouts the proxy
//!   reads and writes, and `SCYLLA_HOST_ID` (the node's host id, which recent drivers compare
//!   with the rewritten `system.local`). The other extensions (LWT metadata mark, rate-limit
//!   error, ...) stay.

use crate::metrics::Metrics;
use crate::wire::Wire;
use autoprep_protocol::compression;
use autoprep_protocol::cql::source_table::{may_be_select, selected_table};
use autoprep_protocol::envelope::{Envelope, Flags, Header, Opcode, ProtocolVersion};
use autoprep_protocol::message::prepare::PrepareView;
use autoprep_protocol::message::query::{QueryRequest, QueryView};
use autoprep_protocol::message::result::{ResultView, RowsMetadata};
use autoprep_protocol::message::rows_edit::{drop_rows, edit_cells};
use autoprep_protocol::message::supported::without_options;
use autoprep_protocol::message::{RequestBody, ResponseBody};
use autoprep_protocol::primitives::{read_short_bytes, read_string, write_bytes};
use bytes::Bytes;
use md5::{Digest, Md5};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use tracing::debug;

/// The system tables whose answers are rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SystemTable {
    Local,
    Peers,
    PeersV2,
    /// ScyllaDB's `system.client_routes` (addresses per client route and host id, read by
    /// drivers configured for client routes): answered with no rows, like the peers.
    ClientRoutes,
}

impl SystemTable {
    /// The table `name` in keyspace `system`, if it is one of the rewritten ones.
    fn from_name(name: &str) -> Option<SystemTable> {
        match name {
            "local" => Some(SystemTable::Local),
            "peers" => Some(SystemTable::Peers),
            "peers_v2" => Some(SystemTable::PeersV2),
            "client_routes" => Some(SystemTable::ClientRoutes),
            _ => None,
        }
    }

    /// The table's name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            SystemTable::Local => "system.local",
            SystemTable::Peers => "system.peers",
            SystemTable::PeersV2 => "system.peers_v2",
            SystemTable::ClientRoutes => "system.client_routes",
        }
    }
}

/// A prepared topology read: its table and, for EXECUTEs whose answer carries no metadata
/// (skip_metadata), its result columns as PREPARE reported them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedRead {
    pub table: SystemTable,
    /// Result columns: name and raw type `[option]`.
    pub columns: Vec<(String, Vec<u8>)>,
}

/// A request in flight whose answer this module rewrites or learns from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// A QUERY selecting from the table.
    Query(SystemTable),
    /// A PREPARE of such a SELECT: its id is remembered.
    Prepare(SystemTable),
    /// An EXECUTE of a prepared topology read.
    Execute(Arc<PreparedRead>),
}

/// Most prepared topology reads remembered (drivers prepare a handful, if any).
const MAX_PREPARED: usize = 1024;

/// What the driver is told about "its" node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advertised {
    pub addr: SocketAddr,
    /// `host_id`: an RFC 4122 version-3 (MD5, name-based) UUID of `autoprep:<addr>`.
    pub host_id: [u8; 16],
}

impl Advertised {
    /// The identity advertised at `addr`.
    pub fn new(addr: SocketAddr) -> Advertised {
        let mut id: [u8; 16] = Md5::digest(format!("autoprep:{addr}").as_bytes()).into();
        id[6] = (id[6] & 0x0f) | 0x30;
        id[8] = (id[8] & 0x3f) | 0x80;
        Advertised { addr, host_id: id }
    }
}

/// Topology state shared by all sessions.
#[derive(Debug, Default)]
pub struct Topology {
    /// `--advertise-address`, when given.
    configured: Option<SocketAddr>,
    /// The address advertised: the configured one, or the listener's once bound.
    advertised: OnceLock<Advertised>,
    /// Prepared ids of topology reads.
    prepared: RwLock<HashMap<Bytes, Arc<PreparedRead>>>,
    /// Set once `prepared` holds anything: EXECUTEs are looked at only then.
    any_prepared: AtomicBool,
}

/// A bad `--advertise-address` or `--listen` for advertising.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdvertiseError {
    #[error("--advertise-address {0:?} is not ip, ip:port or [ipv6]:port")]
    Malformed(String),
    #[error("--advertise-address {0} is a wildcard address: give the address clients reach")]
    Wildcard(IpAddr),
}

/// Parses `ip`, `ip:port` or `[ipv6]:port`; a missing port is `default_port`.
fn parse_advertise(s: &str, default_port: u16) -> Result<SocketAddr, AdvertiseError> {
    let bad = || AdvertiseError::Malformed(s.to_owned());
    let addr = if let Ok(a) = s.parse::<SocketAddr>() {
        a
    } else if let Ok(ip) = s
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        SocketAddr::new(ip, default_port)
    } else {
        return Err(bad());
    };
    if addr.ip().is_unspecified() {
        return Err(AdvertiseError::Wildcard(addr.ip()));
    }
    Ok(addr)
}

impl Topology {
    /// Topology state for `listen` and `advertise` (the flags' values). Without an advertise
    /// address, the listen address is advertised (with the port the listener gets, see
    /// [`Topology::bound`]); when that is a wildcard address, each connection advertises the
    /// address its client connected to (see [`Topology::on_response`]).
    pub fn new(listen: &str, advertise: Option<&str>) -> Result<Topology, AdvertiseError> {
        let listen_addr: Option<SocketAddr> = listen.parse().ok();
        let configured = match advertise {
            Some(a) => Some(parse_advertise(a, listen_addr.map_or(9042, |l| l.port()))?),
            None => None,
        };
        let t = Topology {
            configured,
            ..Topology::default()
        };
        if let Some(a) = configured {
            let _ = t.advertised.set(Advertised::new(a));
        }
        Ok(t)
    }

    /// The listener is bound at `local`: advertised, unless an address was configured.
    pub fn bound(&self, local: SocketAddr) {
        if self.configured.is_none() && !local.ip().is_unspecified() {
            let _ = self.advertised.set(Advertised::new(local));
        }
    }

    /// Whether any prepared topology read is known (EXECUTEs are only looked at then).
    pub fn has_prepared(&self) -> bool {
        self.any_prepared.load(Ordering::Relaxed)
    }

    /// What every driver is told, once known: unset when the proxy listens on a wildcard
    /// address without `--advertise-address`.
    pub fn advertised(&self) -> Option<&Advertised> {
        self.advertised.get()
    }

    /// What the driver on a connection whose local end (the address the client connected
    /// to) is `local` is told.
    pub fn advertised_to(&self, local: Option<SocketAddr>) -> Option<Advertised> {
        self.advertised().copied().or_else(|| {
            local
                .filter(|l| !l.ip().is_unspecified())
                .map(Advertised::new)
        })
    }

    /// Whether the request `header`/`body` (already decompressed) reads the topology.
    /// `keyspace` is the connection's (after `USE`).
    pub fn classify(&self, header: &Header, body: &[u8], keyspace: Option<&str>) -> Option<Read> {
        let op = header.opcode;
        if op != Opcode::QUERY && op != Opcode::PREPARE && op != Opcode::EXECUTE {
            return None;
        }
        if op == Opcode::EXECUTE && !self.any_prepared.load(Ordering::Relaxed) {
            return None;
        }
        if op == Opcode::QUERY {
            let q = QueryRequest::parse(header, body).ok()?;
            return self.classify_query(&q.query, keyspace);
        }
        let version = header.version;
        let message = RequestBody::parse(header, body).ok()?.message;
        if op == Opcode::PREPARE {
            let p = PrepareView::parse(message, version).ok()?;
            return table_of(p.query, p.keyspace.or(keyspace)).map(Read::Prepare);
        }
        // Only the id is needed: it comes first.
        let mut m = message;
        let id = read_short_bytes(&mut m).ok()?;
        let prepared = self.prepared.read().unwrap_or_else(|p| p.into_inner());
        prepared.get(id).cloned().map(Read::Execute)
    }

    /// [`Topology::classify`] for a QUERY already parsed.
    pub fn classify_query(&self, q: &QueryView<'_>, keyspace: Option<&str>) -> Option<Read> {
        table_of(q.query, q.params.keyspace.or(keyspace)).map(Read::Query)
    }

    /// The answer to a topology read, as the client gets it. `local` is the address the
    /// client connected to (advertised when no address is configured and the proxy listens on
    /// a wildcard address).
    pub fn on_response(
        &self,
        env: Envelope,
        read: &Read,
        local: Option<SocketAddr>,
        wire: Wire,
        metrics: &Metrics,
    ) -> Envelope {
        if env.header().opcode != Opcode::RESULT {
            return env;
        }
        let (table, columns) = match read {
            Read::Prepare(table) => {
                self.learn_prepared(&env, *table, wire);
                return env;
            }
            Read::Query(table) => (*table, None),
            Read::Execute(p) => (p.table, Some(&p.columns[..])),
        };
        let advertised = self.advertised_to(local);
        let rebuilt = rebuild(&env, wire, |header, message, out| {
            match table {
                SystemTable::Peers | SystemTable::PeersV2 | SystemTable::ClientRoutes => {
                    drop_rows(message, header.version, out).ok()?;
                }
                SystemTable::Local => {
                    let adv = advertised.as_ref()?;
                    rewrite_local(message, header.version, columns, adv, out)?;
                }
            }
            Some(())
        });
        match rebuilt {
            Some(e) => {
                Metrics::inc(&metrics.topology_rewrites);
                debug!(table = table.name(), "topology answer rewritten");
                e
            }
            None => env,
        }
    }

    /// Remembers the id of a PREPARE of a topology read (its answer goes on unchanged).
    fn learn_prepared(&self, env: &Envelope, table: SystemTable, wire: Wire) {
        let Some(body) = wire.body(env) else {
            return;
        };
        let header = env.header();
        let Some(rb) = ResponseBody::parse(header, &body).ok() else {
            return;
        };
        let Ok(ResultView::Prepared(p)) = ResultView::parse(rb.message, header.version) else {
            return;
        };
        let columns = p
            .result
            .columns
            .map(|c| {
                c.iter()
                    .map(|s| (s.name.to_owned(), s.type_raw.to_vec()))
                    .collect()
            })
            .unwrap_or_default();
        let mut prepared = self.prepared.write().unwrap_or_else(|p| p.into_inner());
        if prepared.len() >= MAX_PREPARED && !prepared.contains_key(p.id) {
            return;
        }
        prepared.insert(
            Bytes::copy_from_slice(p.id),
            Arc::new(PreparedRead { table, columns }),
        );
        self.any_prepared.store(true, Ordering::Relaxed);
        debug!(table = table.name(), "prepared topology read remembered");
    }
}

/// The rewritten table `query` reads, if any. Byte tests settle most statements (not a
/// SELECT; no `local` or `peers` anywhere in the text); the rest is lexed up to the table name.
pub fn table_of(query: &[u8], keyspace: Option<&str>) -> Option<SystemTable> {
    if !may_be_select(query) || !mentions_local_or_peers(query) {
        return None;
    }
    let t = selected_table(query)?;
    let ks = match &t.keyspace {
        Some(k) => k.as_ref(),
        None => keyspace?,
    };
    if ks != "system" {
        return None;
    }
    SystemTable::from_name(&t.table)
}

/// `local`, `peers` or `client_routes` occurs in `q`, in any case: a SIMD search for a
/// letter, a compare where it is found (about 80 ns for a 100-byte SELECT; the lexer would
/// take 250).
fn mentions_local_or_peers(q: &[u8]) -> bool {
    let at = |i: usize, word: &[u8]| {
        q.get(i..i + word.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(word))
    };
    memchr::memchr2_iter(b'l', b'L', q).any(|i| at(i, b"local"))
        || memchr::memchr2_iter(b'p', b'P', q).any(|i| at(i, b"peers"))
        || memchr::memchr_iter(b'_', q).any(|i| i >= 6 && at(i - 6, b"client_routes"))
}

/// `needle` (lower-case ASCII) occurs in `hay`, ignoring ASCII case.
fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len()
        && hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// A response envelope with its message replaced by what `f` writes (the body prefix of
/// tracing id, warnings and custom payload kept), compressed again when it was; `None` when
/// the body cannot be read or `f` declines.
fn rebuild(
    env: &Envelope,
    wire: Wire,
    f: impl FnOnce(&Header, &[u8], &mut Vec<u8>) -> Option<()>,
) -> Option<Envelope> {
    let header = *env.header();
    let body = wire.body(env)?;
    let rb = ResponseBody::parse(&header, &body).ok()?;
    let prefix = body.len() - rb.message.len();
    let mut out = Vec::with_capacity(body.len() + 64);
    out.extend_from_slice(&body[..prefix]);
    f(&header, rb.message, &mut out)?;
    if header.flags.has(Flags::COMPRESSION) && header.version < ProtocolVersion::V5 {
        let mut packed = Vec::with_capacity(out.len());
        compression::compress(wire.compression?, &out, &mut packed);
        out = packed;
    }
    Some(Envelope::new(header, &out))
}

/// Type `[option]`s of the columns rewritten in `system.local`.
const INET: &[u8] = &[0x00, 0x10];
const INT: &[u8] = &[0x00, 0x09];
const UUID: &[u8] = &[0x00, 0x0C];
const SET_OF_VARCHAR: &[u8] = &[0x00, 0x22, 0x00, 0x0D];
const SET_OF_ASCII: &[u8] = &[0x00, 0x22, 0x00, 0x01];

/// What becomes of one `system.local` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LocalColumn {
    Keep,
    Address,
    Port,
    HostId,
    Tokens,
}

fn local_column(name: &str, type_raw: &[u8]) -> LocalColumn {
    match name {
        "rpc_address"
        | "broadcast_address"
        | "listen_address"
        | "native_address"
        | "native_transport_address"
            if type_raw == INET =>
        {
            LocalColumn::Address
        }
        "rpc_port" | "native_port" | "native_transport_port" | "native_transport_port_ssl"
            if type_raw == INT =>
        {
            LocalColumn::Port
        }
        "host_id" if type_raw == UUID => LocalColumn::HostId,
        "tokens" if type_raw == SET_OF_VARCHAR || type_raw == SET_OF_ASCII => LocalColumn::Tokens,
        _ => LocalColumn::Keep,
    }
}

/// Writes the `system.local` Rows `message` with the advertised identity. The columns come
/// from the message's metadata, or from `prepared` when it has none.
fn rewrite_local(
    message: &[u8],
    version: ProtocolVersion,
    prepared: Option<&[(String, Vec<u8>)]>,
    adv: &Advertised,
    out: &mut Vec<u8>,
) -> Option<()> {
    // Kind, then the metadata.
    let mut m = message.get(4..)?;
    let meta = RowsMetadata::read(&mut m).ok()?;
    let plan: Vec<LocalColumn> = match (meta.columns, prepared) {
        (Some(c), _) => c.iter().map(|s| local_column(s.name, s.type_raw)).collect(),
        (None, Some(p)) if i32::try_from(p.len()) == Ok(meta.column_count) => {
            p.iter().map(|(n, t)| local_column(n, t)).collect()
        }
        _ => return None,
    };
    let edit: Vec<bool> = plan.iter().map(|c| *c != LocalColumn::Keep).collect();
    if !edit.contains(&true) {
        return None;
    }
    let ip = match adv.addr.ip() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    let port = i32::from(adv.addr.port()).to_be_bytes();
    edit_cells(
        message,
        version,
        &edit,
        |col, cell, out| {
            // Writes of values this small cannot fail.
            let _ = match plan[col] {
                LocalColumn::Address => write_bytes(out, Some(&ip)),
                LocalColumn::Port => write_bytes(out, Some(&port)),
                LocalColumn::HostId => write_bytes(out, Some(&adv.host_id)),
                LocalColumn::Tokens => write_bytes(out, cell.map(first_token).as_deref()),
                LocalColumn::Keep => write_bytes(out, cell),
            };
        },
        out,
    )
    .ok()?;
    Some(())
}

/// The `tokens` set reduced to its first element.
///
/// Design justification: with no peers, the driver's ring holds one node, which owns every
/// range whatever its tokens, so token-aware routing sends everything to the proxy either way.
/// But drivers compute replicas per token by walking the ring until they find RF distinct
/// nodes, and with one node (fewer than RF) every walk goes round the whole ring: quadratic in
/// the number of tokens (Python's SimpleStrategy, for one). The union of all nodes' tokens
/// (100 nodes of 256 vnodes: 25,600 tokens, 6.5e8 steps per keyspace) would be the worst
/// choice; the node's own 256 tokens still cost 65,536 steps per keyspace; one token costs one.
/// One of the node's own tokens is always valid for the cluster's partitioner.
///
/// A set is `[int n]` then n `[bytes]`; a set that cannot be read is kept as it is.
fn first_token(cell: &[u8]) -> Vec<u8> {
    let read = || -> Option<&[u8]> {
        let n = i32::from_be_bytes(cell.get(..4)?.try_into().ok()?);
        if n < 1 {
            return None;
        }
        let len = usize::try_from(i32::from_be_bytes(cell.get(4..8)?.try_into().ok()?)).ok()?;
        cell.get(8..8 + len)
    };
    match read() {
        Some(first) => {
            let mut out = Vec::with_capacity(8 + first.len());
            out.extend_from_slice(&1i32.to_be_bytes());
            let _ = write_bytes(&mut out, Some(first));
            out
        }
        None => cell.to_vec(),
    }
}

/// Whether an EVENT reaches the client: SCHEMA_CHANGE does, TOPOLOGY_CHANGE and STATUS_CHANGE
/// do not (an unreadable event passes, as the server sent it).
pub fn keep_event(env: &Envelope, wire: Wire) -> bool {
    if env.header().opcode != Opcode::EVENT {
        return true;
    }
    let Some(body) = wire.body(env) else {
        return true;
    };
    let Ok(rb) = ResponseBody::parse(env.header(), &body) else {
        return true;
    };
    let mut m = rb.message;
    let kind = read_string(&mut m).unwrap_or("");
    // ScyllaDB's CLIENT_ROUTES_CHANGE names host ids of nodes the driver does not know.
    !matches!(
        kind,
        "TOPOLOGY_CHANGE" | "STATUS_CHANGE" | "CLIENT_ROUTES_CHANGE"
    )
}

/// SUPPORTED keys that would lead a driver around the proxy, or change the v4 message layouts
/// the proxy reads: ScyllaDB's sharding information and shard-aware ports, tablet routing,
/// and the metadata-id extension.
pub fn is_removed_supported_key(key: &str) -> bool {
    matches!(
        key,
        "SCYLLA_SHARD"
            | "SCYLLA_NR_SHARDS"
            | "SCYLLA_PARTITIONER"
            | "SCYLLA_SHARDING_ALGORITHM"
            | "SCYLLA_SHARDING_IGNORE_MSB"
            | "SCYLLA_SHARD_AWARE_PORT"
            | "SCYLLA_SHARD_AWARE_PORT_SSL"
            | "SCYLLA_USE_METADATA_ID"
            // The node's host id, which drivers compare with `system.local`'s (rewritten).
            | "SCYLLA_HOST_ID"
    ) || key.starts_with("TABLETS_ROUTING")
}

/// Whether a SUPPORTED answer (never compressed: it comes before STARTUP) announces
/// ScyllaDB, which adds `SCYLLA_*` options to it.
pub fn announces_scylla(env: &Envelope) -> bool {
    env.header().opcode == Opcode::SUPPORTED && contains_ignore_case(env.body(), b"scylla_")
}

/// A SUPPORTED answer without the keys of [`is_removed_supported_key`].
pub fn supported(env: Envelope, wire: Wire) -> Envelope {
    if env.header().opcode != Opcode::SUPPORTED {
        return env;
    }
    // Cassandra's answer has none of these keys: do not rebuild it.
    let body = env.body();
    let h = env.header();
    let compressed = h.flags.has(Flags::COMPRESSION) && h.version < ProtocolVersion::V5;
    if !compressed
        && !contains_ignore_case(body, b"scylla_")
        && !contains_ignore_case(body, b"tablets_")
    {
        return env;
    }
    rebuild(&env, wire, |_, message, out| {
        let kept = without_options(message, is_removed_supported_key).ok()??;
        out.extend_from_slice(&kept);
        Some(())
    })
    .unwrap_or(env)
}

#[cfg(test)]
mod tests;
