// Package egresstest states the address rule of docs/webhooks.md
// ("Addresses (SSRF)") and docs/security.md a second time, independently of
// internal/egress, for tests that check what egress and its users accept:
// written from the documents and the IANA special-purpose registries with
// other means (net/netip's predicates, byte arithmetic) than egress's table,
// so that a range missing from one shows as a disagreement.
package egresstest

import (
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Addresses are addresses of every range the documents name, and public
// ones beside them: seeds for fuzz tests.
var Addresses = []string{
	"8.8.8.8", "1.1.1.1", "0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1",
	"169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.168.1.1", "198.18.0.1",
	"198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
	"::", "::1", "::127.0.0.1", "::8.8.8.8", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:0:7f00:1",
	"64:ff9b::7f00:1", "64:ff9b::808:808", "64:ff9b:1::a00:1", "2002:a9fe:a9fe::1", "2002:808:808::1",
	"2001:0:4136:e378::1", "2001:2::1", "2001:db8::1", "3fff::1", "100::1", "fc00::1", "fd12:3456::1",
	"fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1", "2606:4700:4700::1111", "2a00:1450:4001::200e",
	// Blocks the registries mark globally reachable, refused all the same,
	// and public neighbours of the refused blocks.
	"192.0.0.9", "192.0.0.10", "192.0.0.170", "192.31.196.1", "192.52.193.1", "192.88.99.2", "192.175.48.1",
	"2001:1::1", "2001:1::3", "2001:3::1", "2001:4:112::1", "2001:10::1", "2001:20::1", "2001:30::1",
	"2620:4f:8000::1", "100:0:0:1::1", "5f00::1", "4000::1", "::2:1", "2001:200::1", "2620:4f:8001::1",
}

// Public reports whether the documents let a connect to a: a unicast
// address of the public Internet, also when written in an IPv6 form that
// carries an IPv4 address. Every block of IANA's special-purpose
// registries is refused, the ones marked globally reachable too, but for
// NAT64 (64:ff9b::/96) and 6to4 (2002::/16), which are judged by the IPv4
// address they carry; and for IPv6, only the global unicast space
// (2000::/3) is public.
func Public(a netip.Addr) bool {
	a = a.WithZone("")
	if !a.IsValid() {
		return false
	}
	if a.Is4() || a.Is4In6() {
		return public4(a.Unmap().As4())
	}
	b := a.As16()
	word := func(i int) uint16 { return uint16(b[i])<<8 | uint16(b[i+1]) }
	var v4 [4]byte
	switch {
	case word(0) == 0x64 && word(2) == 0xff9b && allZero(b[4:12]): // 64:ff9b::/96, NAT64
		copy(v4[:], b[12:])
		return public4(v4)
	case b[0]>>5 != 1: // outside 2000::/3: ::/8 with its IPv4 forms, 100::/8, 5f00::/16, fc00::/7, fe80::/10, ff00::/8, the reserved rest
		return false
	case word(0) == 0x2001 && word(2) < 0x0200: // 2001::/23, IETF protocol assignments: Teredo, benchmarking, anycast, AMT, AS112, ORCHID, DETs
		return false
	case word(0) == 0x2001 && word(2) == 0x0db8: // 2001:db8::/32, documentation
		return false
	case word(0) == 0x2620 && word(2) == 0x004f && word(4) == 0x8000: // 2620:4f:8000::/48, AS112 direct delegation
		return false
	case word(0) == 0x3fff && b[2] < 0x10: // 3fff::/20, documentation
		return false
	case word(0) == 0x2002: // 2002::/16, 6to4
		copy(v4[:], b[2:6])
		return public4(v4)
	}
	return true
}

// public4 is the IPv4 half of Public.
func public4(b [4]byte) bool {
	a := netip.AddrFrom4(b)
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() { // also 255.255.255.255, 169.254/16, 224/4
		return false
	}
	switch {
	case b[0] == 0: // this network
		return false
	case b[0] >= 224: // multicast, reserved, broadcast
		return false
	case b[0] == 100 && b[1]&0xc0 == 64: // 100.64/10, carrier-grade NAT
		return false
	case b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2): // 192.0.0/24 protocol assignments (.9 and .10 anycast too), 192.0.2/24 documentation
		return false
	case b[0] == 192 && (b[1] == 31 && b[2] == 196 || b[1] == 175 && b[2] == 48): // AS112 DNS sinks
		return false
	case b[0] == 192 && b[1] == 52 && b[2] == 193: // AMT relays
		return false
	case b[0] == 192 && b[1] == 88 && b[2] == 99: // 6to4 relay anycast (deprecated), 6a44 relay
		return false
	case b[0] == 198 && b[1]&0xfe == 18: // 198.18/15, benchmarking
		return false
	case b[0] == 198 && b[1] == 51 && b[2] == 100, b[0] == 203 && b[1] == 0 && b[2] == 113: // documentation
		return false
	}
	return true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// RefusedHost says why the documents refuse a URL's host (url.URL.Hostname)
// before any DNS lookup, or "" when they do not: localhost in any spelling,
// a literal non-public IP address, or a bare number a resolver reads as an
// IPv4 address (inet_aton's forms: 127.1, 2130706433, 0x7f.1, 0177.0.0.1),
// or a zone (%) on anything but an IPv6 address (127.0.0.1%eth0).
// A non-ASCII host is judged as net/http dials it, after IDNA mapping
// (UTS #46, the lookup profile); upper case and trailing dots change
// nothing.
func RefusedHost(host string) string {
	if strings.ContainsFunc(host, func(r rune) bool { return r >= 0x80 }) {
		if mapped, err := idna.Lookup.ToASCII(host); err == nil {
			host = mapped
		}
	}
	host = strings.TrimRight(strings.ToLower(host), ".")
	switch a, err := netip.ParseAddr(host); {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return "localhost"
	case err == nil:
		if !Public(a) {
			return "a non-public address"
		}
	case inetAton(host):
		return "a bare number"
	case strings.Contains(host, "%"):
		return "a zone on no IPv6 address"
	}
	return ""
}

// inetAton reports whether s is an IPv4 address in one of the forms of
// inet_aton(3): one to four parts, each decimal, octal (leading 0) or hex
// (0x), the last filling the remaining bytes.
func inetAton(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return false
	}
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0" // glibc reads "0x" as 0
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || strings.ContainsAny(digits, "+-_") {
			return false
		}
		bits := 8
		if i == len(parts)-1 {
			bits = 8 * (5 - len(parts))
		}
		if _, err := strconv.ParseUint(digits, base, bits); err != nil {
			return false
		}
	}
	return true
}
