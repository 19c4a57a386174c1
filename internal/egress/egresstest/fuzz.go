package egresstest

import (
	"net/netip"
	"testing"
)

// AddDialSeeds adds each of Addresses to f's corpus as the (raw, is4)
// pair that DialAddr reads back: the corpus of the fuzz tests that check
// what a client's dialer refuses.
func AddDialSeeds(f *testing.F) {
	for _, s := range Addresses {
		a := netip.MustParseAddr(s)
		b := a.As16()
		f.Add(b[:], a.Is4())
	}
}

// DialAddr is the address a fuzz input of AddDialSeeds's shape names: raw
// padded or cut to 16 bytes, read as IPv4 from its first 4 when is4.
func DialAddr(raw []byte, is4 bool) netip.Addr {
	var b [16]byte
	copy(b[:], raw)
	if is4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b)
}
