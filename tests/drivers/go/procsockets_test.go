package main

import (
	"net/netip"
	"testing"
)

func TestParseHexAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:2352":                         "127.0.0.1:9042",
		"0000000000000000FFFF00000100007F:2353": "127.0.0.1:9043",
		"00000000000000000000000001000000:2352": "[::1]:9042",
	} {
		got, ok := parseHexAddr(in)
		if !ok || got != netip.MustParseAddrPort(want) {
			t.Errorf("parseHexAddr(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := parseHexAddr("zz:1"); ok {
		t.Errorf("parseHexAddr accepted garbage")
	}
}
