package egress

import (
	"errors"
	"net"
	"net/netip"
	"testing"
)

func TestNonPublic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"2606:4700:4700::1111", false},
		{"64:ff9b::808:808", false},   // NAT64 of a public address
		{"64:ff9b:1::a00:1", true},    // local-use NAT64
		{"::ffff:0:7f00:1", true},     // IPv4-translated
		{"2001:0:4136:e378::1", true}, // Teredo
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"10.1.2.3", true},
		{"100.64.0.1", true},
		{"100.127.255.254", true},
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"169.254.169.254", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"255.255.255.255", true},
		{"::", true},
		{"::1", true},
		{"fc00::1", true},
		{"fd12:3456::1", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"ff02::1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:100.64.0.1", true},
		{"::ffff:8.8.8.8", false},
		{"::127.0.0.1", true},
		{"64:ff9b::7f00:1", true},   // NAT64 of 127.0.0.1
		{"2002:a9fe:a9fe::1", true}, // 6to4 of 169.254.169.254
		{"2002:808:808::1", false},  // 6to4 of a public address
		// Every block of the special-purpose registries, the globally
		// reachable ones included (anycast services, identifiers).
		{"192.0.0.9", true},       // PCP anycast
		{"192.0.0.171", true},     // NAT64 discovery
		{"192.31.196.1", true},    // AS112
		{"192.52.193.1", true},    // AMT
		{"192.88.99.2", true},     // 6a44 relay
		{"192.175.48.1", true},    // AS112 direct delegation
		{"2001:1::3", true},       // DNS-SD anycast
		{"2001:3::1", true},       // AMT
		{"2001:4:112::1", true},   // AS112-v6
		{"2001:20::1", true},      // ORCHIDv2
		{"2001:30::1", true},      // drone tags
		{"2620:4f:8000::1", true}, // AS112 direct delegation
		{"100:0:0:1::1", true},    // dummy prefix
		{"5f00::1", true},         // SRv6 SIDs
		{"4000::1", true},         // outside 2000::/3
		{"::2:1", true},           // ::/8, no IPv4 form
		{"2001:200::1", false},    // just past 2001::/23
		{"2620:4f:8001::1", false},
		{"192.31.197.1", false},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		name, got := NonPublic(a)
		if got != tt.want {
			t.Errorf("NonPublic(%s): got %v (%q), want %v", tt.addr, got, name, tt.want)
		}
	}
}

// Host refuses what is not public by itself and leaves names to Control.
func TestHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		want string // the HostError's range; "-" means accepted
	}{
		{"cdn.example.com", "-"},
		{"8.8.8.8", "-"},
		{"2606:4700:4700::1111", "-"},
		{"localhost", "localhost"},
		{"LOCALHOST.", "localhost"},
		{"media.localhost", "localhost"},
		{"127.0.0.1", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.0.0.5", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"127.1", ""},
		{"2130706433", ""},
		{"0x7f.1", ""},
		{"127.0.0.1%eth0", ""},
		{"example.com%eth0", ""},
		// Hosts that net/http's IDNA mapping (UTS #46) turns into a
		// literal non-public address before it dials: ideographic and
		// fullwidth full stops, fullwidth digits.
		{"127\u30020\u30020\u30021", "loopback"},
		{"127.0.0.\uff11", "loopback"},
		{"10\uff0e0\uff0e0\uff0e5", "private"},
		{"169\uff61254\uff61169\uff61254", "link-local"},
		{"LOCALHOST\u3002", "localhost"},
		{"b\u00fccher.example", "-"},
	}
	for _, tt := range tests {
		err := Host(tt.host)
		var he *HostError
		switch {
		case tt.want == "-" && err != nil:
			t.Errorf("Host(%q): got %v, want it accepted", tt.host, err)
		case tt.want == "-":
		case !errors.As(err, &he) || he.Range != tt.want || !errors.Is(err, ErrNonPublic):
			t.Errorf("Host(%q): got %v, want a HostError of range %q", tt.host, err, tt.want)
		}
	}
}

// A refusal reads as a sentence: the range's article fits it.
func TestHostErrorWords(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]string{
		"::":              "is an unspecified address",
		"::1.2.3.4":       "is an IPv4-compatible address",
		"::ffff:0:a00:1":  "is an IPv4-translated address",
		"127.0.0.1":       "is a loopback address",
		"64:ff9b::7f00:1": "is a NAT64 loopback address",
	} {
		if err := Host(host); err == nil || err.Error() != want {
			t.Errorf("Host(%q): got %v, want %q", host, err, want)
		}
	}
}

// Control refuses non-public addresses before connecting, and lets public
// ones through (the dial itself is not made here).
func TestControl(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:443", "[::1]:443", "169.254.169.254:80", "[::ffff:10.0.0.1]:443"} {
		err := Control("tcp", addr, nil)
		var ae *AddressError
		if !errors.As(err, &ae) || !errors.Is(err, ErrNonPublic) {
			t.Errorf("Control(%s): got %v, want an AddressError", addr, err)
		}
	}
	if err := Control("tcp", net.JoinHostPort("8.8.8.8", "443"), nil); err != nil {
		t.Errorf("Control(8.8.8.8:443): got %v, want nil", err)
	}
}
