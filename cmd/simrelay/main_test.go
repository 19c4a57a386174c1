package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	code, out, _ := runCmd(t, "version")
	if code != 0 || !strings.HasPrefix(out, "simrelay ") {
		t.Fatalf("version: got %d %q", code, out)
	}
	if code, _, errOut := runCmd(t); code != 2 || !strings.Contains(errOut, "simrelay serve") {
		t.Fatalf("no command: got %d %q, want 2 and the usage", code, errOut)
	}
	if code, _, errOut := runCmd(t, "bogus"); code != 2 || !strings.Contains(errOut, `unknown command "bogus"`) {
		t.Fatalf("unknown command: got %d %q", code, errOut)
	}
}

// version takes no word or flag, as no other command takes a stray one: it
// printed the version whatever followed it (simrelay version --bogus, exit
// 0). -h says what it does.
func TestVersionTakesNoArgument(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"extra", "--bogus", "--short"} {
		code, out, errOut := runCmd(t, "version", arg)
		if code != 2 || out != "" || !strings.Contains(errOut, fmt.Sprintf("simrelay version: unexpected argument %q", arg)) {
			t.Errorf("version %s: exit %d, stdout %q, stderr %q; want 2 naming the argument, no version", arg, code, out, errOut)
		}
	}
	for _, arg := range []string{"-h", "--help"} {
		code, out, errOut := runCmd(t, "version", arg)
		if code != 0 || !strings.Contains(out+errOut, "Usage: simrelay version") {
			t.Errorf("version %s: exit %d, output %q; want 0 and its usage", arg, code, out+errOut)
		}
	}
}

// The top-level usage lists every admin command that simrelay admin -h lists.
func TestUsageListsEveryAdminCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := runCmd(t, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	n := 0
	for _, line := range strings.Split(adminUsage, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "simrelay" || f[1] != "admin" {
			continue
		}
		n++
		if !strings.Contains(out, "  simrelay admin "+f[2]+" ") {
			t.Errorf("the usage lacks simrelay admin %s:\n%s", f[2], out)
		}
	}
	if n < 4 {
		t.Fatalf("found %d admin commands in the admin usage, want 4 or more", n)
	}
}

func TestServeRefusesBadSettings(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--listen", "nope"}, nil, "--listen"},
		{[]string{"--pprof-listen", "nope"}, nil, "--pprof-listen (SIMRELAY_PPROF_LISTEN) \"nope\": want host:port"},
		{[]string{"--rate-general", "0/1m"}, nil, "--rate-general"},
		{[]string{"--rate-auth", "15"}, nil, "--rate-auth"},
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{[]string{"--link-sweep", "10ms"}, nil, "--link-sweep"},
		{[]string{"--log-level", "loud"}, nil, "--log-level"},
		{[]string{"--public-url", "ftp://x"}, nil, "--public-url"},
		// Every address of the machine is no address a phone or a link can use.
		{[]string{"--listen", "0.0.0.0:0"}, nil, `--listen (SIMRELAY_LISTEN) "0.0.0.0:0" listens on every address of this machine: give --public-url (SIMRELAY_PUBLIC_URL)`},
		{[]string{"--listen", ":0"}, nil, `--listen (SIMRELAY_LISTEN) ":0" listens on every address`},
		{nil, map[string]string{"SIMRELAY_LISTEN": "[::]:0"}, `--listen (SIMRELAY_LISTEN) "[::]:0" listens on every address`},
		{[]string{"--smtp-url", "http://mail:25"}, nil, "smtp-url"},
		{[]string{"--trusted-proxies", "not-an-ip"}, nil, "trusted-proxies"},
		{[]string{"--max-conns-per-ip", "-1"}, nil, "--max-conns-per-ip (SIMRELAY_MAX_CONNS_PER_IP) -1: must not be negative"},
		{nil, map[string]string{"SIMRELAY_RATE_GENERAL": "lots"}, "SIMRELAY_RATE_GENERAL"},
		{nil, map[string]string{"SIMRELAY_SHUTDOWN_TIMEOUT": "soon"}, "SIMRELAY_SHUTDOWN_TIMEOUT"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"extra", "--shutdown-timeout", "15"}, nil, "--shutdown-timeout (SIMRELAY_SHUTDOWN_TIMEOUT)"}, // a flag after an argument is still read
		{[]string{"--webhook-allow-private", "true"}, nil, "--webhook-allow-private takes its value after '=': --webhook-allow-private=true"},
		{[]string{"--smtp-listen", "127.0.0.1:0"}, nil, "--smtp-domain (SIMRELAY_SMTP_DOMAIN): the mail domain is required"},
		{[]string{"--smtp-listen", "nope", "--smtp-domain", "sms.test"}, nil, "--smtp-listen (SIMRELAY_SMTP_LISTEN) \"nope\""},
		{[]string{"--smtp-listen", "127.0.0.1:0", "--smtp-domain", "a@b"}, nil, "--smtp-domain (SIMRELAY_SMTP_DOMAIN): \"a@b\" is not a domain"},
		{[]string{"--smtp-listen", "127.0.0.1:0", "--smtp-domain", "sms.test", "--smtp-cert", "c.pem"}, nil, "--smtp-cert (SIMRELAY_SMTP_CERT) and --smtp-key (SIMRELAY_SMTP_KEY) go together"},
		{[]string{"--smtp-listen", "127.0.0.1:0", "--smtp-domain", "sms.test", "--smtp-cert", "nonexistent.pem", "--smtp-key", "nonexistent.pem"}, nil, "--smtp-cert (SIMRELAY_SMTP_CERT) / --smtp-key (SIMRELAY_SMTP_KEY): certificate: stat nonexistent.pem"},
		{[]string{"--smtp-domain", "sms.test"}, nil, "need --smtp-listen"},
		{[]string{"--nats-url", "nats://127.0.0.1:4222"}, nil, "--nats-url (SIMRELAY_NATS_URL) joins a cluster, whose nodes share one PostgreSQL database"},
		{[]string{"--nats-url", "http://x:1", "--database-url", "postgres://x@/y"}, nil, "--nats-url (SIMRELAY_NATS_URL): \"http://x:1\": want nats://"},
		{[]string{"--node-name", "a.b", "--database-url", "postgres://x@/y"}, nil, "--node-name (SIMRELAY_NODE_NAME): node name \"a.b\""},
		{[]string{"--node-name", "n1"}, nil, "--node-name (SIMRELAY_NODE_NAME) names a node among those sharing one PostgreSQL database"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, _, errOut := runCmd(t, append([]string{"serve", "--data-dir", t.TempDir()}, c.args...)...)
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Fatalf("got exit %d, stderr %q; want 2 naming %q", code, errOut, c.want)
			}
		})
	}
}

// TestBadValuesNameTheFlag: every refused value names the flag in both
// spellings and says what it wants, printed once, never strconv's "parse error".
func TestBadValuesNameTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"SIMRELAY_SHUTDOWN_TIMEOUT": "15"}, `SIMRELAY_SHUTDOWN_TIMEOUT="15": --shutdown-timeout wants a duration such as 15s or 2m`},
		{nil, map[string]string{"SIMRELAY_MESSAGE_TTL": "1 day"}, `SIMRELAY_MESSAGE_TTL="1 day": --message-ttl wants a duration such as 15s or 2m`},
		{nil, map[string]string{"SIMRELAY_WEBHOOK_ALLOW_PRIVATE": "yes"}, `SIMRELAY_WEBHOOK_ALLOW_PRIVATE="yes": --webhook-allow-private wants true or false (or 1 or 0)`},
		{nil, map[string]string{"SIMRELAY_WEBHOOK_WORKERS": "many"}, `SIMRELAY_WEBHOOK_WORKERS="many": --webhook-workers wants a whole number`},
		{[]string{"--shutdown-timeout", "15"}, nil, `--shutdown-timeout (SIMRELAY_SHUTDOWN_TIMEOUT) "15": wants a duration such as 15s or 2m`},
		{[]string{"--webhook-allow-private=maybe"}, nil, `--webhook-allow-private (SIMRELAY_WEBHOOK_ALLOW_PRIVATE) "maybe": wants true or false (or 1 or 0)`},
		{[]string{"--webhook-workers", "4.5"}, nil, `--webhook-workers (SIMRELAY_WEBHOOK_WORKERS) "4.5": wants a whole number`},
		{[]string{"--smtp-from", "not an address"}, nil, `--smtp-from (SIMRELAY_SMTP_FROM) "not an address": want an address`},
		{[]string{"--rate-general", "100"}, nil, `--rate-general (SIMRELAY_RATE_GENERAL) "100": want COUNT/WINDOW such as 100/1m`},
		{[]string{"--rate-auth", "15/15"}, nil, `--rate-auth (SIMRELAY_RATE_AUTH) "15/15": window "15" is not a duration such as 30s, 1m or 1h: want COUNT/WINDOW such as 100/1m`},
		{nil, map[string]string{"SIMRELAY_RATE_GENERAL": "0/1m"}, `--rate-general (SIMRELAY_RATE_GENERAL) "0/1m": count must be at least 1, got 0`},
		{[]string{"--rate-login", "10"}, nil, `--rate-login (SIMRELAY_RATE_LOGIN) "10": want COUNT/WINDOW such as 100/1m`},
		{nil, map[string]string{"SIMRELAY_RATE_LOGIN": "10/100ms"}, `--rate-login (SIMRELAY_RATE_LOGIN) "10/100ms": window must be at least 1s, got 100ms`},
		{[]string{"--admin-token", "short"}, nil, `--admin-token (SIMRELAY_ADMIN_TOKEN): the token has 5 characters, want at least 32`},
		{[]string{"--signup", "invite-only"}, nil, `--signup (SIMRELAY_SIGNUP) "invite-only": want open or closed`},
		{nil, map[string]string{"SIMRELAY_SIGNUP": "Closed"}, `--signup (SIMRELAY_SIGNUP) "Closed": want open or closed`},
		{[]string{"--bogus"}, nil, `flag provided but not defined: -bogus`},
		{[]string{"--stripe-webhook-secret", "whsec_x"}, nil, `need --stripe-key (SIMRELAY_STRIPE_KEY)`},
		{[]string{"--stripe-key", "sk_test_x"}, nil, `--stripe-webhook-secret (SIMRELAY_STRIPE_WEBHOOK_SECRET) is required with --stripe-key`},
		{[]string{"--stripe-key", "sk_test_x", "--stripe-webhook-secret", "whsec_x", "--stripe-api-url", "localhost:12111"}, nil, `--stripe-api-url (SIMRELAY_STRIPE_API_URL) "localhost:12111": want an absolute http(s) URL`},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, _, errOut := runCmd(t, append([]string{"serve", "--data-dir", t.TempDir()}, c.args...)...)
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Fatalf("got exit %d, stderr %q; want 2 and %q", code, errOut, c.want)
			}
			if n := strings.Count(errOut, "\n"); n != 1 {
				t.Errorf("got %d lines on stderr, want the message once:\n%s", n, errOut)
			}
			if strings.Contains(errOut, "parse error") || strings.Contains(errOut, "pacing") || strings.Contains(errOut, "--smtp-url") || strings.Contains(errOut, "short") || strings.Contains(errOut, "sk_test_x") || strings.Contains(errOut, "whsec_x") {
				t.Errorf("stderr %q: a bare strconv error, the wrong flag or the secret itself", errOut)
			}
		})
	}
	// An admin command's flags say the same.
	t.Setenv("SIMRELAY_JSON", "sure")
	if code, _, errOut := runCmd(t, "admin", "mail", "--data-dir", t.TempDir()); code != 2 || !strings.Contains(errOut, `SIMRELAY_JSON="sure": --json wants true or false`) {
		t.Fatalf("admin mail: got %d %q", code, errOut)
	}
}

// TestMakeRunTakesFlags: make run passes ARGS to the server, and the README says so.
func TestMakeRunTakesFlags(t *testing.T) {
	t.Parallel()
	const args = "--listen 127.0.0.1:9090 --data-dir ./other"
	if lines := makeDry(t, "run", "ARGS="+args); !slices.Contains(lines, "./bin/simrelay serve "+args) {
		t.Errorf("make run ARGS=%q runs\n%s\nwant ./bin/simrelay serve %s", args, strings.Join(lines, "\n"), args)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), `make run ARGS="--listen 127.0.0.1:9090`) {
		t.Error(`README: no mention of make run ARGS="--listen ..."`)
	}
}

// TestMakeTestBoundsEachPackage: make test gives go test an explicit
// -timeout, so a slow package fails with its own limit and goroutine dump,
// not go test's default 10 minutes.
func TestMakeTestBoundsEachPackage(t *testing.T) {
	t.Parallel()
	first, second := makeTestPasses(t)
	timeout := func(pass string) time.Duration {
		args := goArgs(pass, "test")
		i := slices.Index(args, "-timeout")
		if i < 0 || i+1 == len(args) {
			t.Fatalf("make test runs %q, without -timeout", pass)
		}
		d, err := time.ParseDuration(args[i+1])
		if err != nil {
			t.Fatalf("make test runs %q: %v", pass, err)
		}
		return d
	}
	// Every package under -race, the longest first (SLOW_FIRST), then the
	// rest (./...).
	if args := goArgs(first, "test"); !slices.Contains(args, "-race") || args[len(args)-1] != "./..." || !slices.Contains(args, "./httpapi") {
		t.Fatalf("make test runs %q first, want go test -race over SLOW_FIRST's packages then ./...", first)
	}
	// Again on PostgreSQL, bounded as the first pass; without -race (the
	// Makefile says why).
	if !strings.Contains(second, "SIMRELAY_TEST_STORE=postgres ") || slices.Contains(goArgs(second, "test"), "-race") {
		t.Fatalf("make test then runs %q, want the server's suites again on PostgreSQL, without -race", second)
	}
	if d, again := timeout(first), timeout(second); d <= 10*time.Minute || again != d {
		t.Fatalf("make test's passes run with -timeout %v and %v, want one duration above go test's default 10m", d, again)
	}
}

// TestMakeTestBuildsWithoutTheCheckoutsPath: make test's builds (its two
// passes and test-binaries) run with -trimpath (TEST_GOFLAGS), so a clone
// in another directory finds the packages compiled before in the build
// cache instead of compiling them all again.
func TestMakeTestBuildsWithoutTheCheckoutsPath(t *testing.T) {
	t.Parallel()
	builds := goRuns(makeDry(t, "test"), "test", "build")
	if len(builds) != 3 {
		t.Fatalf("make test runs go %d times, want 3 (test-binaries, the two passes):\n%s", len(builds), strings.Join(builds, "\n"))
	}
	for _, b := range builds {
		v, ok := strings.CutPrefix(b, "GOFLAGS='")
		flags, _, closed := strings.Cut(v, "'")
		if !ok || !closed || !slices.Contains(strings.Fields(flags), "-trimpath") {
			t.Errorf("%s\nruns without -trimpath in GOFLAGS", b)
		}
	}
}

// TestMakeTestRunsEveryStoreSuiteOnPostgreSQL: every package whose tests
// open the server's store through internal/storetest is in PG_SUITES, so
// make test runs it on PostgreSQL too.
func TestMakeTestRunsEveryStoreSuiteOnPostgreSQL(t *testing.T) {
	t.Parallel()
	suites := pgSuites(t)
	covered := func(pkg string) bool {
		for _, s := range suites {
			if s == pkg || (strings.HasSuffix(s, "/...") && strings.HasPrefix(pkg+"/", strings.TrimSuffix(s, "..."))) {
				return true
			}
		}
		return false
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "store" || d.Name() == "internal" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir // the store's suites run on both backends by themselves
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if pkg := "./" + filepath.ToSlash(rel); bytes.Contains(src, []byte(`"github.com/simrelay/simrelay/internal/storetest"`)) && !covered(pkg) {
			t.Errorf("%s opens stores through internal/storetest, and PG_SUITES lacks %s", path, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBinaryIsBuiltOnce: the tests that run simrelay share one build of it.
func TestBinaryIsBuiltOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if a, b := buildBinary(t), buildBinary(t); a != b {
		t.Fatalf("buildBinary built %s and then %s, want one binary for the package", a, b)
	}
}

// serveFlags is serve's configuration bound to a flag set of its own
// that prints nothing, for a test to parse arguments into.
func serveFlags() (*serveConfig, *flag.FlagSet) {
	cfg := new(serveConfig)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.flags(fs)
	return cfg, fs
}

func TestEnvTwinsAndFlagPrecedence(t *testing.T) {
	cfg, fs := serveFlags()
	t.Setenv("SIMRELAY_LISTEN", "127.0.0.1:9999")
	t.Setenv("SIMRELAY_RATE_AUTH", "5/1m")
	t.Setenv("SIMRELAY_TRUSTED_PROXIES", "10.0.0.1, 192.168.0.0/16")
	if err := parseFlags(fs, []string{"--rate-auth", "7/1m"}, 0); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "127.0.0.1:9999" {
		t.Errorf("listen: got %q, want the environment's 127.0.0.1:9999", cfg.listen)
	}
	if cfg.auth.Limit != 7 {
		t.Errorf("rate-auth: got %d, want the flag's 7 over the environment's 5", cfg.auth.Limit)
	}
	if cfg.publicURL != "" {
		t.Errorf("public URL: got %q, want it left to the bound address", cfg.publicURL)
	}
	if got := cfg.trustedProxies.String(); got != "10.0.0.1/32,192.168.0.0/16" {
		t.Errorf("trusted proxies: got %q", got)
	}
}

// A server listening on every address of its machine runs once it is told
// the address its users and phones reach (its links, pairing codes and
// ws_url name that, never 0.0.0.0 or [::]).
func TestServeOnEveryAddressWithAPublicURL(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		cfg, fs := serveFlags()
		if err := parseFlags(fs, []string{"--listen", listen, "--public-url", "http://192.0.2.10:8080/"}, 0); err != nil {
			t.Fatal(err)
		}
		if err := cfg.validate(); err != nil {
			t.Fatalf("--listen %s with --public-url: %v", listen, err)
		}
		if cfg.publicURL != "http://192.0.2.10:8080" {
			t.Errorf("--listen %s: public URL %q, want http://192.0.2.10:8080", listen, cfg.publicURL)
		}
	}
}

func TestAdminCreateCompany(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	admin := func(args ...string) (int, string, string) { return st.admin(t, args...) }
	code, out, errOut := admin("create-company", "--company", "Acme", "--email", "you@example.com", "--password", "Change-me-123")
	if code != 0 {
		t.Fatalf("got exit %d: %s", code, errOut)
	}
	var got struct {
		CompanyID uint64 `json:"companyId"`
		UserID    uint64 `json:"userId"`
		APIKey    string `json:"apiKey"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.CompanyID == 0 || got.UserID == 0 || !strings.HasPrefix(got.APIKey, "sk_") {
		t.Fatalf("got %q (%v), want {companyId, userId, apiKey}", out, err)
	}
	// The same address again, and a weak password, are clear usage errors.
	code, _, errOut = admin("create-company", "--company", "Acme", "--email", "you@example.com", "--password", "Change-me-123")
	if code == 0 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("duplicate: got %d %q", code, errOut)
	}
	code, _, errOut = admin("create-company", "--company", "B", "--email", "b@example.com", "--password", "weak")
	if code != 2 || !strings.Contains(errOut, "--password") {
		t.Fatalf("weak password: got %d %q", code, errOut)
	}
	code, _, errOut = admin("create-company")
	if code != 2 || !strings.Contains(errOut, "--company") {
		t.Fatalf("missing flags: got %d %q", code, errOut)
	}

	code, out, _ = admin("mail")
	if code != 0 || !strings.Contains(out, "empty") {
		t.Fatalf("admin mail: got %d %q", code, out)
	}
	code, out, errOut = admin("set-plan", "--company", fmt.Sprint(got.CompanyID), "--plan", "pro")
	if code != 0 || !strings.Contains(out, `"planId":"pro"`) {
		t.Fatalf("set-plan: got %d %q %q", code, out, errOut)
	}
	backup := filepath.Join(t.TempDir(), "copy")
	code, out, errOut = admin("backup", backup)
	if st.databaseURL != "" {
		// A database is backed up with pg_dump; nothing was written.
		if code != 2 || !strings.Contains(errOut, "pg_dump") || out != "" {
			t.Fatalf("backup on PostgreSQL: got %d %q %q, want 2 pointing to pg_dump", code, out, errOut)
		}
		if _, err := os.Stat(backup); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("backup on PostgreSQL wrote %s (%v)", backup, err)
		}
		if entries, _ := os.ReadDir(st.dir); len(entries) != 0 {
			t.Fatalf("admin commands on PostgreSQL wrote %d files in --data-dir", len(entries))
		}
		return
	}
	if code != 0 || !strings.Contains(out, "wrote") {
		t.Fatalf("backup: got %d %q %q", code, out, errOut)
	}
	restored := t.TempDir()
	if err := os.Rename(backup, filepath.Join(restored, boltstore.FileName)); err != nil {
		t.Fatal(err)
	}
	b, err := boltstore.Open(restored, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Company(got.CompanyID); err != nil {
		t.Fatalf("the backup lacks the company: %v", err)
	}
}

// create-company names its admin with --first-name and --last-name, and
// without them reads the name in the e-mail address rather than calling
// everyone "Admin".
func TestAdminCreateCompanyNamesTheAdmin(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	st.dir = filepath.Join(st.dir, "new") // create-company starts a store where there is none
	cases := []struct {
		args        []string
		first, last string
	}{
		{[]string{"--email", "ops@acme.example", "--first-name", "Ana", "--last-name", "Lima"}, "Ana", "Lima"},
		{[]string{"--email", "bo.de.vries+sms@acme.example"}, "Bo", "De Vries"},
		{[]string{"--email", "cy@acme.example", "--last-name", "Okafor"}, "Cy", "Okafor"},
	}
	for _, c := range cases {
		args := append(append([]string{"admin", "create-company", "--company", "Acme", "--password", "Change-me-123"}, st.args()...), c.args...)
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		var got struct {
			UserID uint64 `json:"userId"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %q: %v", c.args, out, err)
		}
		u := readUser(t, st, got.UserID)
		if u.FirstName != c.first || u.LastName != c.last {
			t.Errorf("%v: got %q %q, want %q %q", c.args, u.FirstName, u.LastName, c.first, c.last)
		}
	}
	code, _, errOut := runCmd(t, append([]string{"admin", "create-company", "--company", "B", "--email", "b@example.com", "--password", "Change-me-123",
		"--last-name", strings.Repeat("x", 101)}, st.args()...)...)
	if code != 2 || !strings.Contains(errOut, "--last-name is too long.") {
		t.Errorf("a long name: got %d %q, want 2 naming --last-name", code, errOut)
	}
	if code, _, errOut := runCmd(t, "admin", "create-company", "-h"); code != 0 || !strings.Contains(errOut, "--first-name  [SIMRELAY_FIRST_NAME]") {
		t.Errorf("help: got %d %q, want --first-name listed", code, errOut)
	}
}

// Admin commands other than create-company work on an existing store: a
// data dir without one (a typo, the wrong working directory) is refused
// with the reason, and nothing is created there.
func TestAdminRefusesADataDirWithoutAStore(t *testing.T) {
	storetest.EmbeddedOnly(t, "a data dir without a store file")
	t.Parallel()
	emptyFile := t.TempDir()
	if err := os.WriteFile(filepath.Join(emptyFile, boltstore.FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dc := range []struct {
		name, dir, want string
	}{
		{"missing", filepath.Join(t.TempDir(), "typo"), "no store there (no " + boltstore.FileName + ")"},
		{"empty", t.TempDir(), "no store there (no " + boltstore.FileName + ")"},
		{"zero-length file", emptyFile, "no store there yet (" + boltstore.FileName + " is empty"},
	} {
		backup := filepath.Join(t.TempDir(), "copy")
		for _, args := range [][]string{
			{"admin", "mail"},
			{"admin", "backup", backup},
			{"admin", "set-plan", "--company", "1", "--plan", "pro"},
			{"admin", "delete-device", "--company", "1", "--device", ".."},
			{"admin", "delete-company", "--company", "1", "--confirm", "Acme"},
		} {
			code, out, errOut := runCmd(t, append(args, "--data-dir", dc.dir)...)
			want := `--data-dir (SIMRELAY_DATA_DIR) "` + dc.dir + `": ` + dc.want
			if code != 1 || !strings.Contains(errOut, want) || out != "" {
				t.Errorf("%s: %v: got %d %q %q, want 1 and %q", dc.name, args[:2], code, out, errOut, want)
			}
		}
		entries, err := os.ReadDir(dc.dir)
		switch {
		case dc.name == "missing" && !errors.Is(err, os.ErrNotExist):
			t.Errorf("%s: the data dir was created (%v)", dc.name, err)
		case dc.name == "empty" && len(entries) != 0:
			t.Errorf("%s: %d files were created in the data dir", dc.name, len(entries))
		}
		if fi, err := os.Stat(filepath.Join(emptyFile, boltstore.FileName)); err != nil || fi.Size() != 0 {
			t.Errorf("%s: the zero-length file was written (%v)", dc.name, err)
		}
		if _, err := os.Stat(backup); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: backup wrote %s (%v)", dc.name, backup, err)
		}
	}
}

// Each admin command waits out the store's lock timeout before it fails:
// the three wait at once.
func TestAdminOnAHeldStoreFailsFast(t *testing.T) {
	storetest.EmbeddedOnly(t, "the store file's lock")
	t.Parallel()
	dir := t.TempDir()
	held, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() }) // after the subtests
	// Each command says what to do instead that fits it: only a backup can be
	// had from the running server.
	for _, tc := range []struct {
		args          []string
		hint, notHint string
	}{
		{[]string{"admin", "mail", "--data-dir", dir}, "writes each mail to its log", "/admin/backup"},
		{[]string{"admin", "backup", filepath.Join(t.TempDir(), "b"), "--data-dir", dir}, "GET /admin/backup", ""},
		{[]string{"admin", "create-company", "--company", "A", "--email", "a@example.com", "--password", "Change-me-123", "--data-dir", dir}, "stop it first", "/admin/backup"},
	} {
		t.Run(tc.args[1], func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runCmd(t, tc.args...)
			if code != 1 || !strings.Contains(errOut, "in use by another process") || !strings.Contains(errOut, tc.hint) ||
				(tc.notHint != "" && strings.Contains(errOut, tc.notHint)) {
				t.Errorf("%v: got %d %q, want 1 and a locked-store message saying %q (and not %q)", tc.args[:2], code, errOut, tc.hint, tc.notHint)
			}
		})
	}
}

// simrelay help CMD answers as CMD -h does: the command's own flags, not the
// general usage; a word naming no command is refused.
func TestHelpNamesACommand(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCmd(t, "help", "serve")
	if code != 0 || !strings.Contains(out+errOut, "-listen") {
		t.Errorf("help serve: exit %d, output %q; want 0 and serve's flags", code, out+errOut)
	}
	code, out, errOut = runCmd(t, "help", "admin", "delete-company")
	if code != 0 || !strings.Contains(out+errOut, "-confirm") {
		t.Errorf("help admin delete-company: exit %d, output %q; want 0 and its flags", code, out+errOut)
	}
	for _, args := range [][]string{{"help", "help"}, {"help", "-h"}, {"-h", "serve"}} {
		if code, out, _ = runCmd(t, args...); code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%q: exit %d, stdout %q; want 0 and the usage", args, code, out)
		}
	}
	if code, _, errOut = runCmd(t, "help", "bogus"); code != 2 || !strings.Contains(errOut, `unknown command "bogus"`) {
		t.Errorf("help bogus: exit %d, stderr %q; want 2 naming the word", code, errOut)
	}
}
