package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Until the PostgreSQL store is in the binary, every command that works on
// the store refuses --database-url (or its twin) before touching anything,
// so nobody believes their data is in PostgreSQL when it is not; a value
// that is not a PostgreSQL URL is refused naming the flag. No refusal shows
// the password.
func TestDatabaseURLIsRefusedUntilAvailable(t *testing.T) {
	t.Parallel()
	const url = "postgres://simrelay:s3cret@db.example:5432/simrelay"
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--data-dir", "DIR"},
		{"bench", "--json", "DIR/bench.json"}, // bench's servers use stores of their own
		{"admin", "create-company", "--company", "Acme", "--email", "you@example.com", "--password", "Change-me-123", "--data-dir", "DIR"},
		{"admin", "mail", "--data-dir", "DIR"},
		{"admin", "backup", "DIR/copy.db", "--data-dir", "DIR"},
		{"admin", "set-plan", "--company", "1", "--plan", "pro", "--data-dir", "DIR"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			with := func(more ...string) []string {
				var a []string
				for _, arg := range append(slices.Clone(args), more...) {
					a = append(a, strings.ReplaceAll(arg, "DIR", dir))
				}
				return a
			}
			for _, given := range [][]string{
				with("--database-url", url),
				with("--database-url=postgresql:///simrelay?host=/run/postgresql&password=s3cret"),
			} {
				code, out, errOut := runCmd(t, given...)
				want := `--database-url (SIMRELAY_DATABASE_URL) "postgres`
				if code != 2 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "PostgreSQL is not yet available in this build") || out != "" {
					t.Errorf("%v: got %d %q %q; want 2 and that PostgreSQL is not yet available", given, code, out, errOut)
				}
				if strings.Contains(errOut, "s3cret") {
					t.Errorf("the refusal shows the password: %q", errOut)
				}
			}
			code, _, errOut := runCmd(t, with("--database-url", "mysql://root:s3cret@db/simrelay")...)
			if code != 2 || !strings.Contains(errOut, `--database-url (SIMRELAY_DATABASE_URL) "mysql://root:xxxxx@db/simrelay": wants a PostgreSQL URL`) {
				t.Errorf("a MySQL URL: got %d %q, want 2 and the flag named", code, errOut)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused command wrote %d files in --data-dir", len(entries))
			}
		})
	}
}

// The environment twin is refused as the flag is.
func TestDatabaseURLTwinIsRefused(t *testing.T) {
	t.Setenv("SIMRELAY_DATABASE_URL", "postgres://simrelay:s3cret@db.example/simrelay")
	dir := t.TempDir()
	// Cancelled already: a server that took the embedded store instead
	// stops at once rather than running until the test's deadline.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errBuf bytes.Buffer
	code := run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, &out, &errBuf)
	errOut := errBuf.String()
	if code != 2 || !strings.Contains(errOut, `"postgres://simrelay:xxxxx@db.example/simrelay": PostgreSQL is not yet available`) {
		t.Errorf("got %d %q, want 2 and the refusal", code, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused server wrote %d files in --data-dir", len(entries))
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
	if !strings.Contains(readMakefileTestLine(t), " postgresql") {
		t.Errorf("make test does not depend on the postgresql target")
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

// readMakefileTestLine is the Makefile's "test:" line, with its prerequisites.
func readMakefileTestLine(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mk), "\n") {
		if strings.HasPrefix(line, "test:") {
			return line
		}
	}
	t.Fatal("the Makefile has no test target")
	return ""
}
