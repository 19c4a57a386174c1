//go:build unix

package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/poll"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	Main(m)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func show(t *testing.T, conn *pgx.Conn, setting string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), "SELECT current_setting($1)", setting).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Each test's database is its own and empty; the cluster listens on no TCP
// port and runs with fsync off, as a supported version.
func TestDatabasesAreFreshAndSeparate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := connect(t, URL(t)), connect(t, URL(t))
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the second database has %d tables, want 0: databases are not separate", n)
	}
	for setting, want := range map[string]string{"listen_addresses": "", "fsync": "off", "shared_buffers": "16MB"} {
		if got := show(t, a, setting); got != want {
			t.Errorf("%s: got %q, want %q", setting, got, want)
		}
	}
	if v, _ := strconv.Atoi(show(t, a, "server_version_num")); v < MinMajor*10000 {
		t.Errorf("server_version_num %d: want %d or later", v, MinMajor*10000)
	}
	if dir := show(t, a, "unix_socket_directories"); !strings.HasPrefix(filepath.Base(dir), dirPrefix) {
		t.Errorf("unix_socket_directories %q: want the cluster's own directory", dir)
	}
}

// A database is dropped when its test ends, sessions left open or not.
func TestDatabaseDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("user", func(t *testing.T) {
		conn := connect(t, URL(t))
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		leaked, err := pgx.Connect(context.Background(), URL(t)) // left open on purpose
		if err != nil {
			t.Fatal(err)
		}
		_ = leaked
	})
	if exists(t, name) {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

// The binaries are found in PATH, through a symlink, or in Debian's
// directory; without them the failure says how to install them.
func TestBinDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fake := func(dir string, names ...string) string {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	inPath := fake(filepath.Join(root, "path"), "initdb", "postgres")
	debian := filepath.Join(root, "lib", "*", "bin")
	fake(filepath.Join(root, "lib", "9", "bin"), "initdb", "postgres")
	newest := fake(filepath.Join(root, "lib", "16", "bin"), "initdb", "postgres")
	fake(filepath.Join(root, "lib", "17", "bin"), "initdb") // a client-only install: no server
	linked := filepath.Join(root, "linked")
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(newest, "initdb"), filepath.Join(linked, "initdb")); err != nil {
		t.Fatal(err)
	}
	onlyInitdb := fake(filepath.Join(root, "half"), "initdb")
	for _, tc := range []struct {
		name, path, want string
	}{
		{"in PATH", "/nonexistent" + string(os.PathListSeparator) + inPath, inPath},
		{"symlink in PATH", linked, newest},
		{"Debian's newest server", onlyInitdb, newest},
		{"Debian's when PATH is empty", "", newest},
	} {
		if got, err := binDir(tc.path, debian); err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	_, err := binDir(onlyInitdb, filepath.Join(root, "none", "*", "bin"))
	if !errors.Is(err, errNotFound) {
		t.Fatalf("nothing installed: got %v, want errNotFound", err)
	}
	for _, want := range []string{"PostgreSQL not found", "make test", "apt-get install postgresql"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("nothing installed: %q does not say %q", err, want)
		}
	}
}

// crashChildEnv makes the test binary a child that starts a cluster, says
// where, and waits to be killed.
const crashChildEnv = "PGTEST_CRASH_CHILD"

func crashChild() {
	c, err := startCluster(context.Background())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(c.dir)
	select {} // until the parent kills us
}

// A test binary killed with its cluster running takes the server with it
// (Linux), and the next run removes the directory it left; directories of
// running binaries are left alone.
func TestKilledRunLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	var dir string
	select {
	case dir = <-lines:
	case <-time.After(startTimeout):
		cmd.Process.Kill()
		t.Fatal("the child did not start its cluster")
	}
	if !strings.HasPrefix(filepath.Base(dir), dirPrefix) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child said %q", dir)
	}
	pidFile, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	server, _ := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if runtime.GOOS == "linux" {
		poll.Within(t, stopTimeout, "the killed binary's server exits", func() bool { return !alive(server) })
	}
	removed := sweep(filepath.Dir(dir))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed binary's directory %s is still there after the sweep (removed %q)", dir, removed)
	}
	// Our own cluster, in use by the other tests, is untouched.
	URL(t)
	if _, err := os.Stat(shared.dir); err != nil {
		t.Errorf("the sweep touched a running binary's cluster: %v", err)
	}
}

// templateRuns numbers the runs of TestDatabasesFromATemplate.
var templateRuns atomic.Int32

// URLFrom prepares its template once per key, and each database starts as
// a copy of it, apart from the others.
func TestDatabasesFromATemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var prepared atomic.Int32
	prepare := func(url string) error {
		prepared.Add(1)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE prepared (id int); INSERT INTO prepared VALUES (7)")
		return err
	}
	// A key of its own each run: with -count above 1 the process keeps the
	// templates of the runs before, prepared already.
	key := fmt.Sprintf("test-template-%d", templateRuns.Add(1))
	a := connect(t, URLFrom(t, key, prepare))
	b := connect(t, URLFrom(t, key, prepare))
	if n := prepared.Load(); n != 1 {
		t.Fatalf("prepare ran %d times, want once", n)
	}
	if _, err := a.Exec(ctx, "INSERT INTO prepared VALUES (8)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM prepared").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the second copy has %d rows (%v), want the template's one", n, err)
	}
}

// A cluster starts from a copy of the initdb result kept for the
// machine's test binaries: a server of its own, its data directory
// PostgreSQL's 0700, its databases apart from the other cluster's.
func TestClustersStartFromOneInitdb(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := connect(t, URL(t)) // the binary's cluster: the initdb result is kept by now
	bin, err := binDir(os.Getenv("PATH"), debianBinaries)
	if err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = runAs(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	key, err := initDataKey(bin, cred)
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(baseDir(), dirPrefix+"initdb-"+key)
	if _, err := os.Stat(filepath.Join(kept, "PG_VERSION")); err != nil {
		t.Fatalf("no initdb result kept: %v", err)
	}
	// A file of this run in the kept directory, owned as the rest of it,
	// comes with the copy; initdb would not make it. PostgreSQL ignores a
	// file it does not know, so a cluster of another binary that copies
	// the directory meanwhile starts all the same.
	marker := fmt.Sprintf("pgtest-marker-%d-%d", os.Getpid(), templateRuns.Add(1))
	if err := os.WriteFile(filepath.Join(kept, marker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(filepath.Join(kept, marker)) })
	if cred != nil {
		if err := os.Lchown(filepath.Join(kept, marker), int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := startCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	if _, err := os.Stat(filepath.Join(c.dir, "data", marker)); err != nil {
		t.Fatalf("the cluster did not start from the kept initdb result: %v", err)
	}
	fi, err := os.Stat(filepath.Join(c.dir, "data"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the copy's data directory: %v (%v), want 0700", fi.Mode(), err)
	}
	second, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(ctx)
	if _, err := second.Exec(ctx, "CREATE DATABASE only_here"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := first.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = 'only_here'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the binary's cluster has %d databases of the other's (%v), want none", n, err)
	}
}
