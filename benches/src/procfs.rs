//! CPU accounting from Linux /proc: the CPU time of a process, the whole machine's busy time,
//! and finding the Cassandra process that listens on a port.

use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::fs;

/// Clock ticks per second of /proc/*/stat times (`getconf CLK_TCK`; 100 on every Linux port
/// this benchmark would run on, used when `getconf` is missing).
pub fn clock_ticks_per_sec() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|&t| t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of process `pid` (all its threads), in clock ticks.
pub fn process_ticks(pid: u32) -> Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("read /proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may contain spaces: fields are counted
    // from the last ')'. utime and stime are fields 14 and 15 of the whole line.
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): field n is f[n - 3].
    let utime: u64 = f.get(11).context("no utime")?.parse()?;
    let stime: u64 = f.get(12).context("no stime")?.parse()?;
    Ok(utime + stime)
}

/// Busy and total clock ticks of the whole machine (all CPUs), from the `cpu` line of /proc/stat.
pub fn machine_ticks() -> Result<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat")?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("no cpu line in /proc/stat")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Ok((total - idle, total))
}

/// The socket inodes listening on TCP `port` (IPv4 and IPv6).
fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut out = HashSet::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(f) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let c: Vec<&str> = l.split_whitespace().collect();
            // local_address is "ADDR:PORT" in hex, st 0A is LISTEN, inode is column 9.
            let (Some(local), Some(st), Some(inode)) = (c.get(1), c.get(3), c.get(9)) else {
                continue;
            };
            let p = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if p == Some(port) && *st == "0A" {
                if let Ok(i) = inode.parse() {
                    out.insert(i);
                }
            }
        }
    }
    out
}

fn holds_socket(pid: u32, inodes: &HashSet<u64>) -> bool {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    dir.flatten().any(|e| {
        fs::read_link(e.path())
            .ok()
            .and_then(|t| {
                let t = t.to_string_lossy().into_owned();
                t.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse::<u64>()
                    .ok()
            })
            .is_some_and(|i| inodes.contains(&i))
    })
}

/// The pid of the CassandraDaemon that listens on `port`: the one holding the listening socket,
/// or the only CassandraDaemon when sockets of other users cannot be inspected.
pub fn find_cassandra(port: u16) -> Result<u32> {
    let mut daemons = Vec::new();
    for e in fs::read_dir("/proc")?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmd
            .split(|&b| b == 0)
            .any(|a| a == b"org.apache.cassandra.service.CassandraDaemon")
        {
            daemons.push(pid);
        }
    }
    let inodes = listening_inodes(port);
    if let Some(&pid) = daemons.iter().find(|&&p| holds_socket(p, &inodes)) {
        return Ok(pid);
    }
    match daemons.as_slice() {
        [pid] => Ok(*pid),
        [] => bail!("no CassandraDaemon process found: pass --server-pid"),
        _ => bail!("several CassandraDaemon processes ({daemons:?}), none seen on port {port}: pass --server-pid"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_is_readable() {
        let t0 = process_ticks(std::process::id()).unwrap();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_ticks(std::process::id()).unwrap() >= t0);
        let (busy, total) = machine_ticks().unwrap();
        assert!(busy <= total && total > 0);
    }
}
