//! CPU affinity of the processes a benchmark measures, set with util-linux `taskset`.
//!
//! On a machine where the server, the proxy and the load generator share the same few cores,
//! the proxy's CPU is taken from the server's, and the server's CPU per operation moves with
//! how much of the machine it gets. Pinning the server to cores of its own and the load
//! generator with its proxy to the others models the deployment autoprep is made for: a
//! sidecar on the application's host, the cluster on hosts of its own.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// A process pinned to a CPU list for as long as this lives; its former affinity (of every
/// thread) is restored when dropped.
#[derive(Debug)]
pub struct Pinned {
    pid: u32,
    former: String,
}

impl Pinned {
    /// Pins every thread of `pid` to `cpus` (a `taskset -c` list such as `1` or `0,2-3`).
    pub fn pin(pid: u32, cpus: &str) -> Result<Pinned> {
        let former = current_mask(pid)?;
        taskset(&["-a", "-p", "-c", cpus, &pid.to_string()])?;
        Ok(Pinned { pid, former })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // Threads the process started meanwhile inherited the pinned mask: -a reaches them too.
        if let Err(e) = taskset(&["-a", "-p", &self.former, &self.pid.to_string()]) {
            eprintln!(
                "could not restore the CPU affinity of pid {} to {}: {e:#}",
                self.pid, self.former
            );
        }
    }
}

/// The affinity mask of `pid` in hexadecimal, as `taskset -p` prints it.
fn current_mask(pid: u32) -> Result<String> {
    let out = taskset(&["-p", &pid.to_string()])?;
    // "pid 123's current affinity mask: 3"
    out.rsplit(':')
        .next()
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty() && m.chars().all(|c| c.is_ascii_hexdigit()))
        .with_context(|| format!("unexpected `taskset -p {pid}` output {out:?}"))
}

/// Runs taskset. With `-a` it walks the process's threads one by one, and fails when a thread
/// ends meanwhile ("No such process"): that run is repeated (a few times at most), since the
/// threads still there are what counts.
fn taskset(args: &[&str]) -> Result<String> {
    let mut attempts = 0;
    loop {
        let out = Command::new("taskset")
            .args(args)
            .output()
            .context("run taskset (util-linux) to set CPU affinity")?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        attempts += 1;
        if attempts < 5 && args.contains(&"-a") && err.contains("No such process") {
            continue;
        }
        bail!("taskset {}: {}", args.join(" "), err.trim());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `taskset` can be run here (the tests are skipped, and say so, where it cannot).
    fn have_taskset() -> bool {
        let ok = Command::new("taskset").arg("-V").output().is_ok();
        if !ok {
            eprintln!("taskset (util-linux) not installed; skipped");
        }
        ok
    }

    #[test]
    fn pins_and_restores() {
        if !have_taskset() {
            return;
        }
        let pid = std::process::id();
        let before = current_mask(pid).unwrap();
        // The lowest CPU this process may use (a container may not have CPU 0).
        let cpu = before
            .chars()
            .rev()
            .enumerate()
            .find_map(|(i, c)| {
                let d = c.to_digit(16)?;
                (d != 0).then(|| 4 * i as u32 + d.trailing_zeros())
            })
            .unwrap();
        {
            let _pinned = Pinned::pin(pid, &cpu.to_string()).unwrap();
            let mask = u128::from_str_radix(&current_mask(pid).unwrap(), 16).unwrap();
            assert_eq!(mask, 1 << cpu);
        }
        assert_eq!(current_mask(pid).unwrap(), before);
    }

    #[test]
    fn a_bad_cpu_list_is_an_error() {
        if !have_taskset() {
            return;
        }
        let err = Pinned::pin(std::process::id(), "not-a-cpu").unwrap_err();
        assert!(format!("{err:#}").contains("taskset"), "{err:#}");
    }
}
