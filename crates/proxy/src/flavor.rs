//! Which server each upstream node is, as its SUPPORTED answer tells (ScyllaDB announces
//! `SCYLLA_*` options; Cassandra none), and what that changes for the rewrite.
//!
//! Against ScyllaDB the proxy:
//! - binds only the literals established to convert there as on Cassandra
//!   (`autoprep_protocol::types::encode::scylla`); the rest go through as written, counted
//!   under their own `scylla: ...` reasons;
//! - sizes its admission to ScyllaDB's prepared cache. That cache is per shard, shard memory /
//!   256 with a flat 10,000 bytes per entry (about 400 statements on a 1 GiB shard), promotes an
//!   entry only at its third use and lets one-off entries push out hot ones. So a shape is
//!   prepared at its third sighting at the earliest, and at most [`SCYLLA_MAX_SHAPES`] shapes
//!   are prepared per node (about a quarter of a 1 GiB shard's cache, leaving the rest to the
//!   application's own statements);
//! - backs off when the node evicts its statements: each UNPREPARED answer to a rewritten
//!   statement halves that budget (down to [`SCYLLA_MIN_SHAPES`]), and every quiet minute
//!   gives one back. A shape refused by the budget goes through as written ("scylla cache
//!   budget").
//!
//! A node whose SUPPORTED no connection has seen yet is taken for Cassandra, as before this
//! module (drivers send OPTIONS before STARTUP, so the first driver connection tells).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most shapes prepared on one ScyllaDB node, before any back-off.
pub const SCYLLA_MAX_SHAPES: usize = 100;
/// The budget never falls below this.
pub const SCYLLA_MIN_SHAPES: usize = 8;
/// The earliest sighting at which a shape is prepared on ScyllaDB.
pub const SCYLLA_ADMISSION: u32 = 3;
/// A quiet period this long gives one shape of budget back.
const REGROW: Duration = Duration::from_secs(60);

const UNKNOWN: u8 = 0;
const CASSANDRA: u8 = 1;
const SCYLLA: u8 = 2;

/// The server flavour of every contact point, and the ScyllaDB budgets.
#[derive(Debug)]
pub struct Flavors {
    kinds: Vec<AtomicU8>,
    budgets: Vec<Mutex<Budget>>,
}

#[derive(Debug)]
struct Budget {
    cap: usize,
    since: Instant,
}

impl Flavors {
    /// `nodes` contact points, none known yet.
    pub fn new(nodes: usize) -> Flavors {
        let now = Instant::now();
        Flavors {
            kinds: (0..nodes).map(|_| AtomicU8::new(UNKNOWN)).collect(),
            budgets: (0..nodes)
                .map(|_| {
                    Mutex::new(Budget {
                        cap: SCYLLA_MAX_SHAPES,
                        since: now,
                    })
                })
                .collect(),
        }
    }

    /// Records what a SUPPORTED answer of node `node` says: `scylla` when it carries
    /// `SCYLLA_*` options.
    pub fn learn(&self, node: u32, scylla: bool) {
        if let Some(k) = self.kinds.get(node as usize) {
            k.store(if scylla { SCYLLA } else { CASSANDRA }, Ordering::Relaxed);
        }
    }

    /// Whether node `node` announced itself as ScyllaDB.
    pub fn is_scylla(&self, node: u32) -> bool {
        self.kinds
            .get(node as usize)
            .is_some_and(|k| k.load(Ordering::Relaxed) == SCYLLA)
    }

    fn budget(&self, node: u32) -> Option<std::sync::MutexGuard<'_, Budget>> {
        let m = self.budgets.get(node as usize)?;
        Some(m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// How many shapes may be prepared on ScyllaDB node `node` now.
    pub fn scylla_budget(&self, node: u32, now: Instant) -> usize {
        let Some(mut b) = self.budget(node) else {
            return SCYLLA_MAX_SHAPES;
        };
        let quiet = now.saturating_duration_since(b.since);
        let regrown = usize::try_from(quiet.as_secs() / REGROW.as_secs()).unwrap_or(usize::MAX);
        if regrown > 0 && b.cap < SCYLLA_MAX_SHAPES {
            b.cap = b.cap.saturating_add(regrown).min(SCYLLA_MAX_SHAPES);
            b.since = now;
        }
        b.cap
    }

    /// Node `node` evicted a statement of the proxy's (UNPREPARED): halve its budget.
    pub fn evicted(&self, node: u32, now: Instant) {
        if let Some(mut b) = self.budget(node) {
            b.cap = (b.cap / 2).max(SCYLLA_MIN_SHAPES);
            b.since = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavours_are_learned_per_node() {
        let f = Flavors::new(2);
        assert!(!f.is_scylla(0));
        f.learn(1, true);
        assert!(f.is_scylla(1) && !f.is_scylla(0));
        f.learn(1, false);
        assert!(!f.is_scylla(1));
        f.learn(7, true);
        assert!(!f.is_scylla(7));
    }

    #[test]
    fn evictions_halve_the_budget_and_quiet_minutes_give_it_back() {
        let f = Flavors::new(1);
        let t0 = Instant::now();
        assert_eq!(f.scylla_budget(0, t0), SCYLLA_MAX_SHAPES);
        f.evicted(0, t0);
        assert_eq!(f.scylla_budget(0, t0), SCYLLA_MAX_SHAPES / 2);
        for _ in 0..10 {
            f.evicted(0, t0);
        }
        assert_eq!(f.scylla_budget(0, t0), SCYLLA_MIN_SHAPES);
        assert_eq!(
            f.scylla_budget(0, t0 + Duration::from_secs(185)),
            SCYLLA_MIN_SHAPES + 3
        );
        assert_eq!(
            f.scylla_budget(0, t0 + Duration::from_secs(185 + 3600 * 5)),
            SCYLLA_MAX_SHAPES
        );
    }
}
