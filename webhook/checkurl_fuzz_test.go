package webhook

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/egress/egresstest"
)

// FuzzCheckURL checks a receiver URL as PUT takes it, without
// --webhook-allow-private: what CheckURL returns parses again with net/url
// as an https URL of at most maxURLLength bytes, without credentials, with
// a port from 1 to 65535 if any, whose host, read as net/http dials it, is
// neither localhost nor a literal non-public address nor a bare number
// (egresstest's statement of docs/webhooks.md); deliveries take it for
// https (isHTTPS), whatever the case of its scheme; and it is taken again
// as itself.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://hooks.example.com/sms", "https://hooks.example.com:8443/sms?x=1", "HTTPS://Hooks.Example.com/",
		"https://8.8.8.8/hook", "https://[2606:4700:4700::1111]/hook", "http://hooks.example.com/sms", "https://localhost/hook",
		"https://LOCALHOST./hook", "https://api.localhost/hook", "https://127.0.0.1/hook", "https://[::ffff:127.0.0.1]/hook",
		"https://[fe80::1%25eth0]/hook", "https://127.1/hook", "https://2130706433/hook", "https://0x7f.0x1/hook",
		"https://127%E3%80%820%E3%80%820%E3%80%821/hook", "https://127.0.0.%EF%BC%91/", "https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",
		"https://user:pw@hooks.example.com/", "https://@hooks.example.com/", "https://hooks.example.com:0/", "https:hooks.example.com",
		"https://[127.0.0.1]/", "https://[::1%25lo]:443/", "https://[64:ff9b::a9fe:a9fe]/", " https://hooks.example.com/ "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := CheckURL(raw, false)
		if err != nil {
			return
		}
		u, err := url.Parse(out)
		switch {
		case err != nil:
			t.Fatalf("CheckURL(%q) = %q, which does not parse: %v", raw, out, err)
		case u.Scheme != "https" || !isHTTPS(out):
			t.Fatalf("CheckURL(%q) = %q, scheme %q, which deliveries take for https: %v", raw, out, u.Scheme, isHTTPS(out))
		case u.User != nil:
			t.Fatalf("CheckURL(%q) = %q, with credentials", raw, out)
		case len(out) > maxURLLength:
			t.Fatalf("CheckURL(%q) = %q, %d bytes", raw, out, len(out))
		case u.Hostname() == "":
			t.Fatalf("CheckURL(%q) = %q, no host", raw, out)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				t.Fatalf("CheckURL(%q) = %q, port %q", raw, out, p)
			}
		}
		if why := egresstest.RefusedHost(u.Hostname()); why != "" {
			t.Fatalf("CheckURL(%q) = %q, whose host %q is %s", raw, out, u.Hostname(), why)
		}
		if again, err := CheckURL(out, false); err != nil || again != out || out != strings.TrimSpace(out) {
			t.Fatalf("CheckURL(%q) = %q, taken again as %q, %v", raw, out, again, err)
		}
	})
}
