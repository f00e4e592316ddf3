//! The run's course: the nodes' idle CPU (a cluster), the warm-up of every mode, then the
//! measured rounds, each running every mode once in an order that cycles through the
//! permutations of the modes.

use crate::bench::Bench;
use crate::mode::Mode;
use crate::phase::Phase;
use crate::report::{pid_list, print_phase};
use anyhow::Result;
use autoprep_benches::procfs;
use std::time::{Duration, Instant};

/// What the nodes use with no load (gossip, timers), in cores over 10 s: a part of every
/// phase's figure that grows with the phase's duration. Measured on a cluster only.
pub async fn idle_cores(b: &Bench, cluster: bool) -> Result<Option<f64>> {
    if !cluster {
        return Ok(None);
    }
    let pids = &b.server_pids;
    let cpu = || -> Result<u64> { pids.iter().map(|&p| procfs::process_ticks(p)).sum() };
    let (t0, c0) = (Instant::now(), cpu()?);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let cores = cpu()?.saturating_sub(c0) as f64 / b.ticks / t0.elapsed().as_secs_f64();
    println!("idle: the nodes used {cores:.3} cores over 10 s with no load");
    Ok(Some(cores))
}

/// Warms up the server's JIT (unprepared parsing above all), autoprep's cache and the
/// connections: each mode in turn, closed-loop, within `--warmup-seconds` in all.
pub async fn warm_up(b: &mut Bench, modes: &[Mode]) -> Result<Vec<Phase>> {
    let warm_deadline = Instant::now() + Duration::from_secs(b.args.warmup_seconds);
    let mut warmups = Vec::new();
    for &mode in modes {
        let ops = if mode == Mode::DirectUnprepared {
            b.args.warmup_ops
        } else {
            b.args.warmup_ops / 3
        };
        let left = warm_deadline.saturating_duration_since(Instant::now());
        if ops == 0 || left.is_zero() {
            continue;
        }
        // Warm-up runs closed-loop: as many operations as possible in the time.
        let p = b.phase(mode, 0, ops, left.as_secs().max(1), None).await?;
        println!(
            "warm-up {:<21} {:>8} ops {:>8.0} op/s  server {:.2} µs/op",
            mode.name(),
            p.stats.ops,
            p.stats.ops_per_sec(),
            p.server_us()
        );
        warmups.push(p);
    }
    Ok(warmups)
}

/// The measured rounds (`--rounds`; none starts after `--max-seconds` from `started`).
pub async fn measure(b: &mut Bench, modes: &[Mode], started: Instant) -> Result<Vec<Phase>> {
    let run_deadline = started + Duration::from_secs(b.args.max_seconds);
    let pids = pid_list(&b.server_pids);
    let mut phases: Vec<Phase> = Vec::new();
    for round in 0..b.args.rounds {
        if round > 0 && Instant::now() >= run_deadline {
            println!("time bound reached after {round} rounds");
            break;
        }
        for mode in nth_permutation(modes, round) {
            if mode.executes_prepared_ids() {
                // Re-prepare in case the server evicted the ids (cheap; same ids).
                b.prepare_everywhere().await?;
            }
            let (ops, secs, rate) = (b.args.ops, b.args.phase_seconds, b.args.rate);
            let p = b.phase(mode, round, ops, secs, rate).await?;
            print_phase(&p);
            if !b.server_pids.is_empty() && p.server_us() < 2.0 {
                println!(
                    "  warning: pid {pids} used {:.2} µs of CPU per operation: is it the server \
                     that answered? (--server-pid)",
                    p.server_us()
                );
            }
            phases.push(p);
        }
    }
    Ok(phases)
}

/// Permutation number `n` (cyclic) of `items` in lexicographic order of positions.
fn nth_permutation<T: Copy>(items: &[T], n: usize) -> Vec<T> {
    let count: usize = (1..=items.len()).product();
    let mut n = n % count.max(1);
    let mut pool = items.to_vec();
    let mut out = Vec::with_capacity(items.len());
    for k in (1..=items.len()).rev() {
        let f: usize = (1..k).product();
        out.push(pool.remove(n / f));
        n %= f;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_cycle_and_balance_predecessors() {
        let m = [0, 1, 2];
        let all: Vec<Vec<i32>> = (0..6).map(|r| nth_permutation(&m, r)).collect();
        assert_eq!(all[0], vec![0, 1, 2]);
        assert_eq!(all[5], vec![2, 1, 0]);
        assert_eq!(nth_permutation(&m, 6), all[0]);
        let mut pairs = std::collections::HashMap::new();
        for p in &all {
            for w in p.windows(2) {
                *pairs.entry((w[0], w[1])).or_insert(0) += 1;
            }
        }
        assert!(pairs.values().all(|&c| c == 2), "{pairs:?}");
    }
}
