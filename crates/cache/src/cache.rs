//! The shared prepared-statement cache.
//!
//! A shape goes through these states per node:
//! unseen → seen N times (admission counter) → preparing (one PREPARE in flight, single-flight)
//! → ready (prepared id and types) or negative (failed, with a reason, until an expiry).
//! Ready entries live in a bounded LRU (entries and bytes); the least recently used is
//! evicted. Nothing here talks to the network: the caller sends the PREPARE and reports back.

use crate::entry::PreparedEntry;
use crate::key::{NodeId, ShapeHash, ShapeKey};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Limits and policies of the cache.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Most prepared entries kept.
    pub max_entries: usize,
    /// Most bytes (approximate) of prepared entries kept.
    pub max_bytes: usize,
    /// A shape is prepared on its Nth sighting (1 = at once).
    pub admission_threshold: u32,
    /// How many not-yet-admitted shapes are counted (a bounded LRU of counters).
    pub max_tracked_shapes: usize,
    /// How long a failed shape is left alone before it may be tried again.
    pub negative_ttl: Duration,
    /// A PREPARE not answered within this long is forgotten, so another may start.
    pub prepare_timeout: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_entries: 10_000,
            max_bytes: 64 * 1024 * 1024,
            admission_threshold: 2,
            max_tracked_shapes: 100_000,
            negative_ttl: Duration::from_secs(60),
            prepare_timeout: Duration::from_secs(10),
        }
    }
}

/// The answer to a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Prepared on this node: execute it.
    Ready(Arc<PreparedEntry>),
    /// Not prepared yet, and the caller has been chosen to send the PREPARE now: it must
    /// later call [`PreparedCache::prepared`] or [`PreparedCache::failed`].
    PrepareNow,
    /// Not prepared, and nothing for the caller to do (below the admission threshold, or a
    /// PREPARE is already in flight elsewhere).
    Wait,
    /// Known not to work, for the given reason, until the entry expires.
    Negative(&'static str),
}

/// Counters, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub entries: usize,
    pub bytes: usize,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub prepares_started: u64,
    pub prepares_succeeded: u64,
    pub prepares_failed: u64,
    pub invalidations: u64,
    /// Entries recorded for a node from another node's, the id known there (see
    /// [`PreparedCache::adopt`]): PREPAREs not sent.
    pub adopted: u64,
    pub negative_entries: usize,
}

#[derive(Debug)]
struct Ready {
    entry: Arc<PreparedEntry>,
    weight: usize,
}

#[derive(Debug)]
enum Pending {
    Seen(u32),
    Preparing(Instant),
    Negative(&'static str, Instant),
}

#[derive(Debug)]
struct Inner {
    ready: LruCache<(NodeId, ShapeHash), Ready>,
    pending: LruCache<(NodeId, ShapeHash), Pending>,
    bytes: usize,
    stats: CacheStats,
    /// Counts the schema changes seen (see [`PreparedCache::schema_epoch`]).
    schema_epoch: u64,
    /// The highest node id an entry was recorded for (see [`PreparedCache::adopt`]).
    max_node: NodeId,
}

/// The cache: cheap to share (`Arc`), one short lock per call.
#[derive(Debug)]
pub struct PreparedCache {
    cfg: CacheConfig,
    /// `cfg.admission_threshold`, changeable while the cache is in use (a configuration
    /// reload): one relaxed load per lookup.
    admission_threshold: AtomicU32,
    inner: Mutex<Inner>,
}

fn matches(e: &PreparedEntry, key: &ShapeKey<'_>) -> bool {
    e.text == key.text && e.keyspace.as_deref() == key.keyspace
}

impl PreparedCache {
    /// An empty cache.
    pub fn new(cfg: CacheConfig) -> Self {
        let tracked = NonZeroUsize::new(cfg.max_tracked_shapes.max(1)).unwrap_or(NonZeroUsize::MIN);
        PreparedCache {
            inner: Mutex::new(Inner {
                ready: LruCache::unbounded(),
                pending: LruCache::new(tracked),
                bytes: 0,
                stats: CacheStats::default(),
                schema_epoch: 0,
                max_node: 0,
            }),
            admission_threshold: AtomicU32::new(cfg.admission_threshold),
            cfg,
        }
    }

    /// The admission threshold in force: a shape is prepared on its Nth sighting.
    pub fn admission_threshold(&self) -> u32 {
        self.admission_threshold.load(Ordering::Relaxed)
    }

    /// Changes the admission threshold (at least 1) from the next lookup on; returns the
    /// previous one. Shapes already counted keep their count: one seen twice is prepared at
    /// its next sighting when the threshold drops to 2, and waits for more when it rises.
    pub fn set_admission_threshold(&self, threshold: u32) -> u32 {
        self.admission_threshold
            .swap(threshold.max(1), Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks a shape up and, on a miss, advances its admission state.
    pub fn lookup(&self, key: &ShapeKey<'_>, now: Instant) -> Lookup {
        self.lookup_admitting(key, now, self.admission_threshold())
    }

    /// [`PreparedCache::lookup`] with another admission threshold than the configured one
    /// (the higher of the two counts), for a node whose server wants fewer prepared
    /// statements.
    pub fn lookup_admitting(&self, key: &ShapeKey<'_>, now: Instant, threshold: u32) -> Lookup {
        let threshold = threshold.max(self.admission_threshold());
        let mut g = self.lock();
        let inner = &mut *g;
        let k = key.map_key();
        if let Some(r) = inner.ready.get(&k) {
            if matches(&r.entry, key) {
                inner.stats.hits += 1;
                return Lookup::Ready(r.entry.clone());
            }
            // Two shapes with one hash: never execute the other statement; this one passes
            // through (under the label the metrics have always used).
            inner.stats.misses += 1;
            return Lookup::Negative("fingerprint collision");
        }
        inner.stats.misses += 1;
        let threshold = threshold.max(1);
        let state = match inner.pending.get_mut(&k) {
            None => {
                inner.pending.put(k, Pending::Seen(0));
                inner.pending.get_mut(&k)
            }
            s => s,
        };
        let Some(state) = state else {
            return Lookup::Wait;
        };
        match state {
            Pending::Seen(n) => {
                *n += 1;
                if *n >= threshold {
                    *state = Pending::Preparing(now);
                    inner.stats.prepares_started += 1;
                    Lookup::PrepareNow
                } else {
                    Lookup::Wait
                }
            }
            Pending::Preparing(since) => {
                if now.duration_since(*since) > self.cfg.prepare_timeout {
                    *state = Pending::Preparing(now);
                    inner.stats.prepares_started += 1;
                    Lookup::PrepareNow
                } else {
                    Lookup::Wait
                }
            }
            Pending::Negative(reason, until) => {
                if now >= *until {
                    *state = Pending::Preparing(now);
                    inner.stats.prepares_started += 1;
                    Lookup::PrepareNow
                } else {
                    Lookup::Negative(reason)
                }
            }
        }
    }

    /// The entry prepared for a shape on a node, if there is one, without counting a
    /// sighting (for a statement whose shape the proxy already resolved).
    pub fn ready(&self, node: NodeId, hash: ShapeHash) -> Option<Arc<PreparedEntry>> {
        self.lock()
            .ready
            .get(&(node, hash))
            .map(|r| r.entry.clone())
    }

    /// Records a successful PREPARE; returns how many entries were evicted to make room.
    pub fn prepared(&self, node: NodeId, hash: ShapeHash, entry: PreparedEntry) -> usize {
        let mut g = self.lock();
        g.stats.prepares_succeeded += 1;
        Self::put_ready(&self.cfg, &mut g, node, hash, Arc::new(entry))
    }

    /// A shape about to be prepared on `node`, when another node's entry of it has an id
    /// `holds` says `node` already has (the server's id is the MD5 of keyspace and text, the
    /// same on every node): that entry is recorded for `node` too, and no PREPARE is needed.
    /// Whether it was (or `node` already had one). Should the node not know the id after all,
    /// its UNPREPARED answer invalidates the entry as for any other.
    pub fn adopt(&self, node: NodeId, hash: ShapeHash, holds: impl Fn(&[u8]) -> bool) -> bool {
        let mut g = self.lock();
        if g.ready.contains(&(node, hash)) {
            return true;
        }
        let found = (0..=g.max_node)
            .filter(|&other| other != node)
            .find_map(|other| g.ready.peek(&(other, hash)).map(|r| r.entry.clone()))
            .filter(|e| holds(&e.id));
        let Some(entry) = found else {
            return false;
        };
        g.stats.adopted += 1;
        Self::put_ready(&self.cfg, &mut g, node, hash, entry);
        true
    }

    /// `entry` ready for `hash` on `node` (what it waited as forgotten); the least recently
    /// used entries evicted past the bounds, how many returned.
    fn put_ready(
        cfg: &CacheConfig,
        inner: &mut Inner,
        node: NodeId,
        hash: ShapeHash,
        entry: Arc<PreparedEntry>,
    ) -> usize {
        let k = (node, hash);
        inner.pending.pop(&k);
        inner.max_node = inner.max_node.max(node);
        let weight = entry.weight();
        if let Some(old) = inner.ready.put(k, Ready { entry, weight }) {
            inner.bytes -= old.weight;
        }
        inner.bytes += weight;
        let mut evicted = 0;
        while inner.ready.len() > cfg.max_entries.max(1)
            || (inner.bytes > cfg.max_bytes && inner.ready.len() > 1)
        {
            match inner.ready.pop_lru() {
                Some((_, r)) => {
                    inner.bytes -= r.weight;
                    evicted += 1;
                }
                None => break,
            }
        }
        inner.stats.evictions += evicted as u64;
        evicted
    }

    /// Records that a shape cannot be prepared or executed, for `reason`, until the negative
    /// entry expires.
    pub fn failed(&self, node: NodeId, hash: ShapeHash, reason: &'static str, now: Instant) {
        let mut g = self.lock();
        let k = (node, hash);
        g.stats.prepares_failed += 1;
        if let Some(r) = g.ready.pop(&k) {
            g.bytes -= r.weight;
        }
        g.pending
            .put(k, Pending::Negative(reason, now + self.cfg.negative_ttl));
    }

    /// Forgets a PREPARE that will never be answered (its connection closed), so the next
    /// sighting may prepare the shape at once instead of waiting for the prepare timeout.
    pub fn abandoned(&self, node: NodeId, hash: ShapeHash) {
        let mut g = self.lock();
        let k = (node, hash);
        if matches!(g.pending.peek(&k), Some(Pending::Preparing(_))) {
            let threshold = self.admission_threshold().max(1);
            g.pending.put(k, Pending::Seen(threshold.saturating_sub(1)));
        }
    }

    /// Forgets a prepared entry whose id the node no longer knows (UNPREPARED); the next
    /// sighting prepares it again at once.
    pub fn invalidate(&self, node: NodeId, hash: ShapeHash, id: &[u8]) {
        let mut g = self.lock();
        let k = (node, hash);
        let same = g.ready.peek(&k).is_some_and(|r| r.entry.id.as_ref() == id);
        if same {
            if let Some(r) = g.ready.pop(&k) {
                g.bytes -= r.weight;
            }
            g.stats.invalidations += 1;
            let threshold = self.admission_threshold().max(1);
            g.pending.put(k, Pending::Seen(threshold.saturating_sub(1)));
        }
    }

    /// Replaces the entry's v5 result metadata (after a Rows result said it changed).
    pub fn update_result_metadata(
        &self,
        node: NodeId,
        hash: ShapeHash,
        id: &[u8],
        result_metadata_id: bytes::Bytes,
        result_metadata: bytes::Bytes,
    ) {
        let mut g = self.lock();
        let inner = &mut *g;
        if let Some(r) = inner.ready.get_mut(&(node, hash)) {
            if r.entry.id.as_ref() == id {
                let mut e = (*r.entry).clone();
                e.result_metadata_id = Some(result_metadata_id);
                e.result_metadata = result_metadata;
                let w = e.weight();
                inner.bytes = inner.bytes - r.weight + w;
                r.weight = w;
                r.entry = Arc::new(e);
            }
        }
    }

    /// A schema change of `keyspace` (of one of its tables, `table`; of the keyspace itself
    /// or of a type, function or aggregate in it, `None`) was seen: every entry that touches
    /// it is dropped, so that the next sighting prepares the statement against the new schema
    /// (a server that re-prepares the same text after a DROP and CREATE may give the same id
    /// with other bind types); negative entries are forgotten too (a table that did not exist
    /// may now), and the schema epoch moves on. Returns how many entries were dropped.
    pub fn schema_changed(&self, keyspace: &str, table: Option<&str>) -> usize {
        let mut g = self.lock();
        let inner = &mut *g;
        inner.schema_epoch += 1;
        let stale: Vec<(NodeId, ShapeHash)> = inner
            .ready
            .iter()
            .filter(|(_, r)| r.entry.touches(keyspace, table))
            .map(|(k, _)| *k)
            .collect();
        let threshold = self.admission_threshold().max(1);
        for k in &stale {
            if let Some(r) = inner.ready.pop(k) {
                inner.bytes -= r.weight;
            }
            // As after UNPREPARED: the next sighting prepares it again at once.
            inner
                .pending
                .put(*k, Pending::Seen(threshold.saturating_sub(1)));
        }
        inner.stats.invalidations += stale.len() as u64;
        let negative: Vec<(NodeId, ShapeHash)> = inner
            .pending
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Negative(..)))
            .map(|(k, _)| *k)
            .collect();
        for k in negative {
            inner.pending.pop(&k);
        }
        stale.len()
    }

    /// How many schema changes have been seen: a PREPARE sent before a change and answered
    /// after it may describe either schema, so its answer is not used (the caller compares
    /// the epoch at send time with the epoch at answer time).
    pub fn schema_epoch(&self) -> u64 {
        self.lock().schema_epoch
    }

    /// How many prepared entries node `node` holds (a walk over the entries: for admission
    /// decisions, not for every request).
    pub fn entries_on(&self, node: NodeId) -> usize {
        self.lock()
            .ready
            .iter()
            .filter(|((n, _), _)| *n == node)
            .count()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        let g = self.lock();
        let mut s = g.stats;
        s.entries = g.ready.len();
        s.bytes = g.bytes;
        s.negative_entries = g
            .pending
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Negative(..)))
            .count();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn key(text: &str) -> ShapeKey<'_> {
        let mut h = 0u64;
        for b in text.bytes() {
            h ^= u64::from(b);
        }
        ShapeKey {
            node: 1,
            hash: ShapeHash(h),
            keyspace: Some("ks"),
            text,
        }
    }

    fn entry(text: &str) -> PreparedEntry {
        PreparedEntry {
            text: text.into(),
            conditional: false,
            repeatable: false,
            fingerprint: [0; 16],
            keyspace: Some("ks".into()),
            id: Bytes::from_static(&[1; 16]),
            result_metadata_id: None,
            bind_types: vec![],
            pk_indexes: vec![],
            result_metadata: Bytes::new(),
            tables: vec![("ks".into(), text.into())],
            prepared_message: bytes::Bytes::new(),
        }
    }

    #[test]
    fn a_higher_admission_threshold_and_entries_per_node() {
        let c = cache(1, 10);
        let now = Instant::now();
        assert_eq!(c.lookup_admitting(&key("a"), now, 3), Lookup::Wait);
        assert_eq!(c.lookup_admitting(&key("a"), now, 3), Lookup::Wait);
        assert_eq!(c.lookup_admitting(&key("a"), now, 3), Lookup::PrepareNow);
        c.prepared(1, key("a").hash, entry("a"));
        c.prepared(2, key("b").hash, entry("b"));
        assert_eq!(c.entries_on(1), 1);
        assert_eq!(c.entries_on(3), 0);
    }

    #[test]
    fn a_shape_prepared_on_another_node_is_adopted_where_its_id_is_known() {
        let c = cache(1, 10);
        let a = key("a").hash;
        c.prepared(1, a, entry("a"));
        // Not known to hold the id: a PREPARE is needed.
        assert!(!c.adopt(2, a, |_| false));
        assert!(c.ready(2, a).is_none());
        assert!(c.adopt(2, a, |id| id == [1; 16]));
        assert_eq!(
            c.ready(2, a).map(|e| e.id.clone()),
            c.ready(1, a).map(|e| e.id.clone())
        );
        // A node below the first one's id too; a node that has it already needs nothing.
        assert!(c.adopt(0, a, |_| true));
        assert!(c.adopt(1, a, |_| false));
        assert_eq!(c.stats().adopted, 2);
        assert_eq!(c.stats().entries, 3);
        // A shape prepared nowhere is not adopted.
        assert!(!c.adopt(2, key("b").hash, |_| true));
    }

    #[test]
    fn a_schema_change_drops_the_entries_it_touches() {
        let c = cache(1, 10);
        let now = Instant::now();
        for t in ["a", "b"] {
            assert_eq!(c.lookup(&key(t), now), Lookup::PrepareNow);
            c.prepared(1, key(t).hash, entry(t));
        }
        assert_eq!(c.lookup(&key("c"), now), Lookup::PrepareNow);
        c.failed(1, key("c").hash, "prepare failed", now);
        let epoch = c.schema_epoch();
        assert_eq!(c.schema_changed("ks", Some("a")), 1);
        assert_eq!(c.schema_epoch(), epoch + 1);
        assert_eq!(c.lookup(&key("a"), now), Lookup::PrepareNow);
        assert!(matches!(c.lookup(&key("b"), now), Lookup::Ready(_)));
        // The failed shape may be tried again at once.
        assert_eq!(c.lookup(&key("c"), now), Lookup::PrepareNow);
        assert_eq!(c.schema_changed("other", None), 0);
        assert_eq!(c.schema_changed("ks", None), 1);
        assert_eq!(c.stats().entries, 0);
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn the_admission_threshold_changes_while_in_use() {
        let c = cache(5, 10);
        let now = Instant::now();
        assert_eq!(c.lookup(&key("a"), now), Lookup::Wait);
        assert_eq!(c.lookup(&key("a"), now), Lookup::Wait);
        assert_eq!(c.set_admission_threshold(2), 5);
        assert_eq!(c.admission_threshold(), 2);
        // Seen twice already: the next sighting prepares it.
        assert_eq!(c.lookup(&key("a"), now), Lookup::PrepareNow);
        c.set_admission_threshold(4);
        assert_eq!(c.lookup(&key("b"), now), Lookup::Wait);
        assert_eq!(c.lookup(&key("b"), now), Lookup::Wait);
        assert_eq!(c.lookup(&key("b"), now), Lookup::Wait);
        assert_eq!(c.lookup(&key("b"), now), Lookup::PrepareNow);
        // Never below 1.
        c.set_admission_threshold(0);
        assert_eq!(c.admission_threshold(), 1);
    }

    fn cache(threshold: u32, max_entries: usize) -> PreparedCache {
        PreparedCache::new(CacheConfig {
            admission_threshold: threshold,
            max_entries,
            ..Default::default()
        })
    }

    #[test]
    fn admission_then_single_flight_then_hit() {
        let c = cache(2, 10);
        let t = Instant::now();
        let k = key("INSERT INTO t (a) VALUES (?)");
        assert_eq!(c.lookup(&k, t), Lookup::Wait);
        assert_eq!(c.lookup(&k, t), Lookup::PrepareNow);
        // Another connection asks while the PREPARE is in flight: it does not prepare too.
        assert_eq!(c.lookup(&k, t), Lookup::Wait);
        c.prepared(1, k.hash, entry(k.text));
        assert!(matches!(c.lookup(&k, t), Lookup::Ready(_)));
        let s = c.stats();
        assert_eq!((s.entries, s.prepares_started, s.hits), (1, 1, 1));
    }

    #[test]
    fn lost_prepare_is_retried_after_the_timeout() {
        let c = cache(1, 10);
        let t = Instant::now();
        let k = key("x");
        assert_eq!(c.lookup(&k, t), Lookup::PrepareNow);
        assert_eq!(c.lookup(&k, t + Duration::from_secs(1)), Lookup::Wait);
        assert_eq!(
            c.lookup(&k, t + Duration::from_secs(11)),
            Lookup::PrepareNow
        );
    }

    #[test]
    fn abandoned_prepare_is_retried_at_once() {
        let c = cache(2, 10);
        let t = Instant::now();
        let k = key("x");
        assert_eq!(c.lookup(&k, t), Lookup::Wait);
        assert_eq!(c.lookup(&k, t), Lookup::PrepareNow);
        c.abandoned(1, k.hash);
        assert_eq!(c.lookup(&k, t), Lookup::PrepareNow);
    }

    #[test]
    fn negative_entries_expire() {
        let c = cache(1, 10);
        let t = Instant::now();
        let k = key("x");
        assert_eq!(c.lookup(&k, t), Lookup::PrepareNow);
        c.failed(1, k.hash, "prepare failed", t);
        assert_eq!(c.lookup(&k, t), Lookup::Negative("prepare failed"));
        assert_eq!(
            c.lookup(&k, t + Duration::from_secs(61)),
            Lookup::PrepareNow
        );
    }

    #[test]
    fn collision_never_returns_the_other_statement() {
        let c = cache(1, 10);
        let t = Instant::now();
        let a = key("ab");
        let mut b = key("ba"); // same xor hash, other text
        b.hash = a.hash;
        c.prepared(1, a.hash, entry(a.text));
        assert_eq!(c.lookup(&b, t), Lookup::Negative("fingerprint collision"));
        // Same text in another keyspace is another statement too.
        let mut other_ks = a;
        other_ks.keyspace = Some("other");
        assert!(!matches!(c.lookup(&other_ks, t), Lookup::Ready(_)));
    }

    #[test]
    fn bounded_by_entries_with_eviction_counted() {
        let c = cache(1, 3);
        let texts: Vec<String> = (0..5).map(|i| format!("statement {i}")).collect();
        for t in &texts {
            c.prepared(1, key(t).hash, entry(t));
        }
        let s = c.stats();
        assert_eq!((s.entries, s.evictions), (3, 2));
    }

    #[test]
    fn unprepared_drops_the_entry_and_re_prepares_at_once() {
        let c = cache(3, 10);
        let t = Instant::now();
        let k = key("x");
        c.prepared(1, k.hash, entry(k.text));
        c.invalidate(1, k.hash, &[1; 16]);
        assert_eq!(c.lookup(&k, t), Lookup::PrepareNow);
        assert_eq!(c.stats().invalidations, 1);
    }

    #[test]
    fn nodes_are_separate() {
        let c = cache(1, 10);
        let t = Instant::now();
        let k = key("x");
        c.prepared(1, k.hash, entry(k.text));
        let mut on_two = k;
        on_two.node = 2;
        assert_eq!(c.lookup(&on_two, t), Lookup::PrepareNow);
    }
}
