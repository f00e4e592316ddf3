//! OpenTelemetry request spans: one CLIENT span per client request, exported over OTLP to a
//! collector, sampled, with the statement's text only as its redacted shape.
//!
//! # On the data path
//! Tracing is off unless an endpoint is configured (see [`settings`]); then [`Tracing::enabled`]
//! is false and every hook in the session is one untaken branch. When it is on:
//! - at a request, the head sampler counts down its gap to the next request it keeps
//!   ([`Tracing::draw`]), which gets the random half of its trace id.
//!   When the ratio keeps it, or when the request may carry a client's `traceparent` (a custom
//!   payload, or a statement ending with a comment: see [`crate::trace_context`]), the session
//!   notes its [`Facts`] (opcode, consistency, page size, keyspace, the parent) in its
//!   connection's [`Requests`], keyed by the client's stream id; then what the rewrite and
//!   routing made of it. Any other request costs a decrement and nothing else: at 1 %
//!   sampling, 99 requests in 100 are not noted at all, and their answers look for no facts
//!   (a mask of the noted stream ids says there are none) (`scripts/hop-cpu.sh` measures
//!   what is left).
//! - at the answer, where the request's duration is known from the start stamp it already
//!   carries, [`Tracing::answered`] decides: sampled when the answer is an error, when it took
//!   at least the slow threshold, or by the head sampler (the client's sampled flag, or the
//!   ratio on the trace id). Only then is a [`SpanRecord`] (a plain struct) filled and pushed
//!   onto its thread's bounded buffer for the exporter ([`handoff`]); an unsampled request
//!   never has a span object. An error or slow answer to a request the head sampler passed
//!   over has a span from what the answer knows (its statement's shape, the node, the control
//!   group, the error, the duration), without the request's own facts (consistency, page
//!   size, the rewrite's and routing's outcomes).
//!
//! # Off the data path
//! The exporter ([`export`]) runs on its own thread with its own runtime: it batches records,
//! encodes them as OTLP spans with the OpenTelemetry database conventions ([`span`],
//! [`otlp`]) and exports them. A full buffer drops the span (counted, `/metrics`
//! `autoprep_trace_spans_total{outcome="dropped"}`); the data path never waits for it.

pub mod export;
pub mod handoff;
pub mod otlp;
pub mod record;
pub mod settings;
pub mod span;

use crate::stamp::Stamp;
use crate::streams::Tag;
use crate::trace_context::TraceParent;
use autoprep_protocol::compression::{plain_body, Compression};
use autoprep_protocol::envelope::{Envelope, Header, Opcode};
use autoprep_protocol::message::ResponseBody;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Duration;

pub use record::{Counters, Facts, Requests, SampledBy, SpanCounts, SpanRecord};
pub use settings::Settings;

/// How a request was answered, as far as the span needs.
#[derive(Debug, Clone, Copy)]
pub enum Answer<'a> {
    /// Only the header was looked at (an answer that is not an error).
    Header(&'a Header),
    /// The whole answer, with the connection's compression (an error's code is read from it).
    Envelope(&'a Envelope, Option<Compression>),
}

impl<'a> Answer<'a> {
    /// An answer read whole: `compression` (the connection's) is asked only of an ERROR,
    /// whose code its span reads.
    #[inline]
    pub fn envelope(
        env: &'a Envelope,
        compression: impl FnOnce() -> Option<Compression>,
    ) -> Answer<'a> {
        let compression = if env.header().opcode == Opcode::ERROR {
            compression()
        } else {
            None
        };
        Answer::Envelope(env, compression)
    }

    fn is_error(&self) -> bool {
        match self {
            Answer::Header(h) => h.opcode == Opcode::ERROR,
            Answer::Envelope(e, _) => e.header().opcode == Opcode::ERROR,
        }
    }

    /// The error code of an ERROR answer, when its body can be read.
    fn error_code(&self) -> Option<i32> {
        let Answer::Envelope(env, compression) = self else {
            return None;
        };
        if env.header().opcode != Opcode::ERROR {
            return None;
        }
        let body = plain_body(env, *compression, usize::MAX)?;
        let rb = ResponseBody::parse(env.header(), &body).ok()?;
        let code: [u8; 4] = rb.message.get(..4)?.try_into().ok()?;
        Some(i32::from_be_bytes(code))
    }
}

/// The process's trace export: off, or a sampler and the exporter's hand-off.
#[derive(Debug, Default)]
pub struct Tracing {
    on: Option<On>,
    counters: Arc<Counters>,
}

#[derive(Debug)]
struct On {
    sampler: settings::Sampler,
    /// The ratio test's bound on a trace id's low half shifted to 63 bits (see
    /// [`ids::low_keeps`]), computed once.
    head_below: u64,
    /// The head sampler's gaps: `ln(1 - ratio)` (see [`Draws`]), computed once.
    ln_pass: f64,
    slow_nanos: u64,
    /// Where sampled records go (the exporter empties it).
    handoff: Arc<handoff::Handoff>,
    /// Flush requests to the exporter; its closing stops the exporter.
    flushes: SyncSender<export::Flush>,
}

impl On {
    fn new(
        settings: &Settings,
        handoff: Arc<handoff::Handoff>,
        flushes: SyncSender<export::Flush>,
    ) -> On {
        On {
            sampler: settings.sampler,
            head_below: ids::below(settings.sampler.ratio),
            ln_pass: (1.0 - settings.sampler.ratio).ln(),
            slow_nanos: settings.slow.map_or(u64::MAX, |d| {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
            }),
            handoff,
            flushes,
        }
    }
}

/// What the decision at the answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Drop,
    /// Sampled, with why and the trace id the span gets.
    Keep(SampledBy, [u8; 16]),
}

/// The head sampler's countdown of this thread, taken for a run of requests ([`Tracing::draws`])
/// and put back when dropped: the same draws, in the same order, as [`Tracing::draw`] for each.
/// Nothing else on the thread may draw while one is held (a run is handled without yielding).
#[derive(Debug)]
pub struct Draws {
    /// Requests left to pass over before one is kept.
    left: u64,
    /// 0 when the head sampler keeps nothing (tracing off, or ratio 0): `left` is then not
    /// the thread's and is not put back.
    below: u64,
    ln_pass: f64,
}

impl Draws {
    /// The draw for the next request: see [`Tracing::draw`]. A request passed over costs a
    /// test and a decrement.
    #[inline]
    pub fn draw(&mut self) -> Option<u64> {
        if self.left != 0 {
            self.left -= 1;
            return None;
        }
        self.keep()
    }

    /// The end of a gap: keeps this request and draws the next gap.
    #[cold]
    fn keep(&mut self) -> Option<u64> {
        if self.below == 0 {
            self.left = u64::MAX;
            return None;
        }
        self.left = ids::gap(self.ln_pass);
        Some(ids::kept_low(self.below))
    }
}

impl Drop for Draws {
    #[inline]
    fn drop(&mut self) {
        if self.below != 0 {
            ids::put_countdown(self.left);
        }
    }
}

impl Tracing {
    /// Tracing off: every hook is a branch not taken.
    pub fn off() -> Tracing {
        Tracing::default()
    }

    /// Starts the exporter for `settings` (its thread and runtime).
    pub fn start(settings: &Settings) -> anyhow::Result<Tracing> {
        let counters = Arc::new(Counters::default());
        let handoff = Arc::new(handoff::Handoff::default());
        let flushes = export::spawn(settings, handoff.clone(), counters.clone())?;
        Ok(Tracing {
            on: Some(On::new(settings, handoff, flushes)),
            counters,
        })
    }

    /// A tracer that samples like `settings` and hands its records to `handoff`, with no
    /// exporter (tests).
    pub fn with_handoff(settings: &Settings, handoff: Arc<handoff::Handoff>) -> Tracing {
        Tracing {
            on: Some(On::new(
                settings,
                handoff,
                std::sync::mpsc::sync_channel(0).0,
            )),
            counters: Arc::default(),
        }
    }

    /// Whether spans are exported at all.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.on.is_some()
    }

    /// Whether answers are traced for being slow (an unsampled request's answer is then
    /// timed against the threshold).
    #[inline]
    pub fn traces_slow(&self) -> bool {
        self.on.as_ref().is_some_and(|on| on.slow_nanos != u64::MAX)
    }

    /// The exporter's counts.
    pub fn counts(&self) -> SpanCounts {
        let c = &self.counters;
        SpanCounts {
            exported: c.exported.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
        }
    }

    /// The head sampler's draw for a request arriving now without a client's parent: the
    /// low half of its trace id when the ratio keeps it (its [`Facts`] are then noted), `None`
    /// when it does not (nothing is noted: only an error or a slow answer gives it a span,
    /// from what the answer knows). A countdown per thread (see [`Draws`]): a request
    /// passed over costs a decrement.
    #[inline]
    pub fn draw(&self) -> Option<u64> {
        match &self.on {
            // Passed over: the countdown decremented where it is (what `draws` would take and
            // put back).
            Some(on) if on.head_below != 0 && !ids::pass_one() => self.draws().draw(),
            _ => None,
        }
    }

    /// The head sampler's countdown of this thread, held while a run of requests read at once
    /// is handled (see [`Draws`]): one draw per request at the cost of a test and a
    /// decrement, the thread's countdown read and written once for the run.
    #[inline]
    pub fn draws(&self) -> Draws {
        match &self.on {
            Some(on) if on.head_below != 0 => Draws {
                left: ids::take_countdown(on.ln_pass),
                below: on.head_below,
                ln_pass: on.ln_pass,
            },
            // Never 0: nothing is kept.
            _ => Draws {
                left: u64::MAX,
                below: 0,
                ln_pass: 0.0,
            },
        }
    }

    /// Whether a request answered after `nanos`, with `parent` (else `drawn`, see
    /// [`Tracing::draw`]), as an error or not, is traced, and under which trace id (the
    /// parent's, else one with the drawn low half, else a new one).
    pub fn decide(
        &self,
        parent: Option<&TraceParent>,
        drawn: Option<u64>,
        error: bool,
        nanos: u64,
    ) -> Decision {
        let Some(on) = &self.on else {
            return Decision::Drop;
        };
        let head = match parent {
            Some(p) if on.sampler.parent_based => p.sampled(),
            Some(p) => ids::ratio_keeps(&p.trace_id, on.sampler.ratio),
            None => drawn.is_some(),
        };
        let why = if error {
            SampledBy::Error
        } else if nanos >= on.slow_nanos {
            SampledBy::Slow
        } else if head {
            SampledBy::Head
        } else {
            return Decision::Drop;
        };
        let trace_id = match (parent, drawn) {
            (Some(p), _) => p.trace_id,
            (None, Some(low)) => ids::trace_id_with(low),
            (None, None) => ids::trace_id(),
        };
        Decision::Keep(why, trace_id)
    }

    /// The hook at a client request's answer: `facts` noted at the request (taken from the
    /// connection's [`Requests`]), `tag` its stream tag (start stamp, shape, group), `now` when
    /// the answer was read, `server` the node that answered. Decides, and for a sampled
    /// request hands over its record.
    #[inline]
    pub fn answered(
        &self,
        facts: Option<Facts>,
        tag: &Tag,
        now: Stamp,
        answer: Answer<'_>,
        server: Option<SocketAddr>,
    ) {
        let (Some(on), Some(started)) = (&self.on, tag.started) else {
            return;
        };
        let error = answer.is_error();
        if facts.is_none()
            && !error
            && (on.slow_nanos == u64::MAX || now.nanos_since(started) < on.slow_nanos)
        {
            // Passed over by the head sampler: a span only for an error or a slow answer.
            return;
        }
        self.sample(
            facts.unwrap_or_default(),
            tag,
            (started, now, error),
            answer,
            server,
        );
    }

    /// [`Tracing::answered`] of a request that may have a span.
    fn sample(
        &self,
        facts: Facts,
        tag: &Tag,
        (start, end, error): (Stamp, Stamp, bool),
        answer: Answer<'_>,
        server: Option<SocketAddr>,
    ) {
        let nanos = end.nanos_since(start);
        let decision = self.decide(facts.parent.as_ref(), facts.drawn, error, nanos);
        let Decision::Keep(why, trace_id) = decision else {
            return;
        };
        // No wall clock is read here: the exporter places the stamps on it.
        let span_id = ids::span_id();
        if tracing::enabled!(tracing::Level::DEBUG) {
            // A log line that carries the span's ids (see `crate::log_json`).
            let ids = tracing::debug_span!(
                "request",
                trace_id = %crate::shapes::hex(&trace_id),
                span_id = %crate::shapes::hex(&span_id),
            );
            ids.in_scope(|| tracing::debug!(sampled_by = why.name(), nanos, "request traced"));
        }
        let record = SpanRecord {
            trace_id,
            span_id,
            start,
            end,
            error: error.then(|| answer.error_code()),
            facts,
            shape: tag.shape.clone(),
            group: tag.group,
            server,
            sampled_by: why,
        };
        self.finish(record);
    }

    /// Hands a sampled span to the exporter; a full buffer drops it (counted).
    pub fn finish(&self, record: SpanRecord) {
        let Some(on) = &self.on else { return };
        if !on.handoff.push(record) {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Exports what is recorded and waits for it, at most `wait` (at shutdown).
    pub fn flush(&self, wait: Duration) {
        let Some(on) = &self.on else { return };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if on.flushes.send(tx).is_ok() {
            let _ = rx.recv_timeout(wait);
        }
    }
}

/// Trace and span ids, the head sampler and the ratio test: a per-thread generator
/// (xorshift64*, seeded from the standard library's random hasher keys), so that the decision
/// takes no lock.
mod ids {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};

    /// [`SKIP`] before this thread's first draw.
    const UNDRAWN: u64 = u64::MAX;

    thread_local! {
        static STATE: Cell<u64> = Cell::new(seed());
        /// How many more requests the head sampler passes over on this thread before it keeps
        /// one.
        static SKIP: Cell<u64> = const { Cell::new(UNDRAWN) };
    }

    // The head sampler (see `super::Draws`): keeps each request with the ratio's probability,
    // independently, by counting down a gap drawn from the geometric distribution (the number
    // of failures before a success of probability `ratio`: `floor(ln U / ln(1 - ratio))`), so
    // that a request passed over costs a decrement and no random number. A kept request gets
    // a random low half of its trace id that passes the ratio test (`(low >> 1) < below`), so
    // that a collector's or a downstream service's `TraceIdRatioBased` sampler with the same
    // ratio keeps the same traces. The countdown is per thread (a process has one sampler:
    // tracing is not reloaded); `below` is not 0 (ratio 0 never draws).

    /// This thread's countdown, for a run of draws: the first gap, drawn with `ln_pass`,
    /// before the thread's first draw.
    #[inline]
    pub(super) fn take_countdown(ln_pass: f64) -> u64 {
        match SKIP.with(Cell::get) {
            UNDRAWN => gap(ln_pass),
            left => left,
        }
    }

    /// Passes over one request when this thread's countdown is running and not at its end
    /// (true); otherwise leaves it for a [`super::Draws`] to resolve.
    #[inline]
    pub(super) fn pass_one() -> bool {
        SKIP.with(|s| {
            let left = s.get();
            let passes = left != 0 && left != UNDRAWN;
            if passes {
                s.set(left - 1);
            }
            passes
        })
    }

    /// Puts back what is left of this thread's countdown after a run of draws.
    #[inline]
    pub(super) fn put_countdown(left: u64) {
        SKIP.with(|s| s.set(left));
    }

    /// A random low half of a kept request's trace id that passes the ratio test with
    /// `below` (see [`below`]).
    pub(super) fn kept_low(below: u64) -> u64 {
        let keeps = (next() >> 1) % below.max(1);
        keeps << 1 | 1
    }

    /// A geometric gap for `ln_pass` = ln(1 - ratio) (0 when the ratio is 1).
    pub(super) fn gap(ln_pass: f64) -> u64 {
        if ln_pass == f64::NEG_INFINITY {
            return 0;
        }
        // U in (0, 1]: 53 random bits, never zero.
        let u = ((next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        let g = (u.ln() / ln_pass).floor();
        if g.is_finite() && g >= 0.0 {
            (g as u64).min(UNDRAWN - 1)
        } else {
            0
        }
    }

    fn seed() -> u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id().into());
        h.finish() | 1
    }

    fn next() -> u64 {
        STATE.with(|s| {
            let mut x = s.get();
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            s.set(x);
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        })
    }

    /// A random, valid (not all zero) trace id.
    pub fn trace_id() -> [u8; 16] {
        trace_id_with(next() | 1)
    }

    /// A random trace id whose low half (the part the ratio test reads) is `low`.
    pub fn trace_id_with(low: u64) -> [u8; 16] {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&next().to_be_bytes());
        id[8..].copy_from_slice(&(low | 1).to_be_bytes());
        id
    }

    /// A random, valid span id.
    pub fn span_id() -> [u8; 8] {
        (next() | 1).to_be_bytes()
    }

    /// The spec's TraceIdRatioBased test: the trace id's last 8 bytes, as a number, below
    /// `ratio` of their range (as the SDKs compute it: shifted to 63 bits).
    pub fn ratio_keeps(trace_id: &[u8; 16], ratio: f64) -> bool {
        let mut low = [0u8; 8];
        low.copy_from_slice(&trace_id[8..]);
        low_keeps(u64::from_be_bytes(low), ratio)
    }

    /// [`ratio_keeps`] of a trace id whose low half is `low`.
    pub fn low_keeps(low: u64, ratio: f64) -> bool {
        (low >> 1) < below(ratio)
    }

    /// The bound [`low_keeps`] compares a low half shifted to 63 bits with.
    pub fn below(ratio: f64) -> u64 {
        if ratio >= 1.0 {
            u64::MAX
        } else if ratio <= 0.0 {
            0
        } else {
            (ratio * (1u64 << 63) as f64) as u64
        }
    }
}

#[cfg(test)]
mod tests;
