//! Process-wide counters. Labels are bounded: opcodes by spec name, pass-through reasons from
//! fixed strings. Never a literal or bound value.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The counters of one proxy process.
#[derive(Debug, Default)]
pub struct Metrics {
    pub client_connections: AtomicU64,
    pub connections_total: AtomicU64,
    /// Requests from clients, by opcode byte.
    requests: [AtomicU64; 17],
    requests_other: AtomicU64,
    pub queries_rewritten: AtomicU64,
    passthrough: Mutex<BTreeMap<&'static str, u64>>,
    pub prepares_ok: AtomicU64,
    pub prepares_failed: AtomicU64,
    pub unprepared_recoveries: AtomicU64,
    pub bytes_from_clients: AtomicU64,
    pub bytes_to_clients: AtomicU64,
}

impl Metrics {
    /// Counts a client request by opcode.
    pub fn request(&self, opcode: u8) {
        match self.requests.get(usize::from(opcode)) {
            Some(c) => c.fetch_add(1, Ordering::Relaxed),
            None => self.requests_other.fetch_add(1, Ordering::Relaxed),
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
        let mut m = self.passthrough.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(reason).or_default() += 1;
    }

    /// Pass-through counts by reason.
    pub fn passthrough_reasons(&self) -> Vec<(&'static str, u64)> {
        let m = self.passthrough.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// Adds one to a counter.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}
