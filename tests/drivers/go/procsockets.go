// The TCP connections this process holds, read from Linux's /proc: the sockets among
// /proc/self/fd matched by inode against the ESTABLISHED entries of /proc/net/tcp{,6}.
//
// This is how the driver test proves that gocql stays on autoprep: while only the session under
// test is open, every connection the process holds must lead to autoprep's listener, whatever
// the driver learned from system.local / system.peers.

package main

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// tcpEstablished is ESTABLISHED in the st column of /proc/net/tcp.
const tcpEstablished = "01"

// establishedRemotes returns the remote address of every established TCP connection this
// process holds.
func establishedRemotes() ([]netip.AddrPort, error) {
	inodes, err := ownSocketInodes()
	if err != nil {
		return nil, err
	}
	var remotes []netip.AddrPort
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		text, err := os.ReadFile(table)
		if err != nil {
			continue // no IPv6 in this kernel
		}
		lines := strings.Split(string(text), "\n")
		for _, line := range lines[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != tcpEstablished || !inodes[f[9]] {
				continue
			}
			if addr, ok := parseHexAddr(f[2]); ok {
				remotes = append(remotes, addr)
			}
		}
	}
	return remotes, nil
}

func ownSocketInodes() (map[string]bool, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed meanwhile
		}
		if n, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(n, "]")] = true
		}
	}
	return inodes, nil
}

// parseHexAddr reads "0100007F:2352" as 127.0.0.1:9042. The address is the kernel's in-memory
// words printed in hex: one 32-bit word (IPv4) or four (IPv6), each in host (little-endian)
// byte order.
func parseHexAddr(s string) (netip.AddrPort, bool) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	bytes := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.LittleEndian.PutUint32(bytes[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(bytes)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}
