// Package redact masks the credentials in a server's URL wherever one is
// shown: usage lines, logs, and the error that refuses it. A URL that does
// not parse is masked too, since a typo in the port must not print the
// password in the error about it.
package redact

import (
	"regexp"
	"strings"
)

// Mask stands where a credential was; the same mask as net/url's
// URL.Redacted.
const Mask = "xxxxx"

var passwordParam = regexp.MustCompile(`(?i)((?:^|[?&\s])password=)[^&#\s]*`)

// URL masks the password of scheme://user:password@host...: the part
// between the first ':' and the last '@' before the query, and a
// password=... parameter (of a URL, or of a key=value string given in its
// place). A value without :// is no URL this can read (postgres//u:p@db,
// u:p@db:5432/x): everything before its last '@' is masked, as it may be
// a user and password; it is shown only to say it was refused.
func URL(s string) string { return mask(s, false) }

// Userinfo is URL for servers whose user name may itself be the secret
// (NATS takes a token as nats://TOKEN@host): all of the authority before
// its last '@' is masked, user name included.
func Userinfo(s string) string { return mask(s, true) }

func mask(s string, user bool) string {
	s = passwordParam.ReplaceAllString(s, "${1}"+Mask)
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if at := strings.LastIndex(s, "@"); at >= 0 {
			return Mask + s[at:]
		}
		return s
	}
	// The user info ends at the last '@' of all: a password may hold an
	// unescaped '/', '?' or '#' (which url.Parse reads as the path, the
	// query or the fragment) and '@' too (u:p@a?b@db), so no '@' after
	// one of those can be told from the password's own. An '@' in the
	// path or the query, rare in a server's URL, masks too much, never
	// too little.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	if user {
		return scheme + "://" + Mask + rest[at:]
	}
	name, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return s
	}
	return scheme + "://" + name + ":" + Mask + rest[at:]
}
