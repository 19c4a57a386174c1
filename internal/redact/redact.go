// Package redact masks the credentials in a server's URL wherever one is
// shown: usage lines, logs, and the error that refuses it; and the secrets
// of a link a customer gave (Link). A URL that does
// not parse is masked too, since a typo in the port must not print the
// password in the error about it.
package redact

import (
	"strings"
)

// Mask stands where a credential was; the same mask as net/url's
// URL.Redacted.
const Mask = "xxxxx"

// URL masks the password of scheme://user:password@host...: the part
// between the first ':' and the last '@', and the value of a password
// parameter (in what follows a URL's user info, or in a key=value string
// given in its place) however its key is spelled: see maskParams. A
// value without scheme:// is no URL this can read (postgres//u:p@db,
// u:p@db:5432/x): everything before its last '@' is masked, as it may be
// a user and password; it is shown only to say it was refused.
func URL(s string) string { return mask(s, false) }

// Userinfo is URL for servers whose user name may itself be the secret
// (NATS takes a token as nats://TOKEN@host): all of the authority before
// its last '@' is masked, user name included.
func Userinfo(s string) string { return mask(s, true) }

func mask(s string, user bool) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !isScheme(scheme) {
		s = maskParams(s, false)
		if at := strings.LastIndex(s, "@"); at >= 0 {
			return Mask + s[at:]
		}
		return s
	}
	rest, after := maskUserinfo(rest, user)
	// A password=... parameter is masked after the user info, and only in
	// what follows it: masked first, one inside a password
	// (u:s3cret&password=x@db) took the '@' as its value, so the user
	// info was left as it was and s3cret shown.
	// Only pgx's own URL form (its scheme spelled as it spells it) ends a
	// value at '&': any other string pgx reads as keyword/value pairs.
	query := scheme == "postgres" || scheme == "postgresql"
	return scheme + "://" + rest[:after] + maskParams(rest[after:], query)
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

// maskUserinfo masks the user info of what follows a URL's "://", and
// says where the text after the user info starts (0 when none is masked).
func maskUserinfo(rest string, user bool) (masked string, after int) {
	// The user info ends at the last '@' of all: a password may hold an
	// unescaped '/', '?' or '#' (which url.Parse reads as the path, the
	// query or the fragment) and '@' too (u:p@a?b@db), so no '@' after
	// one of those can be told from the password's own. An '@' in the
	// path or the query, rare in a server's URL, masks too much, never
	// too little.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return rest, 0
	}
	if user {
		return Mask + rest[at:], len(Mask) + 1
	}
	name, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return rest, 0
	}
	masked = name + ":" + Mask + rest[at:]
	return masked, len(masked) - len(rest[at+1:])
}

// Link masks a link a customer gave (a media_url) for an error or a log:
// its user info whole (a user name may be a token), and the value of every
// query parameter and the fragment, since a signed link carries its key
// there (X-Amz-Signature=..., sig=..., token=...). The scheme, the host,
// the path and the parameters' names stay, so the reader sees which file
// was meant. A link with an '@' after its first '?' or '#' cannot say
// where its user info ends (a password may hold either): all of it after
// the scheme is masked. A text without scheme:// is read as what follows
// one.
func Link(s string) string {
	prefix, rest := "", s
	if scheme, r, ok := strings.Cut(s, "://"); ok && isScheme(scheme) {
		prefix, rest = scheme+"://", r
	}
	cut := strings.IndexAny(rest, "?#")
	if cut < 0 {
		cut = len(rest)
	}
	head, tail := rest[:cut], rest[cut:]
	if strings.Contains(tail, "@") {
		return prefix + Mask
	}
	if at := strings.LastIndex(head, "@"); at >= 0 {
		head = Mask + head[at:]
	}
	return prefix + head + maskQuery(tail)
}

// maskQuery masks the values of a link's "?query#fragment" (either may be
// absent): a parameter keeps its name, one without '=' is masked whole.
func maskQuery(tail string) string {
	query, fragment, hasFragment := tail, "", false
	if i := strings.IndexByte(tail, '#'); i >= 0 {
		query, fragment, hasFragment = tail[:i], tail[i+1:], true
	}
	var b strings.Builder
	if query != "" {
		b.WriteByte('?')
		for i, p := range strings.Split(query[1:], "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			if name, _, ok := strings.Cut(p, "="); ok {
				b.WriteString(name + "=" + Mask)
			} else if p != "" {
				b.WriteString(Mask)
			}
		}
	}
	if hasFragment {
		b.WriteByte('#')
		if fragment != "" {
			b.WriteString(Mask)
		}
	}
	return b.String()
}
