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
// password=... parameter (in a URL's query, or in a key=value string
// given in its place). A value without scheme:// is no URL this can
// read (postgres//u:p@db, u:p@db:5432/x): everything before its last '@'
// is masked, as it may be a user and password; it is shown only to say it
// was refused.
func URL(s string) string { return mask(s, false) }

// Userinfo is URL for servers whose user name may itself be the secret
// (NATS takes a token as nats://TOKEN@host): all of the authority before
// its last '@' is masked, user name included.
func Userinfo(s string) string { return mask(s, true) }

func mask(s string, user bool) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !isScheme(scheme) {
		s = passwordParam.ReplaceAllString(s, "${1}"+Mask)
		if at := strings.LastIndex(s, "@"); at >= 0 {
			return Mask + s[at:]
		}
		return s
	}
	rest = maskUserinfo(rest, user)
	// A password=... parameter is read in the query only. Read in the
	// whole URL before the user info, one inside a password
	// (u:s3cret&password=x@db) took the '@' as its value, and the user
	// info was then left as it was, s3cret shown.
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q] + passwordParam.ReplaceAllString(rest[q:], "${1}"+Mask)
	}
	return scheme + "://" + rest
}

// isScheme reports whether s is a URL's scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' and '.'). Without one, "://" is no URL's: in
// //token@host:// the token was read as the scheme and shown.
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// maskUserinfo masks the user info of what follows a URL's "://".
func maskUserinfo(rest string, user bool) string {
	// The user info ends at the last '@' before the query: a password
	// may hold an unescaped '/' (which url.Parse reads as the path), and
	// an '@' in the path, rare in a server's URL, masks too much, never
	// too little.
	end := strings.IndexAny(rest, "?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return rest
	}
	if user {
		return Mask + rest[at:]
	}
	name, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return rest
	}
	return name + ":" + Mask + rest[at:]
}
