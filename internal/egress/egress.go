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
	return "is " + Described(e.Range)
}

// Described is an address of a range of NonPublic in words, with its
// article: "a loopback address", "an unspecified address", "an
// IPv4-compatible address".
func Described(rng string) string {
	if rng != "" && strings.ContainsRune("aeiouAEIOU", rune(rng[0])) {
		return "an " + rng + " address"
	}
	return "a " + rng + " address"
}

// Is makes errors.Is(err, ErrNonPublic) hold.
func (e *HostError) Is(target error) bool { return target == ErrNonPublic }

// nonPublic lists the ranges refused, the first match naming the range:
// every block of IANA's IPv4 and IPv6 Special-Purpose Address Registries
// (RFC 6890), multicast, and the IPv6 space outside 2000::/3. IPv4-mapped
// IPv6 addresses are unmapped before the check, and NAT64 (64:ff9b::/96)
// and 6to4 (2002::/16) addresses, the two blocks of the registries not
// refused outright, are judged by the IPv4 address they carry.
//
// The registries mark a few blocks "globally reachable", and they are
// refused too: the anycast services (PCP 192.0.0.9 and 2001:1::1, TURN
// 192.0.0.10 and 2001:1::2, DNS-SD 2001:1::3, AMT relays, AS112 DNS sinks)
// answer from the nearest instance, which is often one inside the
// server's own network (its PCP router, an AS112 node an operator runs
// for itself); ORCHIDv2 (2001:20::/28) and drone tags (2001:30::/28) are
// identifiers, not locators. No webhook receiver or media file is served
// from any of them, so a rule without exceptions costs nothing and is
// easier to trust.
var nonPublic = []struct {
	prefix netip.Prefix
	name   string
}{
	// IPv4 Special-Purpose Address Registry.
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},                // RFC 791, RFC 1122 3.2.1.3
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},                    // RFC 1918
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},       // RFC 6598
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},                  // RFC 1122 3.2.1.3
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},             // RFC 3927
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},                 // RFC 1918
	{netip.MustParsePrefix("192.0.0.0/24"), "protocol-assignment"},      // RFC 6890; its /29 (RFC 7335), .8 (RFC 7600), .9 PCP (RFC 7723), .10 TURN (RFC 8155), .170-.171 NAT64 discovery (RFC 8880)
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},            // RFC 5737
	{netip.MustParsePrefix("192.31.196.0/24"), "DNS sink (AS112)"},      // RFC 7535
	{netip.MustParsePrefix("192.52.193.0/24"), "multicast relay (AMT)"}, // RFC 7450
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay"},             // RFC 7526 (deprecated), with the 6a44 relay 192.88.99.2 (RFC 6751)
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},                // RFC 1918
	{netip.MustParsePrefix("192.175.48.0/24"), "DNS sink (AS112)"},      // RFC 7534
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},            // RFC 2544
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},         // RFC 5737
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},          // RFC 5737
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},     // RFC 1112; 255.255.255.255, RFC 919
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},                 // RFC 5771
	// IPv6 Special-Purpose Address Registry, and the forms of RFC 4291
	// and RFC 2765 that carry an IPv4 address.
	{netip.MustParsePrefix("::/128"), "unspecified"},                 // RFC 4291
	{netip.MustParsePrefix("::1/128"), "loopback"},                   // RFC 4291
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},              // RFC 4291 2.5.5.1 (deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated"},    // RFC 2765
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},     // RFC 8215
	{netip.MustParsePrefix("100::/64"), "discard"},                   // RFC 6666
	{netip.MustParsePrefix("100:0:0:1::/64"), "dummy"},               // RFC 9780
	{netip.MustParsePrefix("2001::/32"), "Teredo"},                   // RFC 4380
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},           // RFC 5180
	{netip.MustParsePrefix("2001::/23"), "protocol-assignment"},      // RFC 2928; anycast (RFC 7723, 8155, 9665), AMT (RFC 7450), AS112 (RFC 7535), ORCHID (RFC 4843, 7343), DETs (RFC 9374)
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},        // RFC 3849
	{netip.MustParsePrefix("2620:4f:8000::/48"), "DNS sink (AS112)"}, // RFC 7534
	{netip.MustParsePrefix("3fff::/20"), "documentation"},            // RFC 9637
	{netip.MustParsePrefix("5f00::/16"), "segment routing (SRv6)"},   // RFC 9602
	{netip.MustParsePrefix("fc00::/7"), "private"},                   // RFC 4193
	{netip.MustParsePrefix("fe80::/10"), "link-local"},               // RFC 4291
	{netip.MustParsePrefix("fec0::/10"), "site-local"},               // RFC 3879 (deprecated)
	{netip.MustParsePrefix("ff00::/8"), "multicast"},                 // RFC 4291
	// The rest of the IPv6 space outside 2000::/3, the global unicast
	// space: reserved by the IETF (IANA's IPv6 Address Space), allocated
	// to no network, so only a network's own routes can lead there.
	{netip.MustParsePrefix("::/3"), "reserved"},
	{netip.MustParsePrefix("4000::/2"), "reserved"},
	{netip.MustParsePrefix("8000::/1"), "reserved"},
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
		// Neither prefix holds another range of the table: the address
		// carried decides.
		switch {
		case nat64.Contains(a):
			if name, bad := NonPublic(netip.AddrFrom4([4]byte(b[12:16]))); bad {
				return "NAT64 " + name, true
			}
			return "", false
		case sixToFour.Contains(a):
			if name, bad := NonPublic(netip.AddrFrom4([4]byte(b[2:6]))); bad {
				return "6to4 " + name, true
			}
			return "", false
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
