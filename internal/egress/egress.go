package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"golang.org/x/net/idna"
)

// ErrNonPublic is the cause of every refusal: errors.Is(err, ErrNonPublic)
// holds for an *AddressError and a *HostError.
var ErrNonPublic = errors.New("egress: address is not public")

// AddressError is a connection Control refused: the address dialled and
// its range.
type AddressError struct {
	Addr  netip.Addr
	Range string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s address", e.Addr, e.Range)
}

// Is makes errors.Is(err, ErrNonPublic) hold.
func (e *AddressError) Is(target error) bool { return target == ErrNonPublic }

// HostError is a host Host refused. Its message completes a sentence about
// the URL ("the URL is a loopback address").
type HostError struct {
	Host string
	// Range is "localhost", a range of NonPublic ("loopback", "private",
	// ...), or "" for a number that is not a plain IP address.
	Range string
}

func (e *HostError) Error() string {
	switch e.Range {
	case "":
		return "must name a host by a DNS name or a plain IP address"
	case "localhost":
		return "names localhost"
	}
	return "is a " + e.Range + " address"
}

// Is makes errors.Is(err, ErrNonPublic) hold.
func (e *HostError) Is(target error) bool { return target == ErrNonPublic }

// nonPublic lists the ranges refused: everything that is not a unicast
// address on the public Internet. IPv4-mapped IPv6 addresses are unmapped
// before the check, and NAT64 and 6to4 addresses are checked by the IPv4
// address they carry.
var nonPublic = []struct {
	prefix netip.Prefix
	name   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "protocol-assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"}, // RFC 9637, beside 2001:db8::/32
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// NonPublic reports whether a is outside the public unicast Internet, and
// names its range.
func NonPublic(a netip.Addr) (string, bool) {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return "invalid", true
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			if name, bad := NonPublic(netip.AddrFrom4([4]byte(b[12:16]))); bad {
				return "NAT64 " + name, true
			}
		case sixToFour.Contains(a):
			if name, bad := NonPublic(netip.AddrFrom4([4]byte(b[2:6]))); bad {
				return "6to4 " + name, true
			}
		}
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.name, true
		}
	}
	return "", false
}

// Host refuses, with a *HostError, a URL's host (url.URL.Hostname) that
// is not public by itself, before any DNS lookup: localhost and its
// subdomains, a non-public IP address, a number some resolvers read as
// an IPv4 address (127.1, 2130706433, 0x7f.1), and a zone (%) on anything
// but an IPv6 address. Other names pass: Control
// checks what they resolve to.
//
// A host with non-ASCII characters is first mapped as net/http maps it
// before it dials (IDNA, UTS #46): "127\u30020\u30020\u30021" (ideographic
// full stops) or "127.0.0.\uff11" (a fullwidth digit) is 127.0.0.1 there,
// and is judged as 127.0.0.1 here.
func Host(host string) error {
	if !ascii(host) {
		if mapped, err := idna.Lookup.ToASCII(host); err == nil {
			host = mapped
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return &HostError{Host: host, Range: "localhost"}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if name, bad := NonPublic(a); bad {
			return &HostError{Host: host, Range: name}
		}
		return nil
	}
	// A top-level label of digits only is no DNS name but an IP address in a
	// form some resolvers read: refuse the ambiguity. So is a zone on
	// anything but an IPv6 address (127.0.0.1%eth0): no DNS name holds a
	// '%', and a resolver that drops the zone dials the address.
	labels := strings.Split(host, ".")
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") || strings.Contains(host, "%") {
		return &HostError{Host: host}
	}
	return nil
}

// Control is a net.Dialer's Control that refuses, with an *AddressError, a
// connection to a non-public address. It runs on the address being
// dialled, after DNS resolution.
func Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: unexpected dial address %q: %w", address, err)
	}
	if name, bad := NonPublic(ap.Addr()); bad {
		return &AddressError{Addr: ap.Addr().Unmap().WithZone(""), Range: name}
	}
	return nil
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
