package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/egress/egresstest"
)

// addrSeeds are addresses of every range the documents name, and public
// ones beside them.
var addrSeeds = []string{
	"8.8.8.8", "1.1.1.1", "0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1",
	"169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.168.1.1", "198.18.0.1",
	"198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
	"::", "::1", "::127.0.0.1", "::8.8.8.8", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:0:7f00:1",
	"64:ff9b::7f00:1", "64:ff9b::808:808", "64:ff9b:1::a00:1", "2002:a9fe:a9fe::1", "2002:808:808::1",
	"2001:0:4136:e378::1", "2001:2::1", "2001:db8::1", "3fff::1", "100::1", "fc00::1", "fd12:3456::1",
	"fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1", "2606:4700:4700::1111", "2a00:1450:4001::200e",
}

// FuzzNonPublic checks the address rule against egresstest's statement of
// it: an address NonPublic lets through is public by the documents, and
// Control, given it as a dialled address, agrees with NonPublic.
func FuzzNonPublic(f *testing.F) {
	for _, s := range addrSeeds {
		a := netip.MustParseAddr(s)
		b := a.As16()
		f.Add(b[:], a.Is4(), a.Zone())
	}
	f.Fuzz(func(t *testing.T, raw []byte, is4 bool, zone string) {
		var b [16]byte
		copy(b[:], raw)
		a := netip.AddrFrom16(b)
		if is4 {
			a = netip.AddrFrom4([4]byte(b[:4]))
		} else if zone != "" && !strings.ContainsAny(zone, "%]") {
			a = a.WithZone(zone)
		}
		name, bad := NonPublic(a)
		if !bad && !egresstest.Public(a) {
			t.Fatalf("NonPublic(%s) lets through an address the documents refuse", a)
		}
		if bad && name == "" {
			t.Fatalf("NonPublic(%s) refuses without naming a range", a)
		}
		dialled := netip.AddrPortFrom(a, 443).String()
		err := Control("tcp", dialled, nil)
		var ae *AddressError
		switch {
		case !bad && err != nil:
			t.Fatalf("Control(%s): %v, but NonPublic lets it through", dialled, err)
		case bad && (!errors.As(err, &ae) || !errors.Is(err, ErrNonPublic) || ae.Range != name):
			t.Fatalf("Control(%s): %v, want an AddressError of range %q", dialled, err, name)
		}
	})
}

// FuzzHost checks Host against egresstest's statement of the rule: a host
// it accepts is, read as net/http dials it (IDNA-mapped, any case, a
// trailing dot), neither localhost nor a literal non-public address nor a
// bare number; and what it refuses is refused with a *HostError.
func FuzzHost(f *testing.F) {
	for _, s := range addrSeeds {
		f.Add(s)
	}
	for _, s := range []string{"cdn.example.com", "localhost", "LOCALHOST.", "media.localhost", "localhost..",
		"127.1", "2130706433", "0x7f.1", "0X7F000001", "0177.0.0.1", "017700000001", "127.0.0.1.",
		"127\u30020\u30020\u30021", "127.0.0.\uff11", "10\uff0e0\uff0e0\uff0e5", "\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54",
		"LOCALHOST\u3002", "local\u00adhost", "b\u00fccher.example", "xn--bcher-kva.example", "[::1]", "127.0.0.1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		err := Host(host)
		if err == nil {
			if why := egresstest.RefusedHost(host); why != "" {
				t.Fatalf("Host(%q) accepts %s", host, why)
			}
			return
		}
		var he *HostError
		if !errors.As(err, &he) || !errors.Is(err, ErrNonPublic) {
			t.Fatalf("Host(%q): %v, want a *HostError", host, err)
		}
	})
}
