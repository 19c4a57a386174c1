package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/egress/egresstest"
)

// FuzzNonPublic checks the address rule against egresstest's statement of
// it: an address NonPublic lets through is public by the documents, and
// Control, given it as a dialled address, agrees with NonPublic.
func FuzzNonPublic(f *testing.F) {
	for _, s := range egresstest.Addresses {
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
	for _, s := range egresstest.Addresses {
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
