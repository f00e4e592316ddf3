//! CPU accounting from Linux /proc: the CPU time of a process, the whole machine's busy time,
//! and finding the Cassandra process that listens on a port.

use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

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

/// CPU time of every live thread of process `pid` so far, in nanoseconds (the first field of
/// each thread's `/proc/PID/task/TID/schedstat`: finer than [`process_ticks`]' clock ticks);
/// `None` where those files are not readable.
pub fn process_cpu_ns(pid: u32) -> Option<u64> {
    tasks_cpu_ns(pid, |_| true)
}

/// CPU time of every thread of this process so far, in nanoseconds, up to date
/// (`CLOCK_PROCESS_CPUTIME_ID` brings the calling thread's time up to the moment, where its
/// `schedstat` lags by up to a scheduler tick while it runs without sleeping: 4 ms on the test
/// machine, against a run of a million requests through autoprep of about 550 ms).
pub fn own_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time in nanoseconds of the threads of process `pid` named `name` (their `comm`), or
/// `None` where /proc is not readable.
pub fn threads_cpu_ns(pid: u32, name: &str) -> Option<u64> {
    tasks_cpu_ns(pid, |task| {
        fs::read_to_string(task.join("comm")).is_ok_and(|c| c.trim_end() == name)
    })
}

/// The schedstat CPU time of the threads of `pid` whose /proc directory `counts`.
fn tasks_cpu_ns(pid: u32, counts: impl Fn(&std::path::Path) -> bool) -> Option<u64> {
    let mut total = 0;
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = task.ok()?.path();
        if !counts(&path) {
            continue;
        }
        let Ok(stat) = fs::read_to_string(path.join("schedstat")) else {
            // A thread that ended since the listing.
            continue;
        };
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Read and write system calls of process `pid` so far (`syscr` + `syscw` of /proc/PID/io),
/// or `None` where that file is not readable (another user's process without privileges).
pub fn process_syscalls(pid: u32) -> Option<u64> {
    let io = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let get = |k: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(get("syscr:")? + get("syscw:")?)
}

/// Context switches (voluntary and involuntary) of every live thread of process `pid` so far,
/// from /proc/PID/task/*/status, or `None` where those files are not readable. A process that
/// sends and receives with `send`/`recv` (autoprep, through tokio) does not show in the
/// read/write counts of [`process_syscalls`]; its wake-ups are what its system time follows.
pub fn process_context_switches(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(status) = fs::read_to_string(task.ok()?.path().join("status")) else {
            // A thread that ended since the listing.
            continue;
        };
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += v.trim().parse::<u64>().ok()?;
            }
        }
    }
    Some(total)
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

/// Decodes a /proc/net/tcp{,6} local address (`0100007F:2352`: host-order 32-bit words in hex).
fn parse_proc_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.rsplit_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).map(u32::from_be))
        .collect::<Result<_, _>>()
        .ok()?;
    let ip = match words.as_slice() {
        [w] => IpAddr::V4(Ipv4Addr::from(w.to_be_bytes())),
        [a, b, c, d] => {
            let mut o = [0u8; 16];
            for (i, w) in [a, b, c, d].into_iter().enumerate() {
                o[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether a socket listening on `local` accepts connections to `target`.
fn serves(local: SocketAddr, target: SocketAddr) -> bool {
    if local.port() != target.port() {
        return false;
    }
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    local.ip().is_unspecified() || canon(local.ip()) == canon(target.ip())
}

/// The socket inodes listening on a TCP address that accepts connections to `target`.
fn listening_inodes(target: SocketAddr) -> HashSet<u64> {
    let mut out = HashSet::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(f) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let c: Vec<&str> = l.split_whitespace().collect();
            // local_address is column 1, st 0A is LISTEN, inode is column 9.
            let (Some(local), Some(st), Some(inode)) = (c.get(1), c.get(3), c.get(9)) else {
                continue;
            };
            if *st == "0A" && parse_proc_addr(local).is_some_and(|a| serves(a, target)) {
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

/// The pid of the CassandraDaemon that accepts connections to `target`: the one holding the
/// listening socket, or the only CassandraDaemon when sockets of other users cannot be
/// inspected. (Several nodes may share a port on different addresses.)
pub fn find_cassandra(target: SocketAddr) -> Result<u32> {
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
    let inodes = listening_inodes(target);
    if let Some(&pid) = daemons.iter().find(|&&p| holds_socket(p, &inodes)) {
        return Ok(pid);
    }
    match daemons.as_slice() {
        [pid] => Ok(*pid),
        [] => bail!("no CassandraDaemon process found: pass --server-pid"),
        _ => bail!("several CassandraDaemon processes ({daemons:?}), none seen listening on {target}: pass --server-pid"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_addresses() {
        let a = parse_proc_addr("0100007F:2352").unwrap();
        assert_eq!(a, "127.0.0.1:9042".parse().unwrap());
        let b = parse_proc_addr("0200007F:2352").unwrap();
        assert!(!serves(b, a));
        assert!(serves(parse_proc_addr("00000000:2352").unwrap(), a));
        let v6 = parse_proc_addr("0000000000000000FFFF00000100007F:2352").unwrap();
        assert!(serves(v6, a), "{v6}");
        let any6 = parse_proc_addr("00000000000000000000000000000000:2352").unwrap();
        assert!(serves(any6, a));
        assert!(!serves(parse_proc_addr("0100007F:2353").unwrap(), a));
    }

    #[test]
    fn own_cpu_is_readable() {
        let t0 = process_ticks(std::process::id()).unwrap();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_ticks(std::process::id()).unwrap() >= t0);
        assert!(process_syscalls(std::process::id()).is_some());
        assert!(process_context_switches(std::process::id()).is_some());
        let (busy, total) = machine_ticks().unwrap();
        assert!(busy <= total && total > 0);
    }
}
