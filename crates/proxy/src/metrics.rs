//! Process-wide counters, and their rendering in the Prometheus text exposition format
//! (version 0.0.4) for the admin server's `/metrics`. Labels are bounded: opcodes by spec name,
//! pass-through reasons from fixed strings. Never a literal or bound value.
//!
//! Design justification: the counters are plain atomics bumped on the data path, and the text
//! format is written by hand from a snapshot at scrape time. A metrics library would put its
//! own locks (prometheus-client's histogram takes a lock per observation) and registry types
//! on the data path for a format that is a few lines of `write!`.

use crate::control::Group;
use crate::reasons::ReasonCounts;
use crate::stamp::Stamp;
use crate::streams::Tag;
use autoprep_cache::CacheStats;
use autoprep_protocol::envelope::Opcode;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The counters of one proxy process.
#[derive(Debug, Default)]
pub struct Metrics {
    pub client_connections: AtomicU64,
    pub connections_total: AtomicU64,
    /// Client connections refused because `max_client_connections` were open.
    pub connections_refused: AtomicU64,
    /// Requests from clients, by opcode byte.
    requests: [AtomicU64; 17],
    requests_other: AtomicU64,
    pub queries_rewritten: AtomicU64,
    passthrough: ReasonCounts,
    /// EXECUTEs sent to a replica (the common case: an atomic).
    routed_replica: AtomicU64,
    /// EXECUTEs that went home because the home node is the replica chosen (common: an
    /// atomic, like `routed_replica`).
    routed_home_replica: AtomicU64,
    /// EXECUTEs that went home for another reason.
    routed_home: ReasonCounts,
    /// Routed requests per replica node (bounded by the cluster's size): read-locked to count.
    routed_nodes: std::sync::RwLock<BTreeMap<std::net::SocketAddr, Arc<AtomicU64>>>,
    /// Client connections homed on each node, by its address.
    home_nodes: std::sync::RwLock<BTreeMap<std::net::SocketAddr, Arc<AtomicU64>>>,
    pub prepares_ok: AtomicU64,
    pub prepares_failed: AtomicU64,
    /// Answers to the proxy's PREPAREs not used: not proven to describe the statement meant
    /// (see [`crate::prepare_proof`]).
    pub prepares_unproven: AtomicU64,
    /// Schema changes seen (answers to DDL, SCHEMA_CHANGE events) that dropped prepared shapes.
    pub schema_invalidations: AtomicU64,
    /// Client `USE` requests held until the proxy's own PREPAREs on the connection were
    /// answered (see `session::Conn::hold_use`).
    pub uses_held: AtomicU64,
    pub unprepared_recoveries: AtomicU64,
    /// Topology answers (`system.local`, `system.peers[_v2]`) rewritten.
    pub topology_rewrites: AtomicU64,
    /// TOPOLOGY_CHANGE and STATUS_CHANGE events kept from clients.
    pub events_dropped: AtomicU64,
    /// Upstream connection attempts a contact point refused or let time out.
    pub upstream_connect_failures: AtomicU64,
    /// Client connections moved to a new home after theirs failed (see `session::rehome`).
    pub home_rehomed: AtomicU64,
    /// Client connections closed because their home failed and no other node could be reached.
    pub home_rehome_failed: AtomicU64,
    /// Client connections a drain handed over to the next process (see `crate::handover`),
    /// and those it closed (no hand-over, or none possible for them).
    pub drain_handed_over: AtomicU64,
    pub drain_closed: AtomicU64,
    /// Client connections taken over from a draining process: served, or closed because no
    /// home could be opened for them.
    pub handover_adopted: AtomicU64,
    pub handover_adopt_failed: AtomicU64,
    /// Statements clients prepared, learned from a draining process before its connections
    /// (see `handover::send_statements`).
    pub handover_statements: AtomicU64,
    /// Requests in flight on a home connection that failed: answered Overloaded (they may
    /// have run), and sent again to the new home (requests that may repeat, and requests the
    /// node never had).
    pub home_in_flight_overloaded: AtomicU64,
    pub home_in_flight_resent: AtomicU64,
    /// Requests in flight on a replica connection that ended: answered Overloaded (they may
    /// have run), and sent home again (requests that may repeat).
    pub replica_in_flight_overloaded: AtomicU64,
    pub replica_in_flight_resent: AtomicU64,
    pub bytes_from_clients: AtomicU64,
    /// Shared with the client writer tasks, which count what they write.
    pub bytes_to_clients: Arc<AtomicU64>,
    /// From a request taking its upstream stream id to its response going to the client writer.
    pub request_duration: Histogram,
    /// The same, for QUERYs sent as EXECUTE and for control executions of ready shapes sent as
    /// they were (see [`crate::control`]).
    response_rewritten: Histogram,
    response_control: Histogram,
    /// TLS material put in use after its files changed or on SIGHUP.
    pub tls_reloads_ok: AtomicU64,
    /// TLS files that changed but could not be used (the previous material stayed in use).
    pub tls_reloads_error: AtomicU64,
    /// Client PREPAREs of statements with literals inline answered from their shape, and
    /// those passed through by why (see [`crate::rewrite::literal_prepare`]).
    literal_prepares_answered: AtomicU64,
    literal_prepares_passed: ReasonCounts,
    /// EXECUTEs (and BATCH children) of such statements run as the shape, and those sent as
    /// they were by why.
    literal_executes_rewritten: AtomicU64,
    literal_executes_passed: ReasonCounts,
    /// PREPAREs of a client's own statement with literals inline the proxy sent, so that the
    /// server knows the id before a request that could not run as the shape.
    pub literal_materialized: AtomicU64,
}

/// The end of validity (seconds since the Unix epoch) of the certificate the proxy presents on
/// each side, where it presents one: read from the material in use at scrape time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TlsExpiry {
    pub client: Option<u64>,
    pub upstream: Option<u64>,
}

/// The `reason` of `autoprep_routed_total{to="home"}` when the replica chosen is the client
/// connection's own node.
pub const HOME_IS_THE_REPLICA: &str = "home is the replica";

/// A point-in-time view of the map of statements prepared with literals inline (see
/// [`crate::rewrite::literal_prepare`]), for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiteralStats {
    pub entries: usize,
    pub bytes: usize,
    pub evicted: u64,
}

impl Metrics {
    /// Counts a client request by opcode.
    pub fn request(&self, opcode: u8) {
        self.requests_of(opcode, 1);
    }

    /// Counts `n` client requests of one opcode (a batch passed through at once).
    pub fn requests_of(&self, opcode: u8, n: u64) {
        match self.requests.get(usize::from(opcode)) {
            Some(c) => c.fetch_add(n, Ordering::Relaxed),
            None => self.requests_other.fetch_add(n, Ordering::Relaxed),
        };
    }

    /// Requests by opcode byte (0..=16), then all others.
    pub fn requests(&self) -> (Vec<(u8, u64)>, u64) {
        let v = self
            .requests
            .iter()
            .enumerate()
            .map(|(i, c)| (i as u8, c.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        (v, self.requests_other.load(Ordering::Relaxed))
    }

    /// Counts a QUERY that went to the server unchanged, and why.
    pub fn passthrough(&self, reason: &'static str) {
        self.passthrough.count(reason);
    }

    /// Counts a client PREPARE of a statement with literals inline: answered from its shape
    /// (`Ok`) or passed through for a reason.
    pub fn literal_prepare(&self, outcome: Result<(), &'static str>) {
        match outcome {
            Ok(()) => Self::inc(&self.literal_prepares_answered),
            Err(reason) => self.literal_prepares_passed.count(reason),
        }
    }

    /// Counts an EXECUTE (or BATCH child) of a statement prepared with literals inline: run as
    /// its shape (`Ok`) or sent as it was for a reason.
    pub fn literal_execute(&self, outcome: Result<(), &'static str>) {
        match outcome {
            Ok(()) => Self::inc(&self.literal_executes_rewritten),
            Err(reason) => self.literal_executes_passed.count(reason),
        }
    }

    /// An EXECUTE with a partition key went home (its client connection's node) for `reason`.
    pub fn routed_home(&self, reason: &'static str) {
        if reason == HOME_IS_THE_REPLICA {
            self.routed_home_replica.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.routed_home.count(reason);
    }

    /// An EXECUTE went to the replica `node`.
    pub fn routed_to(&self, node: std::net::SocketAddr) {
        self.routed_replica.fetch_add(1, Ordering::Relaxed);
        count_node(&self.routed_nodes, node);
    }

    /// A client connection was homed on `node`.
    pub fn homed_on(&self, node: std::net::SocketAddr) {
        count_node(&self.home_nodes, node);
    }

    /// Pass-through counts by reason.
    pub fn passthrough_reasons(&self) -> Vec<(&'static str, u64)> {
        self.passthrough.counts()
    }

    /// Adds one to a counter.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// A response is going to the client: observes how long its request took, overall and for
    /// its statement shape.
    pub fn responded(&self, tag: Tag) {
        self.responded_at(tag, Stamp::now());
    }

    /// [`Metrics::responded`] for a response read at `now` (a reader reads the clock once for
    /// every response one read brought).
    pub fn responded_at(&self, tag: Tag, now: Stamp) {
        let Some(started) = tag.started else { return };
        let nanos = now.nanos_since(started);
        self.request_duration.observe_nanos(nanos);
        let took = Duration::from_nanos(nanos);
        match tag.group {
            Group::Rewritten => self.response_rewritten.observe(took),
            Group::Control => self.response_control.observe(took),
            Group::Other => {}
        }
        if let Some(shape) = tag.shape {
            shape.observe_latency(took);
            shape.observe_group(tag.group, took);
        }
    }

    /// Writes every metric in the Prometheus text format. `cache` is a snapshot of the prepared
    /// cache; `shapes` is how many statement shapes `/shapes` tracks now.
    pub fn encode(&self, cache: &CacheStats, shapes: usize, out: &mut String) {
        let mut e = Encoder(out);
        self.encode_connections(&mut e);
        self.encode_requests(&mut e);
        self.encode_routing(&mut e);
        self.encode_prepares(&mut e);
        Self::encode_cache(cache, shapes, &mut e);
        self.encode_traffic(&mut e);
    }

    /// Client connections: open, accepted, refused.
    fn encode_connections(&self, e: &mut Encoder<'_>) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        e.head(
            "autoprep_client_connections",
            "gauge",
            "Client connections open now.",
        );
        e.sample(
            "autoprep_client_connections",
            &[],
            load(&self.client_connections),
        );
        e.head(
            "autoprep_client_connections_total",
            "counter",
            "Client connections accepted.",
        );
        e.sample(
            "autoprep_client_connections_total",
            &[],
            load(&self.connections_total),
        );
        e.head(
            "autoprep_connections_refused_total",
            "counter",
            "Client connections refused because max_client_connections were open.",
        );
        e.sample(
            "autoprep_connections_refused_total",
            &[],
            load(&self.connections_refused),
        );
        e.head(
            "autoprep_drain_connections_total",
            "counter",
            "Client connections the drain ended, by outcome: handed over to the next process at a request boundary, the TCP connection kept (handed_over), or closed (closed: no hand-over socket or no process there, a TLS connection, or requests not all answered within the grace period).",
        );
        e.sample(
            "autoprep_drain_connections_total",
            &[("outcome", "handed_over")],
            load(&self.drain_handed_over),
        );
        e.sample(
            "autoprep_drain_connections_total",
            &[("outcome", "closed")],
            load(&self.drain_closed),
        );
        e.head(
            "autoprep_handover_adopted_total",
            "counter",
            "Client connections taken over from a draining process, by outcome: served from a new home (adopted), or closed because no node could be reached or the handshake could not be replayed (closed).",
        );
        e.sample(
            "autoprep_handover_adopted_total",
            &[("outcome", "adopted")],
            load(&self.handover_adopted),
        );
        e.sample(
            "autoprep_handover_adopted_total",
            &[("outcome", "closed")],
            load(&self.handover_adopt_failed),
        );
        e.head(
            "autoprep_handover_statements_total",
            "counter",
            "Statements clients prepared that a draining process passed on before its connections (routing knows them here without the drivers preparing them again).",
        );
        e.sample(
            "autoprep_handover_statements_total",
            &[],
            load(&self.handover_statements),
        );
    }

    /// Requests by opcode, and QUERYs by outcome.
    fn encode_requests(&self, e: &mut Encoder<'_>) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        // Opcodes outside the table and opcode 4 (unused) share the name UNKNOWN: one series.
        let (by_opcode, other) = self.requests();
        let mut requests: BTreeMap<&'static str, u64> = BTreeMap::new();
        for (op, n) in by_opcode {
            *requests.entry(Opcode(op).name()).or_default() += n;
        }
        if other > 0 {
            *requests.entry("UNKNOWN").or_default() += other;
        }
        e.head(
            "autoprep_requests_total",
            "counter",
            "Client requests, by opcode.",
        );
        for (op, n) in requests {
            e.sample("autoprep_requests_total", &[("opcode", op)], n);
        }

        e.head(
            "autoprep_queries_total",
            "counter",
            "QUERY requests: rewritten into an EXECUTE, or passed through unchanged (with why).",
        );
        e.sample(
            "autoprep_queries_total",
            &[("outcome", "rewritten"), ("reason", "")],
            load(&self.queries_rewritten),
        );
        for (reason, n) in self.passthrough_reasons() {
            e.sample(
                "autoprep_queries_total",
                &[("outcome", "passthrough"), ("reason", reason)],
                n,
            );
        }
    }

    /// Where EXECUTEs with a partition key went, and the nodes routed to and homed on.
    fn encode_routing(&self, e: &mut Encoder<'_>) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        e.head(
            "autoprep_routed_total",
            "counter",
            "EXECUTEs with a partition key (rewritten QUERYs, and the client's own prepared statements), by where they went: to a replica that owns the partition, or home (the client connection's upstream node) with why.",
        );
        e.sample(
            "autoprep_routed_total",
            &[("to", "replica"), ("reason", "")],
            load(&self.routed_replica),
        );
        let home: Vec<_> = {
            let mut v = self.routed_home.counts();
            let n = load(&self.routed_home_replica);
            if n > 0 {
                v.push((HOME_IS_THE_REPLICA, n));
                v.sort();
            }
            v
        };
        for (reason, n) in home {
            e.sample(
                "autoprep_routed_total",
                &[("to", "home"), ("reason", reason)],
                n,
            );
        }
        e.head(
            "autoprep_routed_requests_total",
            "counter",
            "Requests sent to each replica node over the clients' replica connections.",
        );
        for (node, n) in node_counts(&self.routed_nodes) {
            e.sample("autoprep_routed_requests_total", &[("node", &node)], n);
        }
        e.head(
            "autoprep_home_connections_total",
            "counter",
            "Client connections homed on each node (their upstream connection): with routing, on contact points of the local datacenter only (see autoprep_routing_local_datacenter).",
        );
        for (node, n) in node_counts(&self.home_nodes) {
            e.sample("autoprep_home_connections_total", &[("node", &node)], n);
        }
        e.head(
            "autoprep_home_rehomed_total",
            "counter",
            "Client connections whose home connection failed (the node died, restarted or closed it), by outcome: moved to a new home on another node, the client connection kept open (rehomed), or closed because no other node could be reached (closed).",
        );
        e.sample(
            "autoprep_home_rehomed_total",
            &[("outcome", "rehomed")],
            load(&self.home_rehomed),
        );
        e.sample(
            "autoprep_home_rehomed_total",
            &[("outcome", "closed")],
            load(&self.home_rehome_failed),
        );
        e.head(
            "autoprep_home_in_flight_total",
            "counter",
            "Client requests in flight on a home connection that failed, by what became of them: answered Overloaded since they may have run (overloaded), or sent again to the new home (resent: requests that may repeat, being idempotent by their form or conditional and otherwise so, and requests the failed node never had).",
        );
        e.sample(
            "autoprep_home_in_flight_total",
            &[("outcome", "overloaded")],
            load(&self.home_in_flight_overloaded),
        );
        e.sample(
            "autoprep_home_in_flight_total",
            &[("outcome", "resent")],
            load(&self.home_in_flight_resent),
        );
        e.head(
            "autoprep_replica_in_flight_total",
            "counter",
            "Client requests in flight on a replica connection that ended, by what became of them: answered Overloaded since they may have run (overloaded), or sent home again (resent: requests that may repeat, being idempotent by their form or conditional and otherwise so).",
        );
        e.sample(
            "autoprep_replica_in_flight_total",
            &[("outcome", "overloaded")],
            load(&self.replica_in_flight_overloaded),
        );
        e.sample(
            "autoprep_replica_in_flight_total",
            &[("outcome", "resent")],
            load(&self.replica_in_flight_resent),
        );
    }

    /// The proxy's own PREPAREs, and what made it drop, hold or replay requests.
    fn encode_prepares(&self, e: &mut Encoder<'_>) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        e.head(
            "autoprep_prepares_total",
            "counter",
            "PREPAREs the proxy sent on its own, by result.",
        );
        e.sample(
            "autoprep_prepares_total",
            &[("result", "ok")],
            load(&self.prepares_ok),
        );
        e.sample(
            "autoprep_prepares_total",
            &[("result", "failed")],
            load(&self.prepares_failed),
        );
        e.sample(
            "autoprep_prepares_total",
            &[("result", "unproven")],
            load(&self.prepares_unproven),
        );
        e.head(
            "autoprep_uses_held_total",
            "counter",
            "Client USE requests held until the proxy's own PREPAREs on that connection were answered (protocol v4: the server resolves a PREPARE's keyspace twice, and a USE between would file it under the other keyspace's id).",
        );
        e.sample("autoprep_uses_held_total", &[], load(&self.uses_held));
        e.head(
            "autoprep_schema_invalidations_total",
            "counter",
            "Prepared shapes dropped because a schema change of their keyspace or table was seen.",
        );
        e.sample(
            "autoprep_schema_invalidations_total",
            &[],
            load(&self.schema_invalidations),
        );
        e.head(
            "autoprep_unprepared_recoveries_total",
            "counter",
            "UNPREPARED answers to rewritten statements, replayed as the original QUERY.",
        );
        e.sample(
            "autoprep_unprepared_recoveries_total",
            &[],
            load(&self.unprepared_recoveries),
        );
        e.head(
            "autoprep_topology_rewrites_total",
            "counter",
            "Answers to system.local / system.peers / system.peers_v2 rewritten to show the proxy as the cluster.",
        );
        e.sample(
            "autoprep_topology_rewrites_total",
            &[],
            load(&self.topology_rewrites),
        );
        e.head(
            "autoprep_events_dropped_total",
            "counter",
            "TOPOLOGY_CHANGE and STATUS_CHANGE events not passed to clients.",
        );
        e.sample(
            "autoprep_events_dropped_total",
            &[],
            load(&self.events_dropped),
        );
        e.head(
            "autoprep_upstream_connect_failures_total",
            "counter",
            "Connections to an upstream contact point refused or timed out (the next node is tried).",
        );
        e.sample(
            "autoprep_upstream_connect_failures_total",
            &[],
            load(&self.upstream_connect_failures),
        );
    }

    /// The prepared cache (`cache`) and the shapes tracked (`shapes`).
    fn encode_cache(cache: &CacheStats, shapes: usize, e: &mut Encoder<'_>) {
        e.head(
            "autoprep_cache_entries",
            "gauge",
            "Prepared statements in the proxy's cache.",
        );
        e.sample("autoprep_cache_entries", &[], cache.entries as u64);
        e.head(
            "autoprep_cache_bytes",
            "gauge",
            "Approximate size of the prepared cache.",
        );
        e.sample("autoprep_cache_bytes", &[], cache.bytes as u64);
        e.head(
            "autoprep_cache_negative_entries",
            "gauge",
            "Shapes known not to prepare, passed through until their entry expires.",
        );
        e.sample(
            "autoprep_cache_negative_entries",
            &[],
            cache.negative_entries as u64,
        );
        e.head(
            "autoprep_cache_lookups_total",
            "counter",
            "Prepared cache lookups, by result.",
        );
        e.sample(
            "autoprep_cache_lookups_total",
            &[("result", "hit")],
            cache.hits,
        );
        e.sample(
            "autoprep_cache_lookups_total",
            &[("result", "miss")],
            cache.misses,
        );
        e.head(
            "autoprep_cache_evictions_total",
            "counter",
            "Prepared statements evicted from the proxy's cache to stay within its limits.",
        );
        e.sample("autoprep_cache_evictions_total", &[], cache.evictions);
        e.head(
            "autoprep_cache_invalidations_total",
            "counter",
            "Prepared statements forgotten because the server no longer knew them.",
        );
        e.sample(
            "autoprep_cache_invalidations_total",
            &[],
            cache.invalidations,
        );
        e.head(
            "autoprep_cache_adopted_total",
            "counter",
            "Shapes recorded as prepared on a node from another node's entry, the node known to hold its id: PREPAREs not sent.",
        );
        e.sample("autoprep_cache_adopted_total", &[], cache.adopted);

        e.head(
            "autoprep_shapes_tracked",
            "gauge",
            "Statement shapes with statistics in /shapes.",
        );
        e.sample("autoprep_shapes_tracked", &[], shapes as u64);
    }

    /// Bytes each way, and the request-duration histogram.
    fn encode_traffic(&self, e: &mut Encoder<'_>) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        e.head(
            "autoprep_received_bytes_total",
            "counter",
            "Bytes read from client connections.",
        );
        e.sample(
            "autoprep_received_bytes_total",
            &[],
            load(&self.bytes_from_clients),
        );
        e.head(
            "autoprep_sent_bytes_total",
            "counter",
            "Bytes written to client connections.",
        );
        e.sample(
            "autoprep_sent_bytes_total",
            &[],
            load(&self.bytes_to_clients),
        );

        e.head(
            "autoprep_request_duration_seconds",
            "histogram",
            "Time from a request taking its upstream stream id to its response being handed to the client writer.",
        );
        self.request_duration
            .encode("autoprep_request_duration_seconds", &[], e);
    }

    /// Writes the metrics of the statements clients prepared with literals inline (see
    /// [`crate::rewrite::literal_prepare`]); `map` is a snapshot of their map.
    pub fn encode_literals(&self, map: LiteralStats, out: &mut String) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut e = Encoder(out);
        for (name, help, ok, answered, passed) in [
            (
                "autoprep_literal_prepares_total",
                "Client PREPAREs of statements with literals inline: answered from the statement's shape, or passed through to the server (with why).",
                "answered",
                &self.literal_prepares_answered,
                &self.literal_prepares_passed,
            ),
            (
                "autoprep_literal_executes_total",
                "EXECUTEs and BATCH children of statements prepared with literals inline: run as an EXECUTE of the shape, or sent as they were (with why; the server then answers UNPREPARED and the driver prepares again).",
                "rewritten",
                &self.literal_executes_rewritten,
                &self.literal_executes_passed,
            ),
        ] {
            e.head(name, "counter", help);
            e.sample(name, &[("outcome", ok), ("reason", "")], load(answered));
            for (reason, n) in passed.counts() {
                e.sample(name, &[("outcome", "passed"), ("reason", reason)], n);
            }
        }
        e.single(
            "autoprep_literal_server_prepares_total",
            "counter",
            "PREPAREs of a client's statement with literals inline the proxy sent to the server itself, before a request naming its id that could not run as the shape (so the server knows the id).",
            load(&self.literal_materialized),
        );
        e.single(
            "autoprep_literal_statements",
            "gauge",
            "Statements prepared with literals inline the proxy answered for and still holds.",
            map.entries as u64,
        );
        e.single(
            "autoprep_literal_statements_bytes",
            "gauge",
            "Approximate size of those statements (bounded by literal_statements_bytes).",
            map.bytes as u64,
        );
        e.single(
            "autoprep_literal_statements_evicted_total",
            "counter",
            "Statements prepared with literals inline forgotten to stay within literal_statements_bytes.",
            map.evicted,
        );
    }

    /// Writes the control group's metrics: the fraction in use, the response times of both
    /// groups (see [`crate::control`]), and `latency_saved`, the response-time difference times
    /// the rewritten executions ([`crate::shapes::Shapes::response_time_saved`]).
    pub fn encode_control(&self, fraction: f64, latency_saved: f64, out: &mut String) {
        let mut e = Encoder(out);
        e.head(
            "autoprep_control_fraction",
            "gauge",
            "The share of time (switchback windows) in which every rewritable QUERY is sent as the application's original QUERY (the control group).",
        );
        e.sample_f64("autoprep_control_fraction", &[], fraction);
        e.head(
            "autoprep_server_response_seconds",
            "histogram",
            "Response time of QUERYs sent as EXECUTE of their shape (group=rewritten) and of control executions of ready shapes sent as the application's QUERY (group=control), from sending the request to its answer.",
        );
        self.response_rewritten.encode(
            "autoprep_server_response_seconds",
            &[("group", "rewritten")],
            &mut e,
        );
        self.response_control.encode(
            "autoprep_server_response_seconds",
            &[("group", "control")],
            &mut e,
        );
        e.head(
            "autoprep_response_time_saved_seconds_total",
            "gauge",
            "Latency, not CPU: per tracked shape, mean control response time minus mean rewritten response time, times the QUERYs sent as EXECUTE (shapes with at least 5 samples in each group). Queueing is part of it; the server CPU saved is autoprep_server_cpu_saved_seconds_total.",
        );
        e.sample_f64(
            "autoprep_response_time_saved_seconds_total",
            &[],
            latency_saved,
        );
    }

    /// Writes the estimate of server CPU saved (see [`crate::saving`]); a figure not yet
    /// measured is NaN, never a guess.
    pub fn encode_saving(r: &crate::saving::Report, out: &mut String) {
        let mut e = Encoder(out);
        Self::encode_saving_estimate(r, &mut e);
        Self::encode_saving_inputs(r, &mut e);
    }

    /// The estimate: saved, its interval, per request, net, time to precision.
    fn encode_saving_estimate(r: &crate::saving::Report, e: &mut Encoder<'_>) {
        let (saved, low, high) = r.saved().unwrap_or((f64::NAN, f64::NAN, f64::NAN));
        e.head(
            "autoprep_server_cpu_saved_seconds_total",
            "gauge",
            "CPU seconds the cluster did not spend because autoprep rewrote QUERYs as EXECUTEs: the saving per rewritten QUERY measured from the nodes' CPU in switchback windows (--server-metrics-url), times the QUERYs rewritten. A gauge: revised as the measurement improves. NaN until measured.",
        );
        e.sample_f64("autoprep_server_cpu_saved_seconds_total", &[], saved);
        e.head(
            "autoprep_server_cpu_saved_interval_seconds",
            "gauge",
            "The 95 % interval of autoprep_server_cpu_saved_seconds_total (over the trials, each a control episode against the windows around it).",
        );
        e.sample_f64(
            "autoprep_server_cpu_saved_interval_seconds",
            &[("bound", "low")],
            low,
        );
        e.sample_f64(
            "autoprep_server_cpu_saved_interval_seconds",
            &[("bound", "high")],
            high,
        );
        let est = r.estimate;
        let per =
            |f: fn(&crate::saving::estimate::Estimate) -> f64| est.as_ref().map_or(f64::NAN, f);
        e.head(
            "autoprep_server_cpu_per_request_seconds",
            "gauge",
            "The nodes' CPU per rewritable QUERY, in control windows (arm=control: sent as the application's QUERY) and in the rewritten windows around them (arm=rewritten), means over the trials.",
        );
        e.sample_f64(
            "autoprep_server_cpu_per_request_seconds",
            &[("arm", "control")],
            per(|e| e.server_control),
        );
        e.sample_f64(
            "autoprep_server_cpu_per_request_seconds",
            &[("arm", "rewritten")],
            per(|e| e.server_rewritten),
        );
        e.head(
            "autoprep_own_cpu_per_request_seconds",
            "gauge",
            "autoprep's own CPU per rewritable QUERY, in control windows and in the rewritten windows around them (what rewriting costs the sidecar is their difference).",
        );
        e.sample_f64(
            "autoprep_own_cpu_per_request_seconds",
            &[("arm", "control")],
            per(|e| e.own_control),
        );
        e.sample_f64(
            "autoprep_own_cpu_per_request_seconds",
            &[("arm", "rewritten")],
            per(|e| e.own_rewritten),
        );
        e.head(
            "autoprep_server_cpu_net_saved_seconds",
            "gauge",
            "autoprep_server_cpu_saved_seconds_total less autoprep's own CPU since it started (process_cpu_seconds_total): what the deployment saves in all.",
        );
        e.sample_f64(
            "autoprep_server_cpu_net_saved_seconds",
            &[],
            r.net().unwrap_or(f64::NAN),
        );
        e.head(
            "autoprep_server_cpu_estimate_seconds_to_precision",
            "gauge",
            "How many more seconds of traffic like the last, at the current pace of trials, until the 95 % interval is within +-10 % of the estimate (0 once it is).",
        );
        e.sample_f64(
            "autoprep_server_cpu_estimate_seconds_to_precision",
            &[],
            est.and_then(|e| e.seconds_to_tenth).unwrap_or(f64::NAN),
        );
    }

    /// What the estimate rests on: trials, rewritable QUERYs, the nodes' metrics endpoints
    /// and their errors, autoprep's own CPU.
    fn encode_saving_inputs(r: &crate::saving::Report, e: &mut Encoder<'_>) {
        e.head(
            "autoprep_server_cpu_trials_total",
            "counter",
            "Control episodes: used as trials of the estimate, or dropped, by why.",
        );
        e.sample(
            "autoprep_server_cpu_trials_total",
            &[("outcome", "used")],
            r.trials_used,
        );
        for (why, n) in crate::saving::estimate::Dropped::ALL
            .iter()
            .zip(r.trials_dropped)
        {
            e.sample(
                "autoprep_server_cpu_trials_total",
                &[("outcome", why.label())],
                n,
            );
        }
        e.head(
            "autoprep_rewritable_queries_total",
            "counter",
            "QUERYs of ready shapes: sent as EXECUTE (arm=rewritten), or as they came in control windows (arm=control).",
        );
        e.sample(
            "autoprep_rewritable_queries_total",
            &[("arm", "rewritten")],
            r.rewritten,
        );
        e.sample(
            "autoprep_rewritable_queries_total",
            &[("arm", "control")],
            r.control,
        );
        e.single(
            "autoprep_server_metrics_endpoints",
            "gauge",
            "The nodes' metrics endpoints read for the estimate (0: --server-metrics-url not set).",
            r.endpoints as u64,
        );
        e.single(
            "autoprep_server_metrics_failing",
            "gauge",
            "Of those, how many failed at their last reading (each logged once when it starts failing).",
            r.failing as u64,
        );
        e.head(
            "autoprep_server_metrics_errors_total",
            "counter",
            "Failed readings of a node's metrics endpoint, by kind: unreachable, timeout (half a window after the edge), too large, http, not an exposition, no cpu series. A failed reading leaves its windows out of the estimate.",
        );
        for kind in [
            "unreachable",
            "timeout",
            "too large",
            "http",
            "not an exposition",
            "no cpu series",
        ] {
            e.sample(
                "autoprep_server_metrics_errors_total",
                &[("reason", kind)],
                r.errors.get(kind).copied().unwrap_or(0),
            );
        }
        e.head(
            "process_cpu_seconds_total",
            "counter",
            "autoprep's own CPU time (user + system), seconds.",
        );
        e.sample_f64(
            "process_cpu_seconds_total",
            &[],
            r.own_cpu.unwrap_or(f64::NAN),
        );
    }

    /// Writes `autoprep_shape_request_duration_seconds`: the response times of the most
    /// executed shapes (`top`: each by its id, as `/shapes` shows it) and of every other tracked
    /// shape as one series (`shape="other"`), so that the series stay bounded whatever the
    /// application runs. Each `le` bucket counts the shape's log-linear buckets whose middle is
    /// at or below the bound (see [`crate::latency`]).
    pub fn encode_shape_latency(
        top: &[(String, crate::latency::Snapshot)],
        other: &crate::latency::Snapshot,
        out: &mut String,
    ) {
        const NAME: &str = "autoprep_shape_request_duration_seconds";
        let mut e = Encoder(out);
        e.head(
            NAME,
            "histogram",
            "Time from a request taking its upstream stream id to its answer, for the 10 most executed statement shapes (shape: the id /shapes shows as fingerprint) and all others together (shape=\"other\"), home and routed answers alike.",
        );
        let series = top
            .iter()
            .map(|(id, s)| (id.as_str(), s))
            .chain(std::iter::once(("other", other)));
        for (shape, snap) in series {
            let bucket = format!("{NAME}_bucket");
            for (bound, le) in BUCKETS {
                let n = snap.count_at_most(bound);
                e.sample(&bucket, &[("shape", shape), ("le", le)], n);
            }
            e.sample(&bucket, &[("shape", shape), ("le", "+Inf")], snap.total);
            let sum = snap.sum_nanos as f64 / 1e9;
            e.sample_f64(&format!("{NAME}_sum"), &[("shape", shape)], sum);
            e.sample(&format!("{NAME}_count"), &[("shape", shape)], snap.total);
        }
    }

    /// Writes the trace export's counters (see [`crate::otel`]): spans handed to the exporter,
    /// dropped because its queue was full, and lost in failed exports.
    pub fn encode_tracing(spans: crate::otel::SpanCounts, out: &mut String) {
        let mut e = Encoder(out);
        e.head(
            "autoprep_trace_spans_total",
            "counter",
            "Request spans sampled for OpenTelemetry export: exported, dropped (a thread's buffer for the exporter was full) or failed (the collector refused or could not be reached).",
        );
        for (outcome, n) in [
            ("exported", spans.exported),
            ("dropped", spans.dropped),
            ("failed", spans.failed),
        ] {
            e.sample("autoprep_trace_spans_total", &[("outcome", outcome)], n);
        }
    }

    /// Writes the TLS metrics: reloads by result, and the expiry of the certificates in use.
    pub fn encode_tls(&self, expiry: TlsExpiry, out: &mut String) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut e = Encoder(out);
        e.head(
            "autoprep_tls_reloads_total",
            "counter",
            "TLS certificate reloads (files changed, or SIGHUP): put in use (ok) or refused and the previous material kept (error).",
        );
        e.sample(
            "autoprep_tls_reloads_total",
            &[("result", "ok")],
            load(&self.tls_reloads_ok),
        );
        e.sample(
            "autoprep_tls_reloads_total",
            &[("result", "error")],
            load(&self.tls_reloads_error),
        );
        e.head(
            "autoprep_tls_certificate_expiry_seconds",
            "gauge",
            "The notAfter of the certificate autoprep presents, by side (client: to applications; upstream: to the node), as seconds since the Unix epoch.",
        );
        for (side, at) in [("client", expiry.client), ("upstream", expiry.upstream)] {
            if let Some(at) = at {
                e.sample(
                    "autoprep_tls_certificate_expiry_seconds",
                    &[("side", side)],
                    at,
                );
            }
        }
    }

    /// `autoprep_routing_local_datacenter`: the local datacenter, once decided.
    pub fn encode_local_dc(local: Option<&crate::cluster::LocalDc>, out: &mut String) {
        let mut e = Encoder(out);
        e.head(
            "autoprep_routing_local_datacenter",
            "gauge",
            "1 for the local datacenter (its replicas preferred, client connections homed on its contact points), named by --routing-local-dc (source=configured) or that of the first contact point that answered (source=first contact point); absent until decided. It never changes within a process.",
        );
        if let Some(l) = local {
            let source = if l.configured {
                "configured"
            } else {
                "first contact point"
            };
            e.sample(
                "autoprep_routing_local_datacenter",
                &[("dc", &l.name), ("source", source)],
                1,
            );
        }
    }
}

/// Every node's count in `map`, by address.
fn node_counts(
    map: &std::sync::RwLock<BTreeMap<std::net::SocketAddr, Arc<AtomicU64>>>,
) -> Vec<(String, u64)> {
    let m = map.read().unwrap_or_else(|p| p.into_inner());
    m.iter()
        .map(|(k, v)| (k.to_string(), v.load(Ordering::Relaxed)))
        .collect()
}

/// Adds one to `node`'s counter of `map`.
fn count_node(
    map: &std::sync::RwLock<BTreeMap<std::net::SocketAddr, Arc<AtomicU64>>>,
    node: std::net::SocketAddr,
) {
    {
        let m = map.read().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = m.get(&node) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    let mut m = map.write().unwrap_or_else(|p| p.into_inner());
    m.entry(node).or_default().fetch_add(1, Ordering::Relaxed);
}

/// Histogram bucket upper bounds: in nanoseconds, and as written in the `le` label.
/// 50 µs (a fast point read on loopback) to 10 s (a timed-out request).
const BUCKETS: [(u64, &str); 17] = [
    (50_000, "0.00005"),
    (100_000, "0.0001"),
    (250_000, "0.00025"),
    (500_000, "0.0005"),
    (1_000_000, "0.001"),
    (2_500_000, "0.0025"),
    (5_000_000, "0.005"),
    (10_000_000, "0.01"),
    (25_000_000, "0.025"),
    (50_000_000, "0.05"),
    (100_000_000, "0.1"),
    (250_000_000, "0.25"),
    (500_000_000, "0.5"),
    (1_000_000_000, "1"),
    (2_500_000_000, "2.5"),
    (5_000_000_000, "5"),
    (10_000_000_000, "10"),
];

/// A fixed-bucket histogram of durations: one relaxed atomic add per bucket hit and one for the
/// sum, no lock.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per bucket (not cumulative); the last one is above the largest bound.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        self.observe_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// [`Histogram::observe`] for a duration in nanoseconds.
    pub fn observe_nanos(&self, ns: u64) {
        let i = BUCKETS.partition_point(|(bound, _)| *bound < ns);
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_nanos.fetch_add(ns, Ordering::Relaxed);
    }

    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    fn encode(&self, name: &str, labels: &[(&str, &str)], e: &mut Encoder<'_>) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        let with = |le| {
            let mut l = labels.to_vec();
            l.push(("le", le));
            l
        };
        for ((_, le), c) in BUCKETS.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            e.sample(&bucket, &with(le), cumulative);
        }
        if let Some(c) = self.counts.last() {
            cumulative += c.load(Ordering::Relaxed);
        }
        e.sample(&bucket, &with("+Inf"), cumulative);
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        e.sample_f64(&format!("{name}_sum"), labels, sum);
        e.sample(&format!("{name}_count"), labels, cumulative);
    }
}

/// Writes lines of the text format.
struct Encoder<'a>(&'a mut String);

impl Encoder<'_> {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    /// A metric of one series without labels: its head and its value.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: u64) {
        self.head(name, kind, help);
        self.sample(name, &[], value);
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.series(name, labels);
        let _ = writeln!(self.0, " {value}");
    }

    fn sample_f64(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.series(name, labels);
        let _ = writeln!(self.0, " {value}");
    }

    /// A series' name and labels.
    fn series(&mut self, name: &str, labels: &[(&str, &str)]) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                self.0.push_str(k);
                self.0.push_str("=\"");
                escape_label_value(v, self.0);
                self.0.push('"');
            }
            self.0.push('}');
        }
    }
}

/// Label values escape backslash, double quote and line feed (the text format's rules).
fn escape_label_value(v: &str, out: &mut String) {
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample whose line starts with `series ` (name and labels as written).
    fn value(text: &str, series: &str) -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(str::to_owned)
    }

    #[test]
    fn text_format() {
        let m = Metrics::default();
        Metrics::inc(&m.client_connections);
        m.request(Opcode::QUERY.0);
        m.request(Opcode::QUERY.0);
        m.request(Opcode::STARTUP.0);
        m.request(4); // unused opcode: UNKNOWN
        m.request(200); // outside the table: UNKNOWN as well, one series
        Metrics::inc(&m.queries_rewritten);
        m.passthrough("preparing");
        m.passthrough("preparing");
        m.passthrough("lex error");
        Metrics::inc(&m.prepares_ok);
        m.bytes_from_clients.fetch_add(1234, Ordering::Relaxed);
        m.bytes_to_clients.fetch_add(99, Ordering::Relaxed);
        m.request_duration.observe(Duration::from_micros(40));
        m.request_duration.observe(Duration::from_micros(50)); // on a bound: that bucket
        m.request_duration.observe(Duration::from_millis(3));
        m.request_duration.observe(Duration::from_secs(11));
        let cache = CacheStats {
            entries: 7,
            evictions: 3,
            hits: 10,
            misses: 2,
            ..CacheStats::default()
        };
        let mut out = String::new();
        m.encode(&cache, 5, &mut out);
        Metrics::inc(&m.tls_reloads_ok);
        m.encode_tls(
            TlsExpiry {
                client: Some(1_900_000_000),
                upstream: None,
            },
            &mut out,
        );

        let v = |s: &str| value(&out, s).unwrap_or_else(|| panic!("no {s} in\n{out}"));
        assert_eq!(v("autoprep_client_connections"), "1");
        assert_eq!(v("autoprep_requests_total{opcode=\"QUERY\"}"), "2");
        assert_eq!(v("autoprep_requests_total{opcode=\"STARTUP\"}"), "1");
        assert_eq!(v("autoprep_requests_total{opcode=\"UNKNOWN\"}"), "2");
        assert_eq!(
            v("autoprep_queries_total{outcome=\"rewritten\",reason=\"\"}"),
            "1"
        );
        assert_eq!(
            v("autoprep_queries_total{outcome=\"passthrough\",reason=\"preparing\"}"),
            "2"
        );
        assert_eq!(
            v("autoprep_queries_total{outcome=\"passthrough\",reason=\"lex error\"}"),
            "1"
        );
        assert_eq!(v("autoprep_prepares_total{result=\"ok\"}"), "1");
        assert_eq!(v("autoprep_prepares_total{result=\"failed\"}"), "0");
        assert_eq!(v("autoprep_unprepared_recoveries_total"), "0");
        assert_eq!(v("autoprep_cache_entries"), "7");
        assert_eq!(v("autoprep_cache_evictions_total"), "3");
        assert_eq!(v("autoprep_cache_lookups_total{result=\"hit\"}"), "10");
        assert_eq!(v("autoprep_shapes_tracked"), "5");
        assert_eq!(v("autoprep_received_bytes_total"), "1234");
        assert_eq!(v("autoprep_sent_bytes_total"), "99");
        assert_eq!(v("autoprep_tls_reloads_total{result=\"ok\"}"), "1");
        assert_eq!(v("autoprep_tls_reloads_total{result=\"error\"}"), "0");
        assert_eq!(
            v("autoprep_tls_certificate_expiry_seconds{side=\"client\"}"),
            "1900000000"
        );
        assert!(value(
            &out,
            "autoprep_tls_certificate_expiry_seconds{side=\"upstream\"}"
        )
        .is_none());

        let h = "autoprep_request_duration_seconds";
        assert_eq!(v(&format!("{h}_bucket{{le=\"0.00005\"}}")), "2");
        assert_eq!(v(&format!("{h}_bucket{{le=\"0.0025\"}}")), "2");
        assert_eq!(v(&format!("{h}_bucket{{le=\"0.005\"}}")), "3");
        assert_eq!(v(&format!("{h}_bucket{{le=\"10\"}}")), "3");
        assert_eq!(v(&format!("{h}_bucket{{le=\"+Inf\"}}")), "4");
        assert_eq!(v(&format!("{h}_count")), "4");
        let sum: f64 = v(&format!("{h}_sum")).parse().unwrap();
        assert!((sum - 11.00309).abs() < 1e-9, "{sum}");
        assert_eq!(m.request_duration.count(), 4);

        // Every metric has HELP and TYPE before its samples, once; every other line is a sample
        // of the metric last declared.
        let mut declared: Vec<&str> = Vec::new();
        for line in out.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                assert!(!declared.contains(&name), "{name} declared twice");
                declared.push(name);
            } else if !line.starts_with("# HELP ") {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = declared.last().unwrap();
                assert!(
                    name == *family
                        || ["_bucket", "_sum", "_count"]
                            .iter()
                            .any(|s| name == format!("{family}{s}")),
                    "{line} after TYPE {family}"
                );
                assert!(
                    line.rsplit(' ').next().unwrap().parse::<f64>().is_ok(),
                    "{line}"
                );
            }
        }
        assert!(out.ends_with('\n'));
    }

    /// The per-shape series: the shapes given plus `other`, nothing else.
    #[test]
    fn shape_latency_series_are_bounded() {
        let h = crate::latency::Histogram::new();
        h.record(40_000);
        h.record(3_000_000);
        let top = vec![("abc".to_owned(), h.snapshot())];
        let mut other = crate::latency::Snapshot::default();
        other.merge(&h.snapshot());
        other.merge(&h.snapshot());
        let mut out = String::new();
        Metrics::encode_shape_latency(&top, &other, &mut out);
        let v = |s: &str| value(&out, s).unwrap_or_else(|| panic!("no {s} in\n{out}"));
        let n = "autoprep_shape_request_duration_seconds";
        assert_eq!(
            v(&format!("{n}_bucket{{shape=\"abc\",le=\"0.00005\"}}")),
            "1"
        );
        assert_eq!(v(&format!("{n}_bucket{{shape=\"abc\",le=\"+Inf\"}}")), "2");
        assert_eq!(v(&format!("{n}_count{{shape=\"other\"}}")), "4");
        assert_eq!(
            v(&format!("{n}_bucket{{shape=\"other\",le=\"0.005\"}}")),
            "4"
        );
        let shapes: std::collections::BTreeSet<&str> = out
            .lines()
            .filter_map(|l| l.split("shape=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(shapes.into_iter().collect::<Vec<_>>(), ["abc", "other"]);
    }

    /// No function of this module is longer than 100 lines (the encoders are split by topic).
    #[test]
    fn functions_stay_short() {
        let src = include_str!("metrics.rs");
        let src = src.split("#[cfg(test)]").next().unwrap_or_default();
        let mut open: Option<(usize, &str)> = None;
        for (i, line) in src.lines().enumerate() {
            let t = line.trim_start();
            let indent = line.len() - t.len();
            if (t.starts_with("fn ") || t.starts_with("pub fn ")) && indent <= 4 {
                open = Some((i, &line[..indent]));
            } else if let Some((at, ind)) = open {
                if line == format!("{ind}}}") {
                    assert!(
                        i - at <= 100,
                        "function at line {} is {} lines",
                        at + 1,
                        i - at
                    );
                    open = None;
                }
            }
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape_label_value("a\"b\\c\nd", &mut out);
        assert_eq!(out, "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn responded_observes_overall_and_per_shape() {
        let m = Metrics::default();
        let shapes = crate::shapes::Shapes::new(2);
        let shape = shapes.enter(
            autoprep_cache::ShapeHash(1),
            None,
            "SELECT * FROM t WHERE k = ?",
        );
        for group in [Group::Rewritten, Group::Control, Group::Other] {
            m.responded(Tag {
                started: Some(crate::stamp::Stamp::now()),
                shape: Some(shape.clone()),
                group,
            });
        }
        m.responded(Tag::default()); // untimed: nothing
        assert_eq!(m.request_duration.count(), 3);
        assert_eq!(m.response_rewritten.count(), 1);
        assert_eq!(m.response_control.count(), 1);
        let top = &shapes.top(1)[0];
        assert_eq!(top.latency_samples, 3);
        let c = &top.control_comparison;
        assert_eq!((c.rewritten.samples, c.control.samples), (1, 1));
        assert_eq!(c.saved_seconds_per_execution, None, "too few samples");
    }

    /// The control series carry only the group label's two values (bounded labels).
    #[test]
    fn control_series_are_bounded() {
        let m = Metrics::default();
        let mut out = String::new();
        m.encode_control(0.01, 1.5, &mut out);
        assert!(out.contains("autoprep_control_fraction 0.01\n"), "{out}");
        assert!(out.contains("autoprep_response_time_saved_seconds_total 1.5\n"));
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            let labels = line.split_once('{').map(|(_, l)| l).unwrap_or("");
            for kv in labels
                .trim_end_matches(|c| c != '}')
                .trim_end_matches('}')
                .split(',')
            {
                let key = kv.split('=').next().unwrap_or("");
                assert!(["", "group", "le"].contains(&key), "{line}");
            }
            if line.contains("group=") {
                assert!(
                    line.contains("group=\"rewritten\"") || line.contains("group=\"control\""),
                    "{line}"
                );
            }
        }
        assert!(out.contains("autoprep_server_response_seconds_count{group=\"control\"} 0"));
    }
}
