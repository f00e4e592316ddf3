//! What a traced request carries: its [`Facts`] from request to answer (kept by the
//! connection in [`Requests`]), and the [`SpanRecord`] the exporter receives for a sampled one.

use crate::control::Group;
use crate::stamp::Stamp;
use crate::trace_context::TraceParent;
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::{Envelope, Header, Opcode};
use autoprep_protocol::message::batch::BatchView;
use autoprep_protocol::message::execute::ExecuteView;
use autoprep_protocol::message::prepare::PrepareView;
use autoprep_protocol::message::query::QueryView;
use autoprep_protocol::message::RequestBody;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What the session knows of a request when it arrives and while it is decided, kept until
/// its answer (only while tracing is on).
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub opcode: u8,
    pub consistency: Option<u16>,
    pub page_size: Option<i32>,
    /// Children of a BATCH.
    pub batch_size: Option<u16>,
    /// The client's parent span, from the custom payload or a SQLCommenter comment.
    pub parent: Option<TraceParent>,
    /// The keyspace the statement runs in: named by the request (v5), else the connection's.
    pub keyspace: Option<Arc<str>>,
    /// `rewritten`, or why the statement passed through unchanged.
    pub rewrite: Option<&'static str>,
    /// [`REPLICA`] when sent to a replica of its partition, else why it went home (a name,
    /// not a `Result`: an `Option` of that takes 8 more bytes of every record).
    pub routing: Option<&'static str>,
    /// The head sampler's draw, when it kept the request (see `Tracing::draw`).
    pub drawn: Option<u64>,
}

impl Facts {
    /// The facts of a client request: its header, and its body when that can be read without
    /// decompressing it (v5 envelopes are never compressed; a v4 body is read only when the
    /// connection negotiated no compression). `keyspace` is the connection's.
    pub fn of(
        env: &Envelope,
        compression: Option<Compression>,
        keyspace: Option<Arc<str>>,
    ) -> Facts {
        let header = env.header();
        let mut f = Facts {
            opcode: header.opcode.0,
            keyspace,
            ..Facts::default()
        };
        if Self::readable(header, compression) {
            f.read_body(header, env.body());
        }
        f
    }

    /// Whether a request's body is read here: v5 envelopes are never compressed; a v4 body
    /// only when the connection negotiated no compression or the envelope is not compressed.
    fn readable(header: &Header, compression: Option<Compression>) -> bool {
        header.version >= autoprep_protocol::envelope::ProtocolVersion::V5
            || compression.is_none()
            || !header
                .flags
                .has(autoprep_protocol::envelope::Flags::COMPRESSION)
    }

    /// Whether `env` may name a client's parent span: a custom payload, or a QUERY or PREPARE
    /// whose statement ends with a comment (read only where [`Facts::of`] would read it: the
    /// connection's `compression` is asked only of a statement that may end with one).
    pub fn may_have_parent(
        env: &Envelope,
        compression: impl FnOnce() -> Option<Compression>,
    ) -> bool {
        let header = env.header();
        if header
            .flags
            .has(autoprep_protocol::envelope::Flags::CUSTOM_PAYLOAD)
        {
            return true;
        }
        if header.opcode != Opcode::QUERY && header.opcode != Opcode::PREPARE {
            return false;
        }
        // Both bodies start with the statement, a [long string] (no custom payload before it).
        let Some((len, rest)) = env.body().split_first_chunk::<4>() else {
            return false;
        };
        let Some(text) = rest.get(..u32::from_be_bytes(*len) as usize) else {
            return false;
        };
        // Most statements end in a letter, a digit, a quote or a bracket: no comment there. (A
        // compressed body's last byte says nothing, but what it passes is then not read.)
        if !matches!(
            text.last(),
            Some(b'/' | b';' | b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
        ) || !Self::readable(header, compression())
        {
            return false;
        }
        let end = text.trim_ascii_end();
        end.strip_suffix(b";")
            .unwrap_or(end)
            .trim_ascii_end()
            .ends_with(b"*/")
    }

    /// The facts of a request whose body is not read (a plain EXECUTE without a custom
    /// payload, sent on the fast path): its opcode and the connection's keyspace.
    pub fn of_header(header: &Header, keyspace: Option<Arc<str>>) -> Facts {
        Facts {
            opcode: header.opcode.0,
            keyspace,
            ..Facts::default()
        }
    }

    fn read_body(&mut self, header: &Header, body: &[u8]) {
        let Ok(rb) = RequestBody::parse(header, body) else {
            return;
        };
        self.parent = rb.custom_payload.and_then(TraceParent::from_payload);
        let v = header.version;
        let params = match header.opcode {
            Opcode::QUERY => QueryView::parse(rb.message, v).ok().map(|q| {
                if self.parent.is_none() {
                    self.parent = TraceParent::from_comment(q.query);
                }
                q.params
            }),
            Opcode::EXECUTE => ExecuteView::parse(rb.message, v).ok().map(|e| e.params),
            Opcode::BATCH => {
                if let Ok(b) = BatchView::parse(rb.message, v) {
                    self.consistency = Some(b.params.consistency);
                    self.batch_size = Some(b.count);
                    self.keyspace(b.params.keyspace);
                }
                None
            }
            Opcode::PREPARE => {
                if let Ok(p) = PrepareView::parse(rb.message, v) {
                    if self.parent.is_none() {
                        self.parent = TraceParent::from_comment(p.query);
                    }
                    self.keyspace(p.keyspace);
                }
                None
            }
            _ => None,
        };
        if let Some(p) = params {
            self.consistency = Some(p.consistency);
            self.page_size = p.page_size;
            self.keyspace(p.keyspace);
        }
    }

    /// A keyspace the request names itself (v5) wins over the connection's.
    fn keyspace(&mut self, named: Option<&str>) {
        if let Some(k) = named {
            self.keyspace = Some(Arc::from(k));
        }
    }
}

/// [`Facts::routing`] of a request sent to a replica of its partition.
pub const REPLICA: &str = "replica";

/// A connection's requests in flight with their [`Facts`], by the client's stream id. Empty
/// (and unallocated) while tracing is off; a stream id's entry is replaced by its next request.
/// How many there are is also kept in an atomic that the connection reads without taking its
/// lock ([`Requests::noted`]): at 1 % sampling the map is nearly always empty, and a request or
/// an answer then takes no lock for it.
///
/// While one request is noted, every other request and answer of the connection would look
/// it up in the map (at 1 %, with 64 requests in flight, most of them while one is): a mask of
/// the noted stream ids modulo 64 answers most of those without a lookup.
#[derive(Debug, Default)]
pub struct Requests {
    by_stream: HashMap<i16, Facts, BuildHasherDefault<StreamHasher>>,
    /// Bit `stream % 64` set for each noted stream, and possibly for streams no longer noted
    /// (see [`Requests::recount`]); 0 when none is noted.
    mask: u64,
    noted: Arc<AtomicUsize>,
}

/// A stream id's bit in [`Requests::mask`].
#[inline(always)]
fn bit(stream: i16) -> u64 {
    1 << (stream as u16 & 63)
}

/// Hashes a stream id by one multiplication (Fibonacci hashing): the map's keys are small
/// integers the client chose, not an attacker's strings worth SipHash. The exporter's caches
/// ([`super::otlp`]) use it too, for shape fingerprints (md5 digests) and node addresses.
#[derive(Debug, Default)]
pub struct StreamHasher(u64);

impl Hasher for StreamHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_i16(&mut self, i: i16) {
        self.0 = u64::from(i as u16).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u128(&mut self, i: u128) {
        // A digest's halves, already uniform.
        self.0 = (self.0 ^ i as u64 ^ (i >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Requests {
    /// Notes a request's facts.
    pub fn note(&mut self, stream: i16, facts: Facts) {
        self.by_stream.insert(stream, facts);
        self.mask |= bit(stream);
        self.noted.store(self.by_stream.len(), Ordering::Release);
    }

    /// Whether the request on `stream` may be noted (its bit of the mask is set).
    #[inline(always)]
    pub fn may_have(&self, stream: i16) -> bool {
        self.mask & bit(stream) != 0
    }

    /// Whether any request is noted.
    #[inline(always)]
    pub fn any(&self) -> bool {
        self.mask != 0
    }

    /// How many requests are noted, readable without the lock this map is under (updated
    /// with every change of it).
    pub fn noted(&self) -> Arc<AtomicUsize> {
        self.noted.clone()
    }

    /// After a removal: publishes the count; the mask is cleared with the map (until then it
    /// may keep the bit of a stream no longer noted: a lookup that finds nothing, cheaper than
    /// recomputing it from every stream left at each answer while many are noted).
    fn recount(&mut self) {
        self.noted.store(self.by_stream.len(), Ordering::Release);
        if self.by_stream.is_empty() {
            self.mask = 0;
        }
    }

    /// Forgets what was noted of an earlier request on `stream` (its id is reused by a
    /// request that is not noted).
    #[inline(always)]
    pub fn clear(&mut self, stream: i16) {
        if self.may_have(stream) {
            self.forget(stream);
        }
    }

    #[inline(never)]
    fn forget(&mut self, stream: i16) {
        if self.by_stream.remove(&stream).is_some() {
            self.recount();
        }
    }

    /// Notes what the rewrite made of the request on `stream`.
    pub fn rewrite(&mut self, stream: i16, outcome: &'static str) {
        if !self.may_have(stream) {
            return;
        }
        if let Some(f) = self.by_stream.get_mut(&stream) {
            f.rewrite = Some(outcome);
        }
    }

    /// Notes where routing sent the request on `stream`.
    pub fn routing(&mut self, stream: i16, outcome: Result<(), &'static str>) {
        if !self.may_have(stream) {
            return;
        }
        if let Some(f) = self.by_stream.get_mut(&stream) {
            f.routing = Some(outcome.err().unwrap_or(REPLICA));
        }
    }

    /// The facts of the request on `stream`, now answered.
    #[inline(always)]
    pub fn take(&mut self, stream: i16) -> Option<Facts> {
        if !self.may_have(stream) {
            return None;
        }
        self.take_noted(stream)
    }

    #[inline(never)]
    fn take_noted(&mut self, stream: i16) -> Option<Facts> {
        let facts = self.by_stream.remove(&stream);
        if facts.is_some() {
            self.recount();
        }
        facts
    }

    /// [`Requests::take`] for an answer from a replica: routed there, even when the answer
    /// came before the sender noted it.
    pub fn take_routed(&mut self, stream: i16) -> Option<Facts> {
        let mut f = self.take(stream)?;
        f.routing = Some(REPLICA);
        Some(f)
    }
}

/// One sampled request, as the exporter receives it: plain data, attributes are made from it
/// on the exporter's thread (see [`span`]).
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// When the request was read and its answer read (monotonic: the exporter places them on
    /// the wall clock, see [`crate::stamp::WallClock`]).
    pub start: Stamp,
    pub end: Stamp,
    /// What was noted of the request; its `parent` is the span's (the record does not repeat
    /// it: a record is written on one core and read on another, a cache line at a time).
    pub facts: Facts,
    /// The statement's shape (QUERYs, BATCHes and literal EXECUTEs the rewrite read).
    pub shape: Option<crate::shapes::ShapeRef>,
    pub group: Group,
    /// The code of an ERROR answer; `Some(None)` for an error whose body was not read.
    pub error: Option<Option<i32>>,
    /// The node that answered.
    pub server: Option<SocketAddr>,
    /// Why it was sampled.
    pub sampled_by: SampledBy,
}

/// Why a span was kept: `autoprep.sampled_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampledBy {
    /// The head sampler (the ratio, or a client's sampled parent).
    Head,
    /// The answer was an ERROR.
    Error,
    /// The answer took longer than the slow threshold.
    Slow,
}

impl SampledBy {
    /// Its name in the attribute.
    pub fn name(self) -> &'static str {
        match self {
            SampledBy::Head => "head",
            SampledBy::Error => "error",
            SampledBy::Slow => "slow",
        }
    }
}

#[cfg(test)]
impl SpanRecord {
    /// A record of nothing in particular (tests).
    pub fn test_default() -> SpanRecord {
        SpanRecord {
            trace_id: [1; 16],
            span_id: [1; 8],
            start: Stamp::default(),
            end: Stamp::default(),
            facts: Facts::default(),
            shape: None,
            group: Group::Rewritten,
            error: None,
            server: None,
            sampled_by: SampledBy::Head,
        }
    }
}

/// Span counts for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpanCounts {
    pub exported: u64,
    pub dropped: u64,
    pub failed: u64,
}

/// The exporter's counters, shared with its thread.
#[derive(Debug, Default)]
pub struct Counters {
    pub exported: AtomicU64,
    pub dropped: AtomicU64,
    pub failed: AtomicU64,
}
