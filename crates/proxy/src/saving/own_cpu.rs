//! autoprep's own CPU time, from `/proc/self/stat` (utime + stime): what the user pays for the
//! sidecar on the application's nodes, set beside what it saves the cluster.

/// Clock ticks per second of `/proc`'s times: `USER_HZ`, 100 on every Linux architecture
/// autoprep builds for (asking `sysconf` would need `unsafe`, which the workspace forbids).
const TICKS_PER_SECOND: f64 = 100.0;

/// This process's CPU seconds (user + system) so far; `None` where `/proc` is not Linux's.
pub fn seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat)
}

/// utime + stime of a `/proc/PID/stat` line, in seconds. The command name (field 2) is in
/// parentheses and may hold spaces: fields are counted after its closing one.
fn parse_stat(stat: &str) -> Option<f64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    // After the name: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_after_the_name() {
        let line = "4242 (auto prep) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 9 0 \
                    100 100000 1000 18446744073709551615";
        assert_eq!(parse_stat(line), Some(3.8));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[test]
    fn this_process_has_spent_some_cpu() {
        if cfg!(target_os = "linux") {
            assert!(seconds().is_some_and(|s| s >= 0.0));
        }
    }
}
