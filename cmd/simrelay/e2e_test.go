package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testbin"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/internal/waitpar"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

// testStore is where a test's servers keep their store: the data dir, and
// with SIMRELAY_TEST_STORE=postgres a database of the test's own in the
// test binary's PostgreSQL cluster (internal/pgtest), so `make test` runs
// these tests on both backends.
type testStore struct {
	dir         string
	databaseURL string // "": the embedded store in dir
}

// newTestStore is a new, empty store for t.
func newTestStore(t *testing.T) testStore {
	t.Helper()
	s := testStore{dir: t.TempDir()}
	if storetest.Postgres() {
		s.databaseURL = pgtest.URL(t)
	}
	return s
}

// args are the flags that name the store to a command.
func (s testStore) args() []string {
	if s.databaseURL == "" {
		return []string{"--data-dir", s.dir}
	}
	return []string{"--data-dir", s.dir, "--database-url", s.databaseURL}
}

// admin runs simrelay admin with args on the store; it answers as runCmd.
func (s testStore) admin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCmd(t, append(append([]string{"admin"}, args...), s.args()...)...)
}

// readUser reads a user of st back, with no server running on it.
func readUser(t *testing.T, st testStore, id uint64) store.User {
	t.Helper()
	var users interface {
		User(id uint64) (store.User, error)
		Close() error
	}
	var err error
	if st.databaseURL != "" {
		users, err = postgres.Open(context.Background(), st.databaseURL, postgres.Options{})
	} else {
		users, err = boltstore.Open(st.dir, boltstore.Options{ReadOnly: true})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	u, err := users.User(id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// pairDevice pairs a device by a pairing code of the company's key on the
// server at url: its registration.
func pairDevice(t *testing.T, url, key, fingerprint string) client.Registration {
	t.Helper()
	code, err := pairingCode(context.Background(), testhttp.Client, url, key)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := client.Register(context.Background(), testhttp.Client, url, client.RegisterInput{PairingCode: code, DeviceFingerprint: fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// companyStore builds the binary and makes a store holding one company,
// through the README's admin create-company; it returns the binary, the
// store and the company's API key. Tests that run the binary are skipped
// with -short.
func companyStore(t *testing.T) (bin string, st testStore, apiKey string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin = buildBinary(t)
	st = newTestStore(t)
	return bin, st, createCompany(t, bin, st)
}

// testBuild is a simrelay binary the tests build once per test run, into
// a temporary directory that TestMain removes: linking it is the costly
// part of a test that runs it.
type testBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// built is the binary every test runs (buildBinary).
var built testBuild

// make builds simrelay with the go build flags given, once; prebuilt is
// what make test built already for every package, if anything.
func (b *testBuild) make(t *testing.T, prebuilt func() (string, bool, error), flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		if prebuilt != nil {
			var ok bool
			if b.bin, ok, b.err = prebuilt(); ok {
				return
			}
		}
		if b.dir, b.err = os.MkdirTemp("", "simrelay-test-"); b.err != nil {
			return
		}
		bin := filepath.Join(b.dir, "simrelay")
		args := append(append(append([]string{"build"}, testbin.BuildFlags()...), flags...), "-o", bin, ".")
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		b.bin = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// TestMain runs two tests a core at once (waitpar): most of a test here
// waits on the servers it started as child processes, or on a timeout
// they reach on purpose, so one a core left the cores idle.
func TestMain(m *testing.M) {
	waitpar.Default(2)
	code := storetest.Run(m)
	for _, dir := range []string{built.dir, versioned.dir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// buildBinary compiles simrelay once per test run into a temporary
// directory, or takes make test's build, shared by every package's tests.
func buildBinary(t *testing.T) string {
	t.Helper()
	return built.make(t, func() (string, bool, error) { return testbin.Prebuilt("simrelay") })
}

// server is a running simrelay process.
type server struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncbuf.Buffer
}

// startServer runs `simrelay serve` on a free loopback port and waits for its
// "listening" line.
func startServer(t *testing.T, bin string, st testStore, extra ...string) *server {
	t.Helper()
	return launchServer(t, exec.Command(bin, serveArgs(st, extra...)...))
}

// serveArgs are the arguments of a serve command on st, extra last.
func serveArgs(st testStore, extra ...string) []string {
	args := append([]string{"serve", "--listen", "127.0.0.1:0"}, st.args()...)
	if st.databaseURL != "" && !slices.Contains(extra, "--nats-url") {
		// A node alone on PostgreSQL, killed and started again, waits for
		// its previous run's beat to leave the live window: 10 s by
		// default, in every crash test of the PostgreSQL pass. A cluster's
		// test chooses its window itself (extra, read after this).
		args = append(args, "--node-live-window", testLiveWindow)
	}
	return append(args, extra...)
}

// launchServer starts cmd, a serve command (or one that runs one, as nohup
// does), and waits for it to report its address.
func launchServer(t *testing.T, cmd *exec.Cmd) *server {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errBuf := &syncbuf.Buffer{}
	cmd.Stderr = errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), " listening on "); ok {
				lines <- addr
			}
		}
		close(lines)
	}()
	select {
	case addr, ok := <-lines:
		if !ok {
			t.Fatalf("the server exited before listening:\n%s", errBuf.String())
		}
		return &server{cmd: cmd, url: strings.TrimSpace(addr), stderr: errBuf}
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not report listening within 30s:\n%s", errBuf.String())
	}
	return nil
}

func get(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, body
}

// post sends a JSON body with the key and returns the answer, its body read.
func post(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, raw
}

// createCompany runs the README's `admin create-company` on st and returns
// the API key it prints.
func createCompany(t *testing.T, bin string, st testStore) string {
	t.Helper()
	return createCompanyAs(t, bin, st, "Acme", "you@example.com")
}

// TestQuickStart follows the README: create a company with the admin command,
// start the server, call the API with the printed key; then back up the
// running server and stop it with SIGTERM.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)

	srv := startServer(t, bin, st, "--admin-token", testAdminToken)
	code, body := get(t, srv.url+"/company", apiKey)
	if code != 200 || !strings.Contains(string(body), `"name":"Acme"`) {
		t.Fatalf("GET /company: got %d %s", code, body)
	}
	if code, body := get(t, srv.url+"/users", apiKey); code != 200 || !strings.Contains(string(body), "you@example.com") {
		t.Fatalf("GET /users: got %d %s", code, body)
	}
	if code, body := get(t, srv.url+"/metrics", ""); code != 200 || !strings.Contains(string(body), "go_goroutines") || !strings.Contains(string(body), "simrelay_http_requests_total") {
		t.Fatalf("GET /metrics: got %d, want request and Go runtime metrics", code)
	}
	// The served OpenAPI document names this server (its --public-url,
	// here the listen address) for clients generated from it.
	if code, body := get(t, srv.url+"/openapi.json", ""); code != 200 || !strings.Contains(string(body), `"url":"`+srv.url+`"`) {
		t.Fatalf("GET /openapi.json: got %d, want its servers to name %s", code, srv.url)
	}
	res, err := testhttp.Client.Post(srv.url+"/auth/login", "application/json", strings.NewReader(`{"email":"you@example.com","password":"Change-me-123"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("login: got %d", res.StatusCode)
	}

	if st.databaseURL != "" {
		checkBackupExternal(t, bin, st, srv, apiKey)
	} else {
		checkBackup(t, bin, st, srv, apiKey)
	}
	if code, body := get(t, srv.url+"/readyz", ""); code != 200 {
		t.Fatalf("GET /readyz: got %d %s", code, body)
	}

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, srv.stderr.String())
	}
	if !strings.Contains(srv.stderr.String(), "msg=stopped") {
		t.Errorf("no orderly stop in the log:\n%s", srv.stderr.String())
	}
	if strings.Contains(srv.stderr.String(), apiKey) {
		t.Error("the API key appears in the server log")
	}
	if strings.Contains(srv.stderr.String(), testAdminToken) {
		t.Error("the admin token appears in the server log")
	}
}

// checkBackup: the admin command refuses the running server's embedded
// store, and says why; the server streams a backup instead, to its operator
// only, and it is a whole store.
func checkBackup(t *testing.T, bin string, st testStore, srv *server, apiKey string) {
	t.Helper()
	backupOut, err := exec.Command(bin, "admin", "backup", filepath.Join(t.TempDir(), "b.db"), "--data-dir", st.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(backupOut), "GET /admin/backup") {
		t.Fatalf("admin backup on a running server: got %v %q, want a refusal pointing to GET /admin/backup", err, backupOut)
	}
	if code, _ := get(t, srv.url+"/admin/backup", apiKey); code != http.StatusNotFound {
		t.Fatalf("GET /admin/backup with the company's API key: got %d, want 404", code)
	}
	code, body := get(t, srv.url+"/admin/backup", testAdminToken)
	if code != 200 {
		t.Fatalf("GET /admin/backup: got %d", code)
	}
	restored := t.TempDir()
	if err := os.WriteFile(filepath.Join(restored, boltstore.FileName), body, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := boltstore.Open(restored, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the streamed backup does not open: %v", err)
	}
	ids, _ := b.CompanyIDs()
	b.Close()
	if len(ids) != 1 {
		t.Fatalf("the backup holds %d companies, want 1", len(ids))
	}
}

// checkBackupExternal: a store in PostgreSQL is backed up with pg_dump, so
// GET /admin/backup answers 409 backup_external to the operator and admin
// backup refuses (exit 2), pointing to pg_dump; --data-dir holds only the
// server's own lock, no store file.
func checkBackupExternal(t *testing.T, bin string, st testStore, srv *server, apiKey string) {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"admin", "backup", filepath.Join(t.TempDir(), "b.db")}, st.args()...)...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "pg_dump") {
		t.Fatalf("admin backup on PostgreSQL: got %v %q, want exit 2 pointing to pg_dump", err, out)
	}
	if code, _ := get(t, srv.url+"/admin/backup", apiKey); code != http.StatusNotFound {
		t.Fatalf("GET /admin/backup with the company's API key: got %d, want 404", code)
	}
	if code, body := get(t, srv.url+"/admin/backup", testAdminToken); code != http.StatusConflict || !strings.Contains(string(body), "backup_external") {
		t.Fatalf("GET /admin/backup on PostgreSQL: got %d %s, want 409 backup_external", code, body)
	}
	if _, err := os.Stat(filepath.Join(st.dir, boltstore.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a server on PostgreSQL made a store file in --data-dir: %v", err)
	}
	if !strings.Contains(srv.stderr.String(), "store=postgres") {
		t.Errorf("the log does not name the store:\n%s", srv.stderr.String())
	}
}
