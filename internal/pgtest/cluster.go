//go:build unix

package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"
)

// Settings of the test cluster: durability is off (a crash loses a test
// database, which nobody wants back) and memory is small, since eight test
// binaries may run one cluster each on a two-core machine.
var serverSettings = []string{
	"listen_addresses=",      // unix socket only: nothing on TCP
	"fsync=off",              // no durability needed in tests
	"synchronous_commit=off", // commits do not wait for the WAL flush
	"full_page_writes=off",   // nothing to recover after a crash
	"shared_buffers=16MB",    // test databases are small
	"max_connections=200",    // parallel tests, each with its own pool
	"max_locks_per_transaction=256",
	"logging_collector=off", // the log is postgres.log in the cluster's directory
	"log_min_messages=warning",
}

const (
	// startTimeout bounds initdb plus the server's start: a few seconds on an
	// idle machine, many more on a loaded CI runner.
	startTimeout = 2 * time.Minute
	// stopTimeout bounds a fast shutdown before the server is killed.
	stopTimeout = 30 * time.Second
	// superuser is the cluster's superuser; it trusts every local connection.
	superuser = "postgres"
	// dirPrefix names the cluster directories in baseDir; the owner's pid
	// follows it, so a later run can tell a dead owner's directory.
	dirPrefix = "simrelay-pgtest-"
	// shmDir is Linux's file system in memory (tmpfs), where baseDir puts
	// the clusters when it can.
	shmDir = "/dev/shm"
	// port only names the socket file (.s.PGSQL.5432): nothing listens on TCP.
	port = 5432
)

// cluster is one running PostgreSQL server.
type cluster struct {
	dir    string // owns data/, the socket and postgres.log
	exited chan struct{}
	proc   *os.Process
	err    error // the server's exit, once exited is closed
}

// startCluster runs initdb and starts the server, as nobody when running as root.
func startCluster(ctx context.Context) (*cluster, error) {
	bin, err := binDir(os.Getenv("PATH"), debianBinaries)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(bin); err != nil {
		return nil, err
	}
	base := baseDir()
	sweep(base)
	dir, err := os.MkdirTemp(base, dirPrefix+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	cred, err := runAs(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	data := filepath.Join(dir, "data")
	if err := initData(ctx, bin, base, dir, data, cred); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := startServer(dir, bin, data, cred)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// baseDir is where the cluster's directory is made: /dev/shm where it is a
// directory every user may write to (as /tmp), otherwise os.TempDir. The
// clusters are thrown away, and on a disk their files cost the tests dearly
// even with fsync off: initdb, each CREATE DATABASE's copy of its template
// and the WAL are written back to the disk all the same, behind whatever
// else the machine writes. In memory, initdb took 1.0 to 1.2 s against 2.3
// to 4.2 s on the disk of a loaded 2-core machine, with a fifth of the
// system time. A cluster holds a few hundred MiB at most (the tests'
// databases are small, and dropped or reset when their tests end).
//
// A container's /dev/shm is often small (Docker gives 64 MiB unless told
// otherwise), where a cluster would run out of room mid-test: /dev/shm is
// used only with shmFree free in it.
func baseDir() string {
	if fi, err := os.Stat(shmDir); err == nil && fi.IsDir() && fi.Mode().Perm()&0o003 == 0o003 && fi.Mode()&os.ModeSticky != 0 {
		var st unix.Statfs_t
		if unix.Statfs(shmDir, &st) == nil && uint64(st.Bavail)*uint64(st.Bsize) >= shmFree {
			return shmDir
		}
	}
	return os.TempDir()
}

// shmFree is the room in /dev/shm below which baseDir leaves it alone: a
// few clusters of test binaries run at once (one each), each a few hundred
// MiB at most.
const shmFree = 2 << 30

// startServer starts the server process from a goroutine that holds its OS thread
// until the server exits: on Linux the server's parent-death signal is tied
// to the thread that started it, and Go may otherwise retire that thread.
func startServer(dir, bin, data string, cred *syscall.Credential) (*cluster, error) {
	args := []string{"-D", data, "-k", dir, "-p", strconv.Itoa(port)}
	for _, s := range serverSettings {
		args = append(args, "-c", s)
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &cluster{dir: dir, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logFile.Close()
		cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
		cmd.Dir, cmd.Env, cmd.SysProcAttr = dir, childEnv(), procAttr(cred)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("pgtest: start postgres: %w", err)
			return
		}
		c.proc = cmd.Process
		started <- nil
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, <-started
}

// socketDir is the host of every connection: the directory of the socket.
func (c *cluster) socketDir() string { return c.dir }

// url is the connection URL of a database of this cluster.
func (c *cluster) url(db string) string {
	q := url.Values{"host": {c.socketDir()}, "port": {strconv.Itoa(port)}, "user": {superuser}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", Path: "/" + db, RawQuery: q.Encode()}).String()
}

// waitReady connects until the server answers, it exits, or ctx ends.
func (c *cluster) waitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		conn, err := pgconn.Connect(ctx, c.url("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		last = err
		select {
		case <-c.exited:
			return fmt.Errorf("pgtest: postgres exited at start (%v): %s", c.err, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres not ready within %s: %v: %s", startTimeout, last, c.logTail())
		case <-tick.C:
		}
	}
}

// stop shuts the server down (fast: sessions are ended, nothing is waited
// for), kills it if it lingers, and removes the cluster's directory.
func (c *cluster) stop() error {
	var err error
	if c.proc != nil {
		_ = c.proc.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(stopTimeout):
			_ = c.proc.Kill()
			<-c.exited
			err = fmt.Errorf("pgtest: postgres did not stop within %s: killed", stopTimeout)
		}
	}
	if rmErr := os.RemoveAll(c.dir); err == nil {
		err = rmErr
	}
	return err
}

// logTail is the end of the server's log, for a failure message.
func (c *cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// runAs hands dir to nobody when running as root, and answers the
// credential to run initdb and postgres with (nil: as ourselves).
func runAs(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and initdb refuses root: no user nobody to run PostgreSQL as: %v", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user nobody: %v", err)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, fmt.Errorf("pgtest: hand %s to nobody: %w", dir, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// reachHint explains the likely cause when nobody cannot reach the cluster's directory.
func reachHint(cred *syscall.Credential, dir string) string {
	if cred == nil {
		return ""
	}
	return fmt.Sprintf(" (running as root, the cluster runs as nobody, who must be able to reach %s: point TMPDIR at a directory every user can enter, such as /tmp)", dir)
}

// childEnv is the environment of initdb and postgres: ours, with a fixed
// locale and time zone so that no host setting leaks into test results.
func childEnv() []string {
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG=") && !strings.HasPrefix(kv, "TZ=") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C", "TZ=UTC")
}

// sweep removes the cluster directories that test binaries no longer
// running left in tmp: a server still running in one (on systems without a
// parent-death signal) shuts itself down once it finds its lock file gone.
// Directories of running binaries, ours included, are left alone.
func sweep(tmp string) []string {
	entries, _ := os.ReadDir(tmp)
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, dirPrefix) {
			continue
		}
		pidText, _, ok := strings.Cut(strings.TrimPrefix(name, dirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || alive(pid) {
			continue
		}
		if os.RemoveAll(filepath.Join(tmp, name)) == nil {
			removed = append(removed, filepath.Join(tmp, name))
		}
	}
	return removed
}

// alive says whether a process of that pid exists (signal 0 checks, sends nothing).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
