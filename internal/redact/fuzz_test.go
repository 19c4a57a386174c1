package redact

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzURL checks that what URL and Userinfo show of a server's URL never
// holds its password (nor, for Userinfo, its user name), however the URL
// is written, and is still a URL: the reader sees which server it names.
func FuzzURL(f *testing.F) {
	for _, s := range []string{
		"postgres://u:s3cret@db/x", "postgres://u:p@ss@db:5432/x?a=b", "postgres://u@db/x",
		"postgres:///x?host=/tmp&password=s3cret", "postgres://db/x?PASSWORD=s3cret&a=b", "not a url",
		"postgres://u:p/ss@db/x", "postgres//u:s3cret@db/x", "u:s3cret@db:5432/x", "host=db user=u password=s3cret",
		"nats://s3cret@bus:4222", "tls://u:s3c@ret@bus:4222/x", "http://u:s3cret@bus:bad", "postgres://u:p%40ss@db/x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(s)
		if err != nil || u.User == nil {
			return
		}
		pw, _ := u.User.Password()
		for _, c := range []struct {
			name string
			fn   func(string) string
			user bool // the user name is a secret too
		}{{"URL", URL, false}, {"Userinfo", Userinfo, true}} {
			out := c.fn(s)
			m, err := url.Parse(out)
			if err != nil && (u.Scheme == "" || strings.Contains(u.Path+u.RawQuery+u.Fragment, "@")) {
				// No URL this can read, or an '@' after the user info: all
				// before the last '@' is masked, too much, never too little.
				continue
			}
			if err != nil {
				t.Errorf("%s(%q) = %q: no longer a URL: %v", c.name, s, out, err)
				continue
			}
			if m.User == nil {
				continue
			}
			if p, _ := m.User.Password(); pw != "" && pw != Mask && p == pw {
				t.Errorf("%s(%q) = %q: the password %q is shown", c.name, s, out, pw)
			}
			if name := u.User.Username(); c.user && name != "" && name != Mask && m.User.Username() == name {
				t.Errorf("%s(%q) = %q: the user %q is shown", c.name, s, out, name)
			}
		}
	})
}

// FuzzLink checks that what Link shows of a link that net/url reads holds
// no user name or password, no query value but the mask, and no fragment
// but the mask, and is still a URL.
func FuzzLink(f *testing.F) {
	for _, s := range []string{
		"https://cdn.example.com/cat.png", "https://u:s3cret@cdn.example.com/cat.png?sig=s3cret#t",
		"https://b.s3.example/c.png?X-Amz-Signature=s&X-Amz-Expires=60", "https://h/c?tok&a=&=b#",
		"https://u:pa?ss@h/c", "https://h/c?to=a@b&k=s", "//u:p@h/c?k=v", "h/c?k=v;s=t", "https://h/p@x?k=v",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || !strings.HasPrefix(s[len(u.Scheme)+1:], "//") {
			return // no scheme://: masked as text, not read as a link
		}
		out := Link(s)
		m, err := url.Parse(out)
		if err != nil && strings.Contains(u.Path, "@") {
			return // all before the path's '@' is masked: too much, never too little
		}
		if err != nil {
			t.Fatalf("Link(%q) = %q: no longer a URL: %v", s, out, err)
		}
		if m.User != nil {
			if _, has := m.User.Password(); has || m.User.Username() != Mask {
				t.Fatalf("Link(%q) = %q: user info shown", s, out)
			}
		}
		if m.RawQuery != "" {
			for _, p := range strings.Split(m.RawQuery, "&") {
				if _, v, ok := strings.Cut(p, "="); ok && v != Mask || !ok && p != Mask && p != "" {
					t.Fatalf("Link(%q) = %q: the query shows %q", s, out, p)
				}
			}
		}
		if f := m.EscapedFragment(); f != "" && f != Mask {
			t.Fatalf("Link(%q) = %q: the fragment %q is shown", s, out, f)
		}
	})
}

// FuzzPasswordParam checks that URL and Userinfo show nothing of a
// database password however the string that carries it is written: a
// URL's query or libpq's keyword/value string, its key percent-encoded
// (pass%77ord=), spaced, quoted. template holds the marker {pw} once; with
// two secrets in its place, if pgx (the client the server connects with)
// reads a password holding the secret from both, what is shown must be the
// same for both: it then tells nothing of the secret, in any encoding.
func FuzzPasswordParam(f *testing.F) {
	for _, s := range []string{
		"postgres://db/x?password={pw}", "postgres://db/x?pass%77ord={pw}", "postgres://db/x?%70assword={pw}&a=b",
		"postgres://db/x?sslmode=disable&password=%41{pw}", "postgres://db/x?password=a#{pw}", "postgres://db/x?password= {pw}",
		"postgres://db/x?password%20={pw}", "postgres://db/x?%50ASSWORD={pw}", "postgres://u:{pw}@db/x",
		"host=db password={pw}", "host=db password = {pw}", "host=db password='a {pw}'", "host=db password=a\\ {pw}",
		"host=db pass%77ord={pw}", "password='it\\'s {pw}' host=db", "host=db password=\t{pw}", "postgres://db/x?password={pw}&password=b",
		"postgres://db/x?password=a {pw}", "postgres://db/x?password='a'{pw}",
	} {
		f.Add(s)
	}
	const marker, a, b = "{pw}", "Kx9vQ2mZ", "Wm4tR7pL"
	f.Fuzz(func(t *testing.T, template string) {
		if strings.Count(template, marker) != 1 {
			return
		}
		sa, sb := strings.Replace(template, marker, a, 1), strings.Replace(template, marker, b, 1)
		for _, c := range []struct {
			s, secret string
		}{{sa, a}, {sb, b}} {
			cfg, err := pgconn.ParseConfig(c.s)
			if err != nil || !strings.Contains(cfg.Password, c.secret) {
				return // the secret is not (in) the password pgx reads
			}
		}
		for _, c := range []struct {
			name string
			fn   func(string) string
		}{{"URL", URL}, {"Userinfo", Userinfo}} {
			if oa, ob := c.fn(sa), c.fn(sb); oa != ob {
				t.Errorf("%s shows the password: %q is %q, %q is %q", c.name, sa, oa, sb, ob)
			}
		}
	})
}
