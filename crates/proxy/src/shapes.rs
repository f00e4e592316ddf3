//! Per-shape statistics for the admin server's `/shapes`: for each statement shape the
//! normalizer produced, how often it ran, how often it was rewritten or passed through (and
//! why), how often its PREPARE failed, its mean latency and its latency percentiles (see
//! [`crate::latency`]: a histogram allocated on the shape's first answer).
//!
//! Only shapes are recorded, never the text of a statement that was not normalized (it may hold
//! literal values). Even a shape's canonical text may keep some literals inline (the selection
//! clause, function arguments, arithmetic operands: see the normalizer's module doc), so the
//! text shown is the canonical text with every remaining constant replaced by
//! [`REDACTED`], computed once when a shape is first seen.
//!
//! Cost on the data path: [`Shapes::enter`] takes one lock per normalized QUERY, and allocates
//! only for a shape not yet tracked; everything else is relaxed atomics on the shape's own
//! counters, reached through a [`ShapeRef`] the session keeps with the request.

use crate::control::{self, Group, Moments};
use autoprep_protocol::cql::lexer::tokenize;
use autoprep_protocol::cql::normalize::{fingerprint, ShapeHash};
use lru::LruCache;
use serde::Serialize;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// How many shapes are tracked; beyond that the least recently executed is forgotten.
pub const MAX_SHAPES: usize = 1000;

/// What a constant left inline in a shape's text is shown as.
pub const REDACTED: &str = "<literal>";

/// How many distinct pass-through reasons one shape counts by name; the rest go to `other`.
const REASON_SLOTS: usize = 6;

/// Counts by reason: each slot is claimed once by a reason (the set of reasons is small and
/// fixed in the code), so counting never takes a lock; reasons beyond the slots count as
/// `other`.
#[derive(Debug, Default)]
struct Reasons {
    slots: [(OnceLock<&'static str>, AtomicU64); REASON_SLOTS],
    other: AtomicU64,
}

impl Reasons {
    fn count(&self, reason: &'static str) {
        for (slot, count) in &self.slots {
            let claimed = match slot.get() {
                Some(r) => *r == reason,
                // Another thread may claim the slot first, for this reason or another.
                None => *slot.get_or_init(|| reason) == reason,
            };
            if claimed {
                count.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        self.other.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out: std::collections::BTreeMap<&'static str, u64> = self
            .slots
            .iter()
            .filter_map(|(slot, n)| slot.get().map(|r| (*r, load(n))))
            .collect();
        let other = load(&self.other);
        if other > 0 {
            out.insert("other", other);
        }
        out
    }
}

/// The statistics of one shape, updated without a lock.
#[derive(Debug)]
pub struct ShapeStats {
    /// MD5 of keyspace and canonical text, computed once when the shape is first seen.
    fingerprint: [u8; 16],
    /// The canonical text with inline constants redacted.
    text: Box<str>,
    keyspace: Option<Box<str>>,
    executions: AtomicU64,
    rewritten: AtomicU64,
    passthrough: Reasons,
    /// EXECUTEs of this shape sent to a replica of their partition.
    routed: AtomicU64,
    /// EXECUTEs of this shape with a partition key that went home instead, by why.
    not_routed: Reasons,
    prepare_failures: AtomicU64,
    latency_nanos: AtomicU64,
    latency_samples: AtomicU64,
    /// Response times for percentiles, allocated on the first (see [`crate::latency`]).
    latency: OnceLock<crate::latency::Histogram>,
    /// The other legacy pattern (see [`crate::rewrite::literal_prepare`]): PREPAREs of statements of
    /// this shape with literals inline answered from the shape, those passed through (by
    /// why), and EXECUTEs of such statements run as the shape.
    literal_answered: AtomicU64,
    literal_passed: Reasons,
    literal_executions: AtomicU64,
    /// Response times of this shape's QUERYs sent as EXECUTE, and of its control executions
    /// (see [`crate::control`]).
    rewritten_time: Moments,
    control_time: Moments,
}

/// A handle on one shape's counters, kept with a request until its response.
pub type ShapeRef = Arc<ShapeStats>;

impl ShapeStats {
    fn new(text: &str, keyspace: Option<&str>) -> ShapeStats {
        ShapeStats {
            fingerprint: fingerprint(keyspace, text),
            text: redact(text).into(),
            keyspace: keyspace.map(Into::into),
            executions: AtomicU64::new(0),
            rewritten: AtomicU64::new(0),
            passthrough: Reasons::default(),
            routed: AtomicU64::new(0),
            not_routed: Reasons::default(),
            prepare_failures: AtomicU64::new(0),
            latency: OnceLock::new(),
            latency_nanos: AtomicU64::new(0),
            latency_samples: AtomicU64::new(0),
            literal_answered: AtomicU64::new(0),
            literal_passed: Reasons::default(),
            literal_executions: AtomicU64::new(0),
            rewritten_time: Moments::default(),
            control_time: Moments::default(),
        }
    }

    fn comparison_difference(&self) -> Option<(f64, f64)> {
        control::difference(self.control_time.summary(), self.rewritten_time.summary())
    }

    /// How many QUERYs of this shape were seen (the one being decided included).
    pub fn executions(&self) -> u64 {
        self.executions.load(Ordering::Relaxed)
    }

    /// Records the response time of a request of this shape in the control comparison.
    pub fn observe_group(&self, group: Group, d: Duration) {
        match group {
            Group::Rewritten => self.rewritten_time.observe(d),
            Group::Control => self.control_time.observe(d),
            Group::Other => {}
        }
    }

    /// The control comparison: both groups' response times and the estimated server time
    /// saved per rewritten execution (control − rewritten) with its 95 % interval.
    pub fn comparison(&self) -> ControlComparison {
        let (control, rewritten) = (self.control_time.summary(), self.rewritten_time.summary());
        let diff = control::difference(control, rewritten);
        ControlComparison {
            control: GroupTimes::of(control),
            rewritten: GroupTimes::of(rewritten),
            saved_seconds_per_execution: diff.map(|d| d.0),
            ci95_seconds: diff.map(|d| d.1),
        }
    }

    /// Counts one PREPARE of a statement of this shape with literals inline: answered from
    /// the shape (`Ok`) or passed through for a reason.
    pub fn literal_prepare(&self, outcome: Result<(), &'static str>) {
        match outcome {
            Ok(()) => {
                self.literal_answered.fetch_add(1, Ordering::Relaxed);
            }
            Err(reason) => self.literal_passed.count(reason),
        }
    }

    /// Counts one EXECUTE of a statement prepared with literals inline run as this shape.
    pub fn literal_executed(&self) {
        self.literal_executions.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one QUERY of this shape sent as an EXECUTE.
    pub fn rewritten(&self) {
        self.rewritten.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one QUERY of this shape passed through unchanged, for `reason`.
    pub fn passed_through(&self, reason: &'static str) {
        self.passthrough.count(reason);
    }

    /// Counts one EXECUTE of this shape sent to a replica (`Ok`) or home for a reason.
    pub fn routing(&self, outcome: Result<(), &'static str>) {
        match outcome {
            Ok(()) => {
                self.routed.fetch_add(1, Ordering::Relaxed);
            }
            Err(reason) => self.not_routed.count(reason),
        }
    }

    /// Records the latency of one request of this shape.
    pub fn observe_latency(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.latency_nanos.fetch_add(ns, Ordering::Relaxed);
        self.latency_samples.fetch_add(1, Ordering::Relaxed);
        self.latency
            .get_or_init(crate::latency::Histogram::new)
            .record(ns);
    }

    /// The response times recorded so far (empty before the first answer).
    pub fn latency(&self) -> crate::latency::Snapshot {
        self.latency
            .get()
            .map(crate::latency::Histogram::snapshot)
            .unwrap_or_default()
    }

    /// The canonical text with inline constants redacted, as `/shapes` shows it.
    pub fn redacted_text(&self) -> &str {
        &self.text
    }

    /// The keyspace the shape was prepared in, when the connection had one.
    pub fn keyspace(&self) -> Option<&str> {
        self.keyspace.as_deref()
    }

    /// The shape's fingerprint: md5 of keyspace and canonical text.
    pub fn fingerprint(&self) -> [u8; 16] {
        self.fingerprint
    }

    /// The shape's id: md5 of keyspace and canonical text, hex (as `/shapes` shows it).
    pub fn id(&self) -> String {
        hex(&self.fingerprint)
    }

    /// A point-in-time copy, for `/shapes`.
    pub fn snapshot(&self) -> ShapeSnapshot {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let samples = load(&self.latency_samples);
        ShapeSnapshot {
            text: self.text.to_string(),
            keyspace: self.keyspace.as_deref().map(str::to_owned),
            fingerprint: hex(&self.fingerprint),
            executions: load(&self.executions),
            rewritten: load(&self.rewritten),
            passthrough: self.passthrough.snapshot(),
            routed: load(&self.routed),
            not_routed: self.not_routed.snapshot(),
            prepare_failures: load(&self.prepare_failures),
            mean_latency_seconds: (samples > 0)
                .then(|| load(&self.latency_nanos) as f64 / samples as f64 / 1e9),
            latency_samples: samples,
            latency: self.latency().percentiles(),
            control_comparison: self.comparison(),
            server_cpu: None,
            prepared_with_literals: LiteralPattern {
                answered: load(&self.literal_answered),
                passed: self.literal_passed.snapshot(),
                executions: load(&self.literal_executions),
            },
        }
    }
}

/// The statements of a shape the client prepared with their literals inline (see
/// [`crate::rewrite::literal_prepare`]), as `/shapes` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LiteralPattern {
    /// PREPAREs answered from the shape.
    pub answered: u64,
    /// PREPAREs passed through to the server, by why.
    pub passed: std::collections::BTreeMap<&'static str, u64>,
    /// EXECUTEs of those statements run as EXECUTEs of the shape.
    pub executions: u64,
}

/// One shape as `/shapes` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeSnapshot {
    /// The canonical text, constants left inline redacted.
    pub text: String,
    pub keyspace: Option<String>,
    /// md5 of keyspace and canonical text (hex), as the prepared cache keys the shape.
    pub fingerprint: String,
    /// QUERYs of this shape seen.
    pub executions: u64,
    /// Of those, sent as EXECUTE.
    pub rewritten: u64,
    /// Of those, passed through unchanged, by reason.
    pub passthrough: std::collections::BTreeMap<&'static str, u64>,
    /// EXECUTEs with a partition key sent to a replica of it (see `cluster`).
    pub routed: u64,
    /// EXECUTEs with a partition key that went through the client's upstream node, by why
    /// (`home is the replica` is routing too).
    pub not_routed: std::collections::BTreeMap<&'static str, u64>,
    /// PREPAREs of this shape that failed.
    pub prepare_failures: u64,
    /// Mean time from request to response, over `latency_samples` requests.
    pub mean_latency_seconds: Option<f64>,
    pub latency_samples: u64,
    /// Percentiles of the same response times, home and routed answers alike, within
    /// `relative_error` of the exact ones (see [`crate::latency`]); null before an answer.
    pub latency: Option<crate::latency::Percentiles>,
    /// The other legacy pattern: statements of this shape prepared with literals inline.
    pub prepared_with_literals: LiteralPattern,
    /// Response times of rewritten and control executions (see [`crate::control`]).
    pub control_comparison: ControlComparison,
    /// This shape's part of the server CPU saved and of autoprep's own CPU (see
    /// [`ShapeServerCpu`]); filled in by `/shapes`.
    pub server_cpu: Option<ShapeServerCpu>,
}

/// A shape's part of the estimate of server CPU saved (see [`crate::saving`]), seconds.
///
/// The nodes' CPU is measured for all the sidecar's rewritten QUERYs together; a shape's part
/// is apportioned by its rewritten executions times its statement's length (the server's
/// parse, the work the rewrite avoids, grows with the text), and its part of autoprep's own
/// CPU by its executions. Null while the estimate has no figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ShapeServerCpu {
    pub saved_seconds: f64,
    /// The 95 % interval.
    pub saved_low_seconds: f64,
    pub saved_high_seconds: f64,
    /// autoprep's own CPU spent on this shape's executions.
    pub own_cpu_seconds: f64,
    /// Saved less own.
    pub net_seconds: f64,
}

/// Fills each shape's [`ShapeSnapshot::server_cpu`] from the sidecar's totals: `saved` (the
/// estimate and its bounds) and `own` CPU seconds, apportioned over `all` (every tracked
/// shape, whose weights make the whole).
pub fn apportion(
    shown: &mut [ShapeSnapshot],
    all: &[ShapeSnapshot],
    saved: Option<(f64, f64, f64)>,
    own: Option<f64>,
) {
    let weight = |s: &ShapeSnapshot| s.rewritten as f64 * s.text.len() as f64;
    let total_weight: f64 = all.iter().map(weight).sum();
    let total_executions: f64 = all.iter().map(|s| s.executions as f64).sum();
    let Some((saved, low, high)) = saved else {
        return;
    };
    for s in shown {
        let part = if total_weight > 0.0 {
            weight(s) / total_weight
        } else {
            0.0
        };
        let own = own.unwrap_or(0.0)
            * if total_executions > 0.0 {
                s.executions as f64 / total_executions
            } else {
                0.0
            };
        s.server_cpu = Some(ShapeServerCpu {
            saved_seconds: saved * part,
            saved_low_seconds: low * part,
            saved_high_seconds: high * part,
            own_cpu_seconds: own,
            net_seconds: saved * part - own,
        });
    }
}

/// One group's response times in `/shapes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupTimes {
    pub samples: u64,
    pub mean_seconds: Option<f64>,
}

impl GroupTimes {
    fn of(s: control::Summary) -> GroupTimes {
        GroupTimes {
            samples: s.samples,
            mean_seconds: (s.samples > 0).then_some(s.mean),
        }
    }
}

/// The control comparison of a shape, as `/shapes` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ControlComparison {
    /// Executions sent as the application's own QUERY.
    pub control: GroupTimes,
    /// Executions sent as EXECUTE of the shape.
    pub rewritten: GroupTimes,
    /// Mean control − mean rewritten response time, once both groups have a few samples.
    pub saved_seconds_per_execution: Option<f64>,
    /// Half-width of its 95 % confidence interval (Welch).
    pub ci95_seconds: Option<f64>,
}

/// The tracked shapes: a bounded LRU keyed by the shape's hash in its keyspace.
#[derive(Debug)]
pub struct Shapes {
    inner: Mutex<LruCache<ShapeHash, ShapeRef>>,
    evicted: AtomicU64,
}

impl Default for Shapes {
    fn default() -> Self {
        Shapes::new(MAX_SHAPES)
    }
}

impl Shapes {
    /// Tracks at most `capacity` shapes.
    pub fn new(capacity: usize) -> Shapes {
        Shapes {
            inner: Mutex::new(LruCache::new(
                NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            )),
            evicted: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LruCache<ShapeHash, ShapeRef>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one QUERY of a shape and returns its counters. `text` is the normalizer's
    /// canonical text; it is read (redacted, fingerprinted) only the first time the shape is
    /// seen, and outside the lock.
    pub fn enter(&self, hash: ShapeHash, keyspace: Option<&str>, text: &str) -> ShapeRef {
        let shape = self.get_or_add(hash, keyspace, text);
        shape.executions.fetch_add(1, Ordering::Relaxed);
        shape
    }

    /// The counters of a shape, tracked from now on if it was not, without counting a QUERY.
    pub fn get_or_add(&self, hash: ShapeHash, keyspace: Option<&str>, text: &str) -> ShapeRef {
        let known = self.lock().get(&hash).cloned();
        let shape = match known {
            Some(s) => s,
            None => {
                let s = Arc::new(ShapeStats::new(text, keyspace));
                let mut map = self.lock();
                // Another connection may have added it meanwhile: keep the first.
                if let Some(first) = map.get(&hash) {
                    return first.clone();
                }
                if map.push(hash, s.clone()).is_some() {
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
                s
            }
        };
        shape
    }

    /// Counts a failed PREPARE of a shape (if it is still tracked).
    pub fn prepare_failed(&self, hash: ShapeHash) {
        if let Some(s) = self.lock().peek(&hash) {
            s.prepare_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many shapes are tracked.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no shape is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many shapes were forgotten to stay within the capacity.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// The response time saved over the tracked shapes (see [`crate::control`]): per shape
    /// with enough samples in both groups, the difference of mean response times times its
    /// QUERYs sent as EXECUTE. Latency, not server CPU.
    pub fn response_time_saved(&self) -> f64 {
        let all: Vec<ShapeRef> = self.lock().iter().map(|(_, s)| s.clone()).collect();
        all.iter()
            .filter_map(|s| {
                let (saved, _) = s.comparison_difference()?;
                Some(saved * s.rewritten.load(Ordering::Relaxed) as f64)
            })
            .sum()
    }

    /// The response times of the `limit` most executed shapes (by id, most executed first),
    /// and those of every other tracked shape merged: the bounded series of
    /// `autoprep_shape_request_duration_seconds`.
    pub fn latency_series(
        &self,
        limit: usize,
    ) -> (
        Vec<(String, crate::latency::Snapshot)>,
        crate::latency::Snapshot,
    ) {
        let mut all: Vec<ShapeRef> = self.lock().iter().map(|(_, s)| s.clone()).collect();
        all.sort_by_key(|s| std::cmp::Reverse(s.executions()));
        let mut other = crate::latency::Snapshot::default();
        let mut top = Vec::with_capacity(limit);
        for (i, s) in all.iter().enumerate() {
            let l = s.latency();
            if i < limit {
                top.push((s.id(), l));
            } else {
                other.merge(&l);
            }
        }
        (top, other)
    }

    /// The `limit` most executed shapes, most executed first.
    pub fn top(&self, limit: usize) -> Vec<ShapeSnapshot> {
        // Copy the handles out so that the lock is held only for the walk of the map.
        let all: Vec<ShapeRef> = self.lock().iter().map(|(_, s)| s.clone()).collect();
        let mut snaps: Vec<ShapeSnapshot> = all.iter().map(|s| s.snapshot()).collect();
        snaps.sort_by(|a, b| {
            b.executions
                .cmp(&a.executions)
                .then_with(|| a.text.cmp(&b.text))
        });
        snaps.truncate(limit);
        snaps
    }
}

/// The canonical text with every constant token replaced by [`REDACTED`]. A text the lexer
/// rejects (which a canonical text never is) is not shown at all.
pub fn redact(text: &str) -> String {
    let Ok(tokens) = tokenize(text) else {
        return REDACTED.to_owned();
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for t in tokens.iter().filter(|t| t.kind.is_constant()) {
        out.push_str(text.get(at..t.offset).unwrap_or_default());
        out.push_str(REDACTED);
        at = t.end();
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
}

/// Lower-case hexadecimal, as Cassandra prints ids (`MD5Digest.toString`).
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u64) -> ShapeHash {
        ShapeHash(n)
    }

    #[test]
    fn counts_executions_outcomes_and_latency() {
        let shapes = Shapes::new(10);
        let text = "INSERT INTO ts (k, v) VALUES (?, ?)";
        for _ in 0..3 {
            let s = shapes.enter(h(1), Some("ks"), text);
            s.rewritten();
            s.observe_latency(Duration::from_millis(2));
        }
        let s = shapes.enter(h(1), Some("ks"), "ignored once the shape is known");
        s.passed_through("preparing");
        s.observe_latency(Duration::from_millis(6));
        shapes
            .enter(h(1), Some("ks"), text)
            .passed_through("not prepared yet");
        shapes.prepare_failed(h(1));
        shapes.prepare_failed(h(9)); // not tracked: ignored

        let top = shapes.top(10);
        assert_eq!(top.len(), 1);
        let t = &top[0];
        assert_eq!(t.text, text);
        assert_eq!(t.keyspace.as_deref(), Some("ks"));
        assert_eq!(t.fingerprint, hex(&fingerprint(Some("ks"), text)));
        assert_eq!(t.executions, 5);
        assert_eq!(t.rewritten, 3);
        assert_eq!(
            t.passthrough
                .iter()
                .map(|(k, v)| (*k, *v))
                .collect::<Vec<_>>(),
            [("not prepared yet", 1), ("preparing", 1)]
        );
        assert_eq!(t.prepare_failures, 1);
        assert_eq!(t.latency_samples, 4);
        let mean = t.mean_latency_seconds.unwrap();
        assert!((mean - 0.003).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn reasons_beyond_the_slots_count_as_other() {
        let shapes = Shapes::new(1);
        let s = shapes.enter(h(1), None, "SELECT * FROM t WHERE k = ?");
        let reasons = ["a", "b", "c", "d", "e", "f", "g", "h"];
        for r in reasons {
            s.passed_through(r);
        }
        s.passed_through("a");
        let snap = s.snapshot();
        assert_eq!(snap.passthrough.get("a"), Some(&2));
        assert_eq!(snap.passthrough.get("f"), Some(&1));
        assert_eq!(snap.passthrough.get("other"), Some(&2));
        assert_eq!(snap.passthrough.values().sum::<u64>(), 9);
    }

    #[test]
    fn bounded_least_recently_executed_goes_first() {
        let shapes = Shapes::new(3);
        let text = |i: u64| format!("SELECT * FROM t{i} WHERE k = ?");
        for i in 0..3 {
            shapes.enter(h(i), None, &text(i));
        }
        shapes.enter(h(0), None, &text(0)); // 1 is now the oldest
        shapes.enter(h(7), None, &text(7));
        assert_eq!(shapes.len(), 3);
        assert_eq!(shapes.evicted(), 1);
        let texts: Vec<String> = shapes.top(10).into_iter().map(|s| s.text).collect();
        assert_eq!(texts[0], text(0), "most executed first");
        assert!(!texts.contains(&text(1)));
        assert_eq!(shapes.top(2).len(), 2);
    }

    #[test]
    fn constants_left_inline_are_redacted() {
        assert_eq!(
            redact("SELECT k, 'secret', 42 FROM t WHERE k = ? AND v = blobAsText(0xcafe) AND w = -1.5e3"),
            "SELECT k, <literal>, <literal> FROM t WHERE k = ? AND v = blobAsText(<literal>) AND w = <literal>"
        );
        assert_eq!(
            redact("UPDATE t SET c = c + ? WHERE id = 5ad2c9a8-0c1a-4d1e-9c3a-2b1f8e4d6a70 AND d = 1h30m AND b = true"),
            "UPDATE t SET c = c + ? WHERE id = <literal> AND d = <literal> AND b = <literal>"
        );
        assert_eq!(
            redact("SELECT \"x'y\" FROM t WHERE k = ?"),
            "SELECT \"x'y\" FROM t WHERE k = ?"
        );
        assert_eq!(redact("SELECT 'unterminated"), REDACTED);
    }
}
