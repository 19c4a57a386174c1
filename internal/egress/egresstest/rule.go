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
}

// Public reports whether the documents let a connect to a: a unicast
// address of the public Internet, also when written in an IPv6 form that
// carries an IPv4 address.
func Public(a netip.Addr) bool {
	a = a.WithZone("")
	if !a.IsValid() {
		return false
	}
	if a.Is4() || a.Is4In6() {
		return public4(a.Unmap().As4())
	}
	if !a.IsGlobalUnicast() || a.IsPrivate() { // loopback, ::, link-local, multicast; fc00::/7
		return false
	}
	b := a.As16()
	word := func(i int) uint16 { return uint16(b[i])<<8 | uint16(b[i+1]) }
	var v4 [4]byte
	switch {
	case b[0] == 0xfe && b[1]&0xc0 == 0xc0: // fec0::/10, site-local
		return false
	case allZero(b[:12]): // ::/96, IPv4-compatible (and ::, ::1)
		return false
	case allZero(b[:8]) && word(8) == 0xffff && word(10) == 0: // ::ffff:0:a.b.c.d, IPv4-translated
		return false
	case word(0) == 0x0100 && allZero(b[2:8]): // 100::/64, discard
		return false
	case word(0) == 0x2001 && word(2) == 0: // 2001::/32, Teredo
		return false
	case word(0) == 0x2001 && word(2) == 2 && word(4) == 0: // 2001:2::/48, benchmarking
		return false
	case word(0) == 0x2001 && word(2) == 0x0db8: // 2001:db8::/32, documentation
		return false
	case word(0) == 0x3fff && b[2]&0xf0 == 0: // 3fff::/20, documentation
		return false
	case word(0) == 0x64 && word(2) == 0xff9b && word(4) == 1: // 64:ff9b:1::/48, local-use NAT64
		return false
	case word(0) == 0x64 && word(2) == 0xff9b && allZero(b[4:12]): // 64:ff9b::/96, NAT64
		copy(v4[:], b[12:])
		return public4(v4)
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
	case b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2): // 192.0.0/24 protocol assignments, 192.0.2/24 documentation
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
