package cliflag

import (
	"flag"
	"strings"
	"testing"
)

// --database-url takes PostgreSQL URLs, from either spelling; anything else
// is refused naming the flag, and the refusal never shows the password.
func TestDatabaseURL(t *testing.T) {
	for _, good := range []string{
		"",
		"postgres://simrelay:s3cret@db.example:5432/simrelay?sslmode=require",
		"postgresql:///simrelay?host=/run/postgresql",
		"POSTGRES://db/simrelay",
		"postgres://a.example:5432,b.example:5432/simrelay?target_session_attrs=read-write",
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		u := AddDatabaseURL(fs, "")
		if err := testEnv.Parse(fs, []string{"--database-url", good}, 0); err != nil || u.URL() != good {
			t.Errorf("%q: got %q, %v; want it taken as given", good, u.URL(), err)
		}
	}
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--database-url", "mysql://root:s3cret@db/simrelay"}, "",
			`--database-url (CLIFLAG_TEST_DATABASE_URL) "mysql://root:xxxxx@db/simrelay": wants a PostgreSQL URL, postgres://`},
		{[]string{"--database-url=./data"}, "", `--database-url (CLIFLAG_TEST_DATABASE_URL) "./data": wants a PostgreSQL URL`},
		{[]string{"--database-url", "postgres://u:s3cret@db:port/x"}, "", `"postgres://u:xxxxx@db:port/x": wants a PostgreSQL URL, postgres://USER:PASSWORD@HOST:5432/DB: this one does not parse`},
		{nil, "sqlite:///var/lib/simrelay.db?password=s3cret", `CLIFLAG_TEST_DATABASE_URL="sqlite:///var/lib/simrelay.db?password=xxxxx": --database-url wants a PostgreSQL URL`},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("CLIFLAG_TEST_DATABASE_URL", c.env)
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			AddDatabaseURL(fs, "")
			err := testEnv.Parse(fs, c.args, 0)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%q shows the password", err)
			}
		})
	}
}

func TestDatabaseURLString(t *testing.T) {
	t.Parallel()
	var u DatabaseURL
	if err := u.Set("postgresql://u:s3cret@db/x"); err != nil || u.String() != "postgresql://u:xxxxx@db/x" {
		t.Errorf("String: got %q, %v; want the password masked", u.String(), err)
	}
}
