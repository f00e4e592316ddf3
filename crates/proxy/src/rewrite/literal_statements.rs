//! The map from the ids the proxy gave out for statements prepared with literals inline (see
//! [`super::literal_prepare`]) to those statements: their shape, encoded literals and
//! keyspace, bounded by bytes.

use crate::metrics::LiteralStats;
use crate::shapes::ShapeRef;
use autoprep_cache::{PreparedEntry, ShapeHash};
use autoprep_protocol::envelope::{Opcode, ProtocolVersion};
use autoprep_protocol::message::query::Values;
use autoprep_protocol::primitives::write_value;
use bytes::BytesMut;
use lru::LruCache;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One statement a client prepared with literals inline, as the map keeps it.
#[derive(Debug)]
pub struct Statement {
    /// The shape's cache key.
    pub(super) hash: ShapeHash,
    /// The shape's entry the literals were encoded for (its bind types).
    pub(super) entry: Arc<PreparedEntry>,
    /// Per bind variable of the shape: the range of a literal's encoded `[value]` in
    /// `values`, or `None` where the client's next value goes.
    pub(super) slots: Box<[Option<(u32, u32)>]>,
    pub(super) values: Box<[u8]>,
    /// How many values the client binds (its own markers).
    pub(super) client_values: u16,
    pub(super) shape: ShapeRef,
    /// The client's text, the keyspace it was prepared in, and whether every table in it is
    /// qualified: to prepare it on the server itself when its EXECUTE cannot run as the shape
    /// (see [`Statement::prepare_frame`]).
    pub(super) text: Box<str>,
    pub(super) keyspace: Option<Box<str>>,
    pub(super) qualified: bool,
}

/// Statements are one per id: compared by identity (for the pending table's derives).
impl PartialEq for Statement {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Statement {}

impl Statement {
    /// The counters of the statement's shape.
    pub fn shape(&self) -> ShapeRef {
        self.shape.clone()
    }

    /// Whether the statement may repeat (see
    /// [`autoprep_protocol::cql::idempotent::may_repeat`]): its shape's verdict, read once (a
    /// literal's place taken by a marker changes no rule's verdict).
    pub fn may_repeat(&self) -> bool {
        self.entry.repeatable
    }

    /// The keyspace the statement was prepared in.
    pub fn keyspace(&self) -> Option<&str> {
        self.keyspace.as_deref()
    }

    /// Approximate memory held, for the map's byte bound.
    pub(super) fn weight(&self) -> usize {
        const FIXED: usize = 200;
        FIXED
            + self.slots.len() * 12
            + self.values.len()
            + self.text.len()
            + self.keyspace.as_ref().map_or(0, |k| k.len())
    }

    /// The frame of a PREPARE of the client's own text, under which the server files it with
    /// the id the proxy gave out: on v5 naming its keyspace (unless every table is qualified);
    /// on v4 only while the connection is in that keyspace (`conn_keyspace`), `None` otherwise.
    /// The flag says whether the server takes the keyspace from the connection (see
    /// `session::Conn::hold_use`).
    pub fn prepare_frame(
        &self,
        version: ProtocolVersion,
        conn_keyspace: Option<&str>,
    ) -> Option<(BytesMut, bool)> {
        use autoprep_protocol::envelope::Envelope;
        use autoprep_protocol::message::prepare::encode_prepare;
        let v5 = version >= ProtocolVersion::V5;
        let keyspace = if self.qualified || !v5 {
            None
        } else {
            self.keyspace.as_deref()
        };
        if !v5 && !self.qualified && conn_keyspace != self.keyspace.as_deref() {
            return None;
        }
        let mut body = Vec::with_capacity(self.text.len() + 32);
        encode_prepare(version, self.text.as_bytes(), keyspace, &mut body).ok()?;
        let exposed = !self.qualified && keyspace.is_none();
        Some((
            Envelope::request_frame(version, Opcode::PREPARE, &body),
            exposed,
        ))
    }

    /// Appends the shape's values: literals as encoded at PREPARE, the client's `client`
    /// values in their places. Returns how many values were written.
    pub(super) fn bind(
        &self,
        client: Option<Values<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<u16, &'static str> {
        if client.is_some_and(|v| v.named) {
            return Err("named values");
        }
        if client.map_or(0, |v| v.count) != self.client_values {
            return Err("client value count");
        }
        let mut client = client.map(|v| v.iter());
        for slot in self.slots.iter() {
            match slot {
                Some((start, end)) => {
                    out.extend_from_slice(&self.values[*start as usize..*end as usize])
                }
                None => {
                    let Some(Ok((_, v))) = client.as_mut().and_then(Iterator::next) else {
                        return Err("client value count");
                    };
                    write_value(out, v).map_err(|_| "value too large")?;
                }
            }
        }
        u16::try_from(self.slots.len()).map_err(|_| "too many values")
    }
}

#[derive(Debug)]
struct Inner {
    map: LruCache<[u8; 16], Arc<Statement>>,
    bytes: usize,
}

/// The process-wide map from the ids the proxy gave out to the statements they stand for.
///
/// Design justification: one mutex over an `lru::LruCache` bounded by bytes. An EXECUTE of an
/// application's ordinary prepared statement only reads an atomic count while the map is
/// empty; when it is not, a lookup is one short critical section, as for the shape cache.
#[derive(Debug)]
pub struct LiteralStatements {
    inner: Mutex<Inner>,
    len: AtomicUsize,
    max_bytes: usize,
    evicted: AtomicU64,
}

impl LiteralStatements {
    /// A map holding at most about `max_bytes`.
    pub fn new(max_bytes: usize) -> LiteralStatements {
        LiteralStatements {
            inner: Mutex::new(Inner {
                map: LruCache::unbounded(),
                bytes: 0,
            }),
            len: AtomicUsize::new(0),
            max_bytes,
            evicted: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when the map holds a statement (else no EXECUTE needs a lookup).
    pub fn holds_any(&self) -> bool {
        self.len.load(Ordering::Relaxed) > 0
    }

    pub(super) fn get(&self, id: &[u8]) -> Option<Arc<Statement>> {
        let id: &[u8; 16] = id.try_into().ok()?;
        if !self.holds_any() {
            return None;
        }
        self.lock().map.get(id).cloned()
    }

    pub(super) fn contains(&self, id: &[u8; 16]) -> bool {
        self.holds_any() && self.lock().map.contains(id)
    }

    /// Files `statement` under `id`; false when it alone is over the bound.
    pub(super) fn insert(&self, id: [u8; 16], statement: Statement) -> bool {
        let weight = statement.weight();
        if weight > self.max_bytes {
            return false;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        if let Some(old) = inner.map.put(id, Arc::new(statement)) {
            inner.bytes -= old.weight();
        }
        inner.bytes += weight;
        let mut evicted = 0;
        while inner.bytes > self.max_bytes {
            match inner.map.pop_lru() {
                Some((_, s)) => {
                    inner.bytes -= s.weight();
                    evicted += 1;
                }
                None => break,
            }
        }
        self.len.store(inner.map.len(), Ordering::Relaxed);
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
        true
    }

    /// Forgets the statements of a keyspace, or of one of its tables, after a schema change:
    /// Cassandra drops the prepared statements of a table that changed
    /// (`QueryProcessor.MigrationSubscriber`), so an EXECUTE of one of their ids must be
    /// answered UNPREPARED, for the driver to prepare it again and learn the new result
    /// metadata. Returns how many were forgotten.
    pub fn schema_changed(&self, keyspace: &str, table: Option<&str>) -> usize {
        if !self.holds_any() {
            return 0;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        let stale: Vec<[u8; 16]> = inner
            .map
            .iter()
            .filter(|(_, s)| s.entry.touches(keyspace, table))
            .map(|(id, _)| *id)
            .collect();
        for id in &stale {
            if let Some(s) = inner.map.pop(id) {
                inner.bytes -= s.weight();
            }
        }
        self.len.store(inner.map.len(), Ordering::Relaxed);
        stale.len()
    }

    /// Entries, bytes and evictions so far.
    pub fn stats(&self) -> LiteralStats {
        let g = self.lock();
        LiteralStats {
            entries: g.map.len(),
            bytes: g.bytes,
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }
}
