package redact

import (
	"net/url"
	"strings"
	"testing"
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
