//! The TCP connections this process holds, read from Linux's `/proc`: the sockets among
//! `/proc/self/fd` matched by inode against the ESTABLISHED entries of `/proc/net/tcp{,6}`.
//!
//! This is how the driver test proves that a driver stays on autoprep: while only the session
//! under test is open, every connection the process holds must lead to autoprep's listener,
//! whatever the driver learned from `system.local` / `system.peers`.

use std::collections::HashSet;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// ESTABLISHED in the `st` column of `/proc/net/tcp`.
const TCP_ESTABLISHED: &str = "01";

/// The remote address of every established TCP connection this process holds.
pub fn established_remotes() -> std::io::Result<Vec<SocketAddr>> {
    let inodes = own_socket_inodes()?;
    let mut remotes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue; // no IPv6 in this kernel
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if f.len() < 10 || f[3] != TCP_ESTABLISHED {
                continue;
            }
            let Ok(inode) = f[9].parse::<u64>() else {
                continue;
            };
            if inodes.contains(&inode) {
                if let Some(addr) = parse_hex_addr(f[2]) {
                    remotes.push(addr);
                }
            }
        }
    }
    Ok(remotes)
}

fn own_socket_inodes() -> std::io::Result<HashSet<u64>> {
    let mut inodes = HashSet::new();
    for entry in fs::read_dir("/proc/self/fd")? {
        let Ok(target) = fs::read_link(entry?.path()) else {
            continue; // closed meanwhile
        };
        let target = target.to_string_lossy();
        if let Some(n) = target
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
        {
            if let Ok(n) = n.parse() {
                inodes.insert(n);
            }
        }
    }
    Ok(inodes)
}

/// `0100007F:2352` → 127.0.0.1:9042. The address is the kernel's in-memory words printed in hex:
/// one 32-bit word (IPv4) or four (IPv6), each in host (little-endian) byte order.
fn parse_hex_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [w] => IpAddr::V4(Ipv4Addr::from(w.to_le_bytes())),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].into_iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            let v6 = Ipv6Addr::from(bytes);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_hex_addresses() {
        assert_eq!(
            parse_hex_addr("0100007F:2352"),
            Some("127.0.0.1:9042".parse().unwrap())
        );
        assert_eq!(
            parse_hex_addr("0000000000000000FFFF00000100007F:2353"),
            Some("127.0.0.1:9043".parse().unwrap())
        );
        assert_eq!(
            parse_hex_addr("00000000000000000000000001000000:2352"),
            Some("[::1]:9042".parse().unwrap())
        );
        assert_eq!(parse_hex_addr("zz:1"), None);
    }
}
