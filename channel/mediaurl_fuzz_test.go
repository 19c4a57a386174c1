package channel

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/simrelay/simrelay/internal/egress/egresstest"
)

// FuzzMediaURL checks a send's media_url against docs/api.md's "Send
// checks": what validate takes parses again with net/url as an https URL of
// at most MaxMediaURL characters, without credentials, with a port from 1
// to 65535 if any, whose host, read as
// the agent's HTTP client dials it, is neither localhost nor a literal
// non-public address nor a bare number (egresstest's statement of the
// rule).
func FuzzMediaURL(f *testing.F) {
	for _, s := range []string{"https://cdn.example.com/label.png", "HTTPS://CDN.Example.com/a.png", "http://cdn.example.com/a.png",
		"https://8.8.8.8/a.png", "https://[2606:4700:4700::1111]/a.png", "https://localhost/a.png", "https://LOCALHOST./a.png",
		"https://media.localhost/a.png", "https://127.0.0.1/a.png", "https://[::1]/a.png", "https://[::ffff:a9fe:a9fe]/",
		"https://169.254.169.254/latest/meta-data", "https://[fe80::1%25eth0]/", "https://127.1/", "https://2130706433/",
		"https://0x7f.1/", "https://0177.0.0.1/", "https://127%E3%80%820%E3%80%820%E3%80%821/", "https://127.0.0.%EF%BC%91/",
		"https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/", "https://user:pw@cdn.example.com/", "https://@cdn.example.com/",
		"https:cdn.example.com", "https://cdn.example.com:0/", "https://[127.0.0.1]/", "https://[64:ff9b::7f00:1]/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		in := SendInput{Channel: WhatsApp, NumberID: "n1", To: "+15551234567", Type: "image", MediaURL: raw}
		if _, _, err := in.validate(""); err != nil {
			return
		}
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			t.Fatalf("media_url %q taken, but it does not parse: %v", raw, err)
		case u.Scheme != "https":
			t.Fatalf("media_url %q taken, scheme %q", raw, u.Scheme)
		case u.User != nil:
			t.Fatalf("media_url %q taken, with credentials", raw)
		case len(raw) > MaxMediaURL:
			t.Fatalf("media_url %q taken, %d bytes", raw, len(raw))
		case u.Hostname() == "":
			t.Fatalf("media_url %q taken, no host", raw)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				t.Fatalf("media_url %q taken, port %q", raw, p)
			}
		}
		if why := egresstest.RefusedHost(u.Hostname()); why != "" {
			t.Fatalf("media_url %q taken, whose host %q is %s", raw, u.Hostname(), why)
		}
	})
}
