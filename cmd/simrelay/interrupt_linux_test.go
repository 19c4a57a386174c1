package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

// holdsOpen says whether the process pid has the file at path open (Linux's
// /proc): a command that opened its store is past its start, where it
// chooses what a signal does to it.
func holdsOpen(pid int, path string) bool {
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); err == nil && target == path {
			return true
		}
	}
	return false
}

// endedBy says whether the finished command was ended by sig, as a process
// that does not handle it is, rather than exiting by itself.
func endedBy(cmd *exec.Cmd, sig syscall.Signal) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Ctrl-C (or SIGTERM) stops an admin command where it is, as a kill does:
// it had no handler of its own, and a signal it caught went unheard, so a
// restore or a copy the operator meant to stop went on to its end. Each
// command here waits for the store's lock, which the test holds, when the
// signal comes.
func TestAdminCommandsStopAtASignal(t *testing.T) {
	storetest.EmbeddedOnly(t, "the store file's lock")
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	held, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() }) // after the subtests
	path := filepath.Join(dir, boltstore.FileName)
	for _, tc := range []struct {
		args []string
		sig  syscall.Signal
	}{
		{[]string{"admin", "backup", filepath.Join(t.TempDir(), "b.db"), "--data-dir", dir}, syscall.SIGINT},
		{[]string{"admin", "check", "--data-dir", dir}, syscall.SIGTERM},
		{[]string{"admin", "mail", "--data-dir", dir}, syscall.SIGINT},
	} {
		t.Run(tc.args[1], func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, tc.args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, "the command opens the store", func() bool { return holdsOpen(cmd.Process.Pid, path) })
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if !endedBy(cmd, tc.sig) {
				t.Errorf("%v given %s while it waited for the store: %s, want it ended by the signal", tc.args[:2], tc.sig, cmd.ProcessState)
			}
		})
	}
}

// A copy-store stopped with Ctrl-C copies nothing: it went on after the
// signal and committed the copy the operator had stopped. The test holds a
// lock on the companies table, so the copy waits for it.
func TestCopyStoreStopsAtCtrlC(t *testing.T) {
	storetest.EmbeddedOnly(t, "copies an embedded store")
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	if code, _, errOut := runAdmin(t, "create-company", "--data-dir", dir, "--company", "Acme", "--email", "ana@acme.example", "--password", "Secret123"); code != 0 {
		t.Fatalf("create-company: exit %d: %s", code, errOut)
	}
	url := pgtest.URL(t)
	pg, err := postgres.Open(context.Background(), url, postgres.Options{}) // the schema, for the lock
	if err != nil {
		t.Fatal(err)
	}
	pg.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lock, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck // rolled back below
	if _, err := lock.Exec(ctx, "LOCK TABLE companies IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "admin", "copy-store", "--data-dir", dir, "--to", url)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := waitExit(t, cmd)
	poll.Within(t, 30*time.Second, "the copy waits for the companies table", func() bool {
		var waiting int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE relation = 'companies'::regclass AND NOT granted").Scan(&waiting)
		return err == nil && waiting > 0
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Errorf("copy-store still runs 15 s after Ctrl-C")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if !endedBy(cmd, syscall.SIGINT) {
		t.Errorf("copy-store given Ctrl-C: %s, want it ended by the signal", cmd.ProcessState)
	}
	if n := pgCompanies(t, url); n != 0 {
		t.Errorf("%d companies in the database after the copy was stopped, want none", n)
	}
}

// A second signal ends a server whose stop is held up, at once, as a kill
// does: the first one's shutdown waits for what it finishes (here a request
// whose body never ends, up to a --shutdown-timeout of 10 minutes; a
// sweep's prune on PostgreSQL, up to 10 minutes too), and further signals
// went unheard.
func TestServeEndsAtASecondSignal(t *testing.T) {
	t.Parallel()
	if signal.Ignored(syscall.SIGHUP) {
		// Started under nohup (or a wrapper that ignores hang-ups): the
		// servers it starts inherit that, and keep hang-ups out by design
		// (TestServeUnderNohupOutlivesAHangUp, TestHangUpIgnoredUnderNohup).
		t.Skip("hang-ups are ignored by this test run (nohup): the processes it starts keep ignoring them")
	}
	bin := buildBinary(t)
	st := newTestStore(t)
	key := createCompany(t, bin, st)
	srv := startServer(t, bin, st, "--shutdown-timeout", "10m")
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A send whose body stops half way: the server waits for the rest.
	// Its 100 Continue says the handler reads the body: the request is in
	// flight, not a connection the shutdown may close unread.
	if _, err := fmt.Fprintf(conn, "POST /chat/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n", key); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("the send's first answer: %q %v, want 100 Continue", line, err)
	}
	if _, err := fmt.Fprint(conn, `{"phone":`); err != nil {
		t.Fatal(err)
	}
	done := waitExit(t, srv.cmd)
	// The first is a hang-up (the ssh session the server was started from
	// closing), which ended the server at once as a kill does, requests in
	// flight and all; it stops it as SIGTERM and SIGINT do.
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the server shuts down", func() bool { return strings.Contains(srv.stderr.String(), `msg="shutting down"`) })
	select {
	case <-done:
		t.Fatalf("the server stopped with a request in flight: %s\n%s", srv.cmd.ProcessState, srv.stderr.String())
	default:
	}
	if err := srv.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the server still runs 20 s after a second signal:\n%s", srv.stderr.String())
	}
	if !endedBy(srv.cmd, syscall.SIGINT) {
		t.Errorf("the server after a second signal: %s, want it ended by the signal", srv.cmd.ProcessState)
	}
}

// A server started with hang-ups ignored, as nohup starts it to outlive the
// ssh session it was started from, keeps ignoring them: it stopped when
// that session closed, as Go catches a signal named to signal.Notify again.
// SIGTERM then stops it in order, as the first signal it hears.
func TestServeUnderNohupOutlivesAHangUp(t *testing.T) {
	t.Parallel()
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup on this machine")
	}
	bin := buildBinary(t)
	st := newTestStore(t)
	key := createCompany(t, bin, st)
	srv := launchServer(t, exec.Command(nohup, append([]string{bin}, serveArgs(st)...)...))
	done := waitExit(t, srv.cmd)
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Requests answered after the hang-up: a server that heard it is
	// shutting down, or has stopped.
	for range 3 {
		if code, body := call(t, "GET", srv.url+"/device/list", key, nil); code != 200 {
			t.Fatalf("a request after the hang-up answered %d %s:\n%s", code, body, srv.stderr.String())
		}
	}
	if strings.Contains(srv.stderr.String(), `msg="shutting down"`) {
		t.Fatalf("the server under nohup began to stop at a hang-up:\n%s", srv.stderr.String())
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server still runs 30 s after SIGTERM:\n%s", srv.stderr.String())
	}
	if !srv.cmd.ProcessState.Success() {
		t.Errorf("the server under nohup after a hang-up and SIGTERM: %s, want it stopped in order (a second signal ends it at once)\n%s", srv.cmd.ProcessState, srv.stderr.String())
	}
}

// waitExit waits for cmd to exit in the background, closing the channel it
// returns then. A test that ends first (failed) has cmd killed and waits
// for that Wait: a cleanup's own Wait beside it (launchServer's) would be
// a second, concurrent Wait on one process, a data race that can hang the
// test binary.
func waitExit(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return done
}
