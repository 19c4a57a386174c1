package cliflag

import (
	"errors"
	"flag"
	"net/url"
	"strings"

	"github.com/simrelay/simrelay/internal/redact"
)

// DatabaseURLFlag is the flag that names a PostgreSQL database for the
// store (contract section 12): serve, bench and every admin command take it.
const DatabaseURLFlag = "database-url"

// DatabaseURL is the value of --database-url: empty (the embedded store in
// --data-dir) or a postgres:// or postgresql:// URL. Its String and the
// refusal of a bad value mask the URL's password.
type DatabaseURL struct{ url string }

// AddDatabaseURL defines --database-url on fs, with a usage line saying what
// it does in this build (note).
func AddDatabaseURL(fs *flag.FlagSet, note string) *DatabaseURL {
	u := new(DatabaseURL)
	fs.Var(u, DatabaseURLFlag, "PostgreSQL database of the store, postgres://USER:PASSWORD@HOST:5432/DB (libpq's URL); empty: the embedded store in --data-dir"+note)
	return u
}

// URL is the URL as given, password included; "" when none.
func (u *DatabaseURL) URL() string { return u.url }

func (u *DatabaseURL) Set(s string) error {
	if s == "" {
		u.url = ""
		return nil
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (!strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql")) {
		return errors.New("wants a PostgreSQL URL, postgres://USER:PASSWORD@HOST:5432/DB (or postgresql://)")
	}
	// libpq allows several hosts (postgres://a:5432,b:5432/db), which
	// net/url refuses as a bad port: only a single-host URL is parsed here.
	if authority, _, _ := strings.Cut(rest, "/"); !strings.Contains(authority, ",") {
		if _, err := url.Parse(s); err != nil {
			return errors.New("wants a PostgreSQL URL, postgres://USER:PASSWORD@HOST:5432/DB: this one does not parse (a password with @, / or : wants them percent-encoded)")
		}
	}
	u.url = s
	return nil
}

// String is the URL with its password masked, for usage and logs.
func (u *DatabaseURL) String() string {
	if u == nil {
		return ""
	}
	return redact.URL(u.url)
}

// Redact masks the password of a value given to the flag, so that a refusal
// never prints it.
func (u *DatabaseURL) Redact(s string) string { return redact.URL(s) }
