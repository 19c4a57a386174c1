package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
)

// unreachableDB is a PostgreSQL URL with a password where nothing listens.
const unreachableDB = "postgres://simrelay:s3cret@127.0.0.1:1/simrelay?connect_timeout=5"

// Every command that works on the store takes --database-url: given a
// database that does not answer, each stops naming it, its password masked,
// and writes no store file in --data-dir; a value that is not a PostgreSQL
// URL is refused naming the flag.
func TestDatabaseURLReachesEveryCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", "DIR"}, 1, `the database postgres://simrelay:xxxxx@127.0.0.1:1/simrelay`},
		{[]string{"admin", "create-company", "--company", "Acme", "--email", "you@example.com", "--password", "Change-me-123", "--data-dir", "DIR"}, 1, `the database postgres://simrelay:xxxxx@127.0.0.1:1/simrelay`},
		{[]string{"admin", "mail", "--data-dir", "DIR"}, 1, `the database postgres://simrelay:xxxxx@127.0.0.1:1/simrelay`},
		{[]string{"admin", "set-plan", "--company", "1", "--plan", "pro", "--data-dir", "DIR"}, 1, `the database postgres://simrelay:xxxxx@127.0.0.1:1/simrelay`},
		{[]string{"admin", "delete-device", "--company", "1", "--device", "phone-1", "--data-dir", "DIR"}, 1, `the database postgres://simrelay:xxxxx@127.0.0.1:1/simrelay`},
		{[]string{"admin", "delete-company", "--company", "1", "--confirm", "Acme", "--data-dir", "DIR"}, 1, `the database postgres://simrelay:xxxxx@127.0.0.1:1/simrelay`},
		{[]string{"admin", "backup", "DIR/copy.db", "--data-dir", "DIR"}, 2, `back it up with pg_dump`},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", "DIR", "--store-sync-delay", "1ms"}, 2, `--store-sync-delay (SIMRELAY_STORE_SYNC_DELAY) slows the embedded store's writer: it has no meaning with --database-url`},
		{[]string{"bench", "--slow-sync", "1ms", "--json", "DIR/bench.json"}, 2, `--slow-sync (SIMRELAY_SLOW_SYNC) slows the embedded store's writer`},
	} {
		t.Run(strings.Join(c.args[:2], " "), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			with := func(more ...string) []string {
				var a []string
				for _, arg := range append(slices.Clone(c.args), more...) {
					a = append(a, strings.ReplaceAll(arg, "DIR", dir))
				}
				return a
			}
			code, out, errOut := runCmd(t, with("--database-url", unreachableDB)...)
			if code != c.code || !strings.Contains(errOut, c.want) || out != "" {
				t.Errorf("got %d %q %q; want %d and %q", code, out, errOut, c.code, c.want)
			}
			if strings.Contains(errOut, "s3cret") {
				t.Errorf("the message shows the password: %q", errOut)
			}
			code, _, errOut = runCmd(t, with("--database-url", "mysql://root:s3cret@db/simrelay")...)
			if code != 2 || !strings.Contains(errOut, `--database-url (SIMRELAY_DATABASE_URL) "mysql://root:xxxxx@db/simrelay": wants a PostgreSQL URL`) {
				t.Errorf("a MySQL URL: got %d %q, want 2 and the flag named", code, errOut)
			}
			if _, err := os.Stat(filepath.Join(dir, boltstore.FileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a command given --database-url made a store file in --data-dir (%v)", err)
			}
		})
	}
}

// The admin commands that work on an existing store refuse a database
// without simrelay's schema, an empty one or another application's, as
// they refuse a --data-dir without a store file: exit code 1, naming the
// flag, and nothing created in it. A database with another application's
// table schema_version is refused so by serve too, which would otherwise
// take it for simrelay's and migrate into it. create-company creates the
// schema in an empty database, after which the same commands work on it.
func TestAdminRefusesADatabaseWithoutTheSchema(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	ctx := context.Background()
	empty := pgtest.URL(t)
	foreign := pgtest.URL(t)
	conn, err := pgx.Connect(ctx, foreign)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE TABLE invoices (id serial PRIMARY KEY, total numeric NOT NULL); INSERT INTO invoices (total) VALUES (12.5), (7)")
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	versioned := pgtest.URL(t) // another application's, with its own schema_version
	conn, err = pgx.Connect(ctx, versioned)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `CREATE TABLE invoices (id serial PRIMARY KEY, total numeric NOT NULL); INSERT INTO invoices (total) VALUES (3);
		CREATE TABLE schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO schema_version (version, name) VALUES (1, 'invoices'), (2, 'invoice_totals')`)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"mail"},
		{"set-plan", "--company", "1", "--plan", "pro"},
		{"delete-device", "--company", "1", "--device", "phone-1"},
		{"delete-company", "--company", "1", "--confirm", "Acme"},
	}
	for _, db := range []struct{ name, url, holds string }{
		{"empty", empty, "it holds no table"},
		{"foreign", foreign, "it holds 1 table, not simrelay's"},
		{"versioned", versioned, "it holds a schema_version table that is not simrelay's"},
	} {
		before := pgObjects(t, db.url)
		for _, args := range commands {
			code, out, errOut := runAdmin(t, append(args, "--data-dir", t.TempDir(), "--database-url", db.url)...)
			if code != 1 || out != "" || !strings.Contains(errOut, "--database-url (SIMRELAY_DATABASE_URL) postgres://") ||
				!strings.Contains(errOut, "no simrelay schema in the database") || !strings.Contains(errOut, db.holds) ||
				!strings.Contains(errOut, "nothing was written to it") {
				t.Errorf("admin %s on the %s database: got %d %q %q; want 1 and a refusal saying %q", args[0], db.name, code, out, errOut, db.holds)
			}
		}
		if db.name == "versioned" {
			code, out, errOut := runCmd(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database-url", db.url)
			if code != 1 || out != "" || !strings.Contains(errOut, "no simrelay schema in the database: "+db.holds) || !strings.Contains(errOut, "nothing was written to it") {
				t.Errorf("serve on the %s database: got %d %q %q; want 1 and a refusal saying %q", db.name, code, out, errOut, db.holds)
			}
		}
		if after := pgObjects(t, db.url); after != before {
			t.Errorf("the %s database changed under the refused commands:\nbefore %s\nafter  %s", db.name, before, after)
		}
	}

	if code, _, errOut := runAdmin(t, "create-company", "--database-url", empty, "--company", "Acme", "--email", "ana@acme.example", "--password", "Secret123"); code != 0 {
		t.Fatalf("create-company on the empty database: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runAdmin(t, "mail", "--database-url", empty); code != 0 {
		t.Errorf("mail on simrelay's database: exit %d: %s", code, errOut)
	}
	if code, out, errOut := runAdmin(t, "set-plan", "--database-url", empty, "--company", "1", "--plan", "pro"); code != 0 || !strings.Contains(out, `"planId":"pro"`) {
		t.Errorf("set-plan on simrelay's database: exit %d: %s %s", code, out, errOut)
	}
	if code, _, errOut := runAdmin(t, "delete-device", "--database-url", empty, "--company", "1", "--device", "phone-1"); code != 1 || !strings.Contains(errOut, `company 1 has no device "phone-1"`) {
		t.Errorf("delete-device on simrelay's database: exit %d: %s, want the company's answer", code, errOut)
	}
}

// pgObjects lists what the database at url holds outside PostgreSQL's own
// schemas (tables, indexes, sequences, views, types), with each table's rows.
func pgObjects(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var objects string
	err = conn.QueryRow(ctx, `SELECT coalesce(string_agg(n.nspname || '.' || c.relname || ':' || c.relkind::text, ',' ORDER BY 1), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`).Scan(&objects)
	if err != nil {
		t.Fatal(err)
	}
	var types, namespaces int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'),
		(SELECT count(*) FROM pg_namespace)`).Scan(&types, &namespaces); err != nil {
		t.Fatal(err)
	}
	rows, versions := "", ""
	if strings.Contains(objects, "public.invoices:r") {
		if err := conn.QueryRow(ctx, "SELECT string_agg(id || '=' || total, ',' ORDER BY id) FROM invoices").Scan(&rows); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(objects, "public.schema_version:r") {
		if err := conn.QueryRow(ctx, "SELECT string_agg(row_to_json(v)::text, ',' ORDER BY v.version) FROM schema_version v").Scan(&versions); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("objects [%s] types %d namespaces %d invoices [%s] schema_version [%s]", objects, types, namespaces, rows, versions)
}

// The environment twin is read as the flag is.
func TestDatabaseURLTwin(t *testing.T) {
	t.Setenv("SIMRELAY_DATABASE_URL", unreachableDB)
	dir := t.TempDir()
	var out, errBuf bytes.Buffer
	code := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, &out, &errBuf)
	errOut := errBuf.String()
	if code != 1 || !strings.Contains(errOut, "the database postgres://simrelay:xxxxx@127.0.0.1:1/simrelay") || strings.Contains(errOut, "s3cret") {
		t.Errorf("got %d %q, want 1 naming the database, its password masked", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, boltstore.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a server given SIMRELAY_DATABASE_URL made a store file in --data-dir (%v)", err)
	}
}

// A server on PostgreSQL keeps its uploads spool in --data-dir, which it
// clears at its start: a second server given the same data dir is refused
// at once, naming it, and the first keeps running.
func TestDataDirIsOneServers(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("the embedded store's own lock keeps a data dir one server's (TestAdminOnAHeldStoreFailsFast); this is the PostgreSQL run's")
	}
	t.Parallel()
	bin, st, _ := companyStore(t)
	first := startServer(t, bin, st)
	out, err := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, st.args()...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another simrelay server uses it") || !strings.Contains(string(out), st.dir) {
		t.Fatalf("a second server on the same data dir: got %v %q, want a refusal naming the dir", err, out)
	}
	if code, body := get(t, first.url+"/readyz", ""); code != 200 {
		t.Fatalf("the first server after the second was refused: /readyz %d %s", code, body)
	}
}

// make test installs Debian's postgresql when no initdb is found (in PATH
// or Debian's directories), and leaves it alone when one is: run with a
// fake apt-get that "installs" a fake initdb.
func TestMakeTestInstallsPostgreSQL(t *testing.T) {
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make: %v", err)
	}
	installs := func(l string) bool {
		return strings.Contains(l, "apt-get install ") && strings.Contains(l, " postgresql ")
	}
	if !slices.ContainsFunc(makeDry(t, "test"), installs) {
		t.Errorf("make test does not run the postgresql target (its install of postgresql when missing)")
	}
	root := t.TempDir()
	bin, lib, calls := filepath.Join(root, "bin"), filepath.Join(root, "lib"), filepath.Join(root, "apt-calls")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	aptGet := "#!/bin/sh\nPATH=/usr/bin:/bin\necho \"$*\" >> " + calls + "\nif [ \"$1\" != update ]; then mkdir -p " + lib + "/15/bin && printf '#!/bin/sh\\n' > " + lib + "/15/bin/initdb && chmod +x " + lib + "/15/bin/initdb; fi\n"
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(aptGet), 0o755); err != nil {
		t.Fatal(err)
	}
	makePostgres := func() (string, error) {
		cmd := exec.Command(mk, "-s", "-C", "../..", "postgresql", "PG_BINDIRS="+lib+"/*/bin")
		cmd.Env = []string{"PATH=" + bin, "HOME=" + root}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := makePostgres(); err != nil {
		t.Fatalf("make postgresql without PostgreSQL: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(calls)
	if !strings.Contains(string(got), "update") || !strings.Contains(string(got), "install") || !strings.HasSuffix(strings.TrimSpace(string(got)), " postgresql") {
		t.Errorf("apt-get was called with %q, want an update then an install of postgresql", got)
	}
	if out, err := makePostgres(); err != nil {
		t.Fatalf("make postgresql with PostgreSQL: %v\n%s", err, out)
	}
	if again, _ := os.ReadFile(calls); string(again) != string(got) {
		t.Errorf("apt-get ran again with PostgreSQL installed: %q", again)
	}
}
