//! Counts by reason: why a QUERY passed through, an EXECUTE went home, a literal PREPARE or
//! EXECUTE was sent as it was. A reason is one of a closed set of fixed labels (`&'static str`
//! constants of the normalizer, the encoder, the cache and the proxy), the labels `/metrics`
//! shows; each is counted in an atomic of its own, in a slot the label claims the first time it
//! is counted. No lock is taken: a pass-through QUERY costs a short scan that compares the
//! label's address first and one atomic add.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// How many distinct labels one counter keeps apart: more than the labels any one counter has
/// (a few dozen); a label past them is counted under [`OTHER`].
pub const SLOTS: usize = 64;

/// The label of what no slot was left for.
pub const OTHER: &str = "other";

/// Counts by reason label, lock-free.
#[derive(Debug)]
pub struct ReasonCounts {
    slots: [Slot; SLOTS],
    other: AtomicU64,
}

#[derive(Debug, Default)]
struct Slot {
    label: OnceLock<&'static str>,
    n: AtomicU64,
}

impl Default for ReasonCounts {
    fn default() -> ReasonCounts {
        ReasonCounts {
            slots: std::array::from_fn(|_| Slot::default()),
            other: AtomicU64::new(0),
        }
    }
}

/// The same label: the same constant (its address), or the same text from another constant.
fn same(a: &'static str, b: &'static str) -> bool {
    std::ptr::eq(a, b) || a == b
}

impl ReasonCounts {
    /// Adds one to the count of `reason`.
    pub fn count(&self, reason: &'static str) {
        self.add(reason, 1);
    }

    /// Adds `n` to the count of `reason`.
    pub fn add(&self, reason: &'static str, n: u64) {
        for slot in &self.slots {
            // The first free slot is claimed for `reason`, unless another thread claimed it
            // first (for `reason` too, or for another label: then the scan goes on).
            let label = *slot.label.get_or_init(|| reason);
            if same(label, reason) {
                slot.n.fetch_add(n, Ordering::Relaxed);
                return;
            }
        }
        self.other.fetch_add(n, Ordering::Relaxed);
    }

    /// The counts, by label in the labels' order (as `/metrics` lists them).
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = self
            .slots
            .iter()
            .map_while(|s| Some((*s.label.get()?, s.n.load(Ordering::Relaxed))))
            .collect();
        let other = self.other.load(Ordering::Relaxed);
        if other > 0 {
            v.push((OTHER, other));
        }
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_label_in_order() {
        let c = ReasonCounts::default();
        c.count("preparing");
        c.count("lex error");
        c.count("preparing");
        c.add("control", 3);
        assert_eq!(
            c.counts(),
            vec![("control", 3), ("lex error", 1), ("preparing", 2)]
        );
    }

    #[test]
    fn the_same_text_from_another_constant_is_the_same_label() {
        let c = ReasonCounts::default();
        let owned: &'static str = Box::leak(String::from("preparing").into_boxed_str());
        c.count("preparing");
        c.count(owned);
        assert_eq!(c.counts(), vec![("preparing", 2)]);
    }

    #[test]
    fn labels_past_the_slots_count_as_other() {
        let c = ReasonCounts::default();
        for i in 0..SLOTS + 2 {
            let label: &'static str = Box::leak(format!("r{i:03}").into_boxed_str());
            c.count(label);
        }
        let counts = c.counts();
        assert_eq!(counts.len(), SLOTS + 1);
        assert!(counts.contains(&(OTHER, 2)));
    }

    #[test]
    fn threads_count_without_losing_any() {
        let c = std::sync::Arc::new(ReasonCounts::default());
        let labels: [&'static str; 4] = ["a", "b", "c", "d"];
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        c.count(labels[(i + t) % 4]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let counts = c.counts();
        assert_eq!(counts.len(), 4);
        assert!(counts.iter().all(|(_, n)| *n == 1000));
    }
}
