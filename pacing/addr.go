package pacing

import "net/netip"

// IPv6PrefixBits is how much of an IPv6 address names one client for the
// limits: a /64 is what one subscriber (one home, one server) normally gets,
// and every address inside it is theirs to pick, so counting addresses one
// by one would give a single client 2^64 fresh windows.
const IPv6PrefixBits = 64

// ClientKey is the rate-limit identity of a client address: an IPv4 address
// as it is (an IPv4-mapped IPv6 address as its IPv4 form), an IPv6 address
// as its /64 prefix. Anything that does not parse is kept as given.
func ClientKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(IPv6PrefixBits)
	if err != nil {
		return ip
	}
	return p.String()
}
