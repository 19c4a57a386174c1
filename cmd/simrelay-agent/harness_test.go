package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testbin"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// The tests run the real binaries: simrelay serve on loopback, and
// simrelay-agent with fake device tools (small shell scripts that record
// their arguments and stdin) first on PATH. They are skipped with -short.

var (
	buildOnce          sync.Once
	buildDir           string
	agentBin, serverBi string
	buildErr           error
)

// TestMain removes the binaries the tests built once for all of them (and
// stops the PostgreSQL cluster of SIMRELAY_TEST_STORE=postgres).
func TestMain(m *testing.M) {
	code := storetest.Run(m)
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func binaries(t *testing.T) (agentPath, serverPath string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	buildOnce.Do(func() {
		if a, ok, err := testbin.Prebuilt("simrelay-agent"); ok { // make test's, shared by every package's tests
			agentBin, buildErr = a, err
			if buildErr == nil {
				serverBi, _, buildErr = testbin.Prebuilt("simrelay")
			}
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "simrelay-agent-test-")
		if buildErr != nil {
			return
		}
		// One go build of both: it loads the packages once and links the
		// two binaries side by side, each named for its directory.
		agentBin, serverBi = filepath.Join(buildDir, "simrelay-agent"), filepath.Join(buildDir, "simrelay")
		if out, err := exec.Command("go", append(append([]string{"build"}, testbin.BuildFlags()...), "-o", buildDir+string(filepath.Separator), ".", "../simrelay")...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build the agent and the server: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return agentBin, serverBi
}

// server is a running simrelay serve.
type server struct {
	t   *testing.T
	bin string
	dir string
	// store names the store to the binary: --data-dir, and with
	// SIMRELAY_TEST_STORE=postgres a database of the test's own.
	store  []string
	cmd    *exec.Cmd
	url    string
	stderr *syncbuf.Buffer
	apiKey string
}

// newServer makes a store with one company (the README's admin
// create-company) and starts the server on it.
func newServer(t *testing.T, bin string) *server {
	t.Helper()
	s := &server{t: t, bin: bin, dir: t.TempDir()}
	s.store = []string{"--data-dir", s.dir}
	if storetest.Postgres() {
		s.store = append(s.store, "--database-url", pgtest.URL(t))
	}
	out, err := exec.Command(bin, append([]string{"admin", "create-company", "--company", "Acme", "--email", "you@example.com", "--password", "Change-me-123"}, s.store...)...).Output()
	if err != nil {
		t.Fatalf("create-company: %v", err)
	}
	var created struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(out, &created); err != nil || created.APIKey == "" {
		t.Fatalf("create-company printed %q", out)
	}
	s.apiKey = created.APIKey
	s.start("127.0.0.1:0")
	return s
}

// start runs the server on listen and waits for its "listening" line.
func (s *server) start(listen string) {
	t := s.t
	t.Helper()
	args := append(append([]string{"serve", "--listen", listen}, s.store...), "--webhook-allow-private", "--rate-general", "1000000/1m")
	if storetest.Postgres() {
		// Killed and started again (restart), a node on PostgreSQL waits
		// for its previous run's beat to leave the live window: 10 s by
		// default, 4 s here.
		args = append(args, "--node-live-window", "4s")
	}
	cmd := exec.Command(s.bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stderr = &syncbuf.Buffer{}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), " listening on "); ok {
				lines <- strings.TrimSpace(addr)
			}
		}
		close(lines)
	}()
	select {
	case addr, ok := <-lines:
		if !ok {
			t.Fatalf("the server exited before listening:\n%s", s.stderr.String())
		}
		s.cmd, s.url = cmd, addr
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not listen within 30s:\n%s", s.stderr.String())
	}
}

// kill stops the server with SIGKILL: nothing is flushed on the way out.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// restart starts the server again on the same port and data.
func (s *server) restart() {
	u, err := url.Parse(s.url)
	if err != nil {
		s.t.Fatal(err)
	}
	s.start(u.Host)
}

// call makes an API request with the company's key.
func (s *server) call(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Transport: testhttp.Transport, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// must is call that fails the test on a transport error or an unexpected status.
func (s *server) must(method, path string, body any, want int) []byte {
	s.t.Helper()
	code, b, err := s.call(method, path, body)
	if err != nil || code != want {
		s.t.Fatalf("%s %s: got %d %s (%v), want %d", method, path, code, b, err, want)
	}
	return b
}

// send queues an SMS and returns its queue id.
func (s *server) send(fp, phone, text, slot string) string {
	s.t.Helper()
	body := map[string]any{"device_fingerprint": fp, "phone": phone, "message": text}
	if slot != "" {
		body["sim_slot"] = slot
	}
	var ans struct {
		QueueID string `json:"queueId"`
	}
	_ = json.Unmarshal(s.must("POST", "/chat/send", body, http.StatusOK), &ans)
	if ans.QueueID == "" {
		s.t.Fatal("no queueId")
	}
	return ans.QueueID
}

// queued is a send's state: GET /chat/queue/{id}.
func (s *server) queued(id string) (status, errText string) {
	code, b, err := s.call("GET", "/chat/queue/"+id, nil)
	if err != nil || code != http.StatusOK {
		return "", ""
	}
	var q struct {
		Status string  `json:"status"`
		Error  *string `json:"error"`
	}
	_ = json.Unmarshal(b, &q)
	if q.Error != nil {
		errText = *q.Error
	}
	return q.Status, errText
}

// pair creates a pairing code and runs simrelay-agent pair with it.
func (s *server) pair(agent, config, fingerprint string) {
	s.t.Helper()
	var p struct {
		Code string `json:"pairing_code"`
		URI  string `json:"pairing_uri"`
	}
	_ = json.Unmarshal(s.must("POST", "/device/pairing", nil, http.StatusCreated), &p)
	out, err := exec.Command(agent, "pair", "--uri", p.URI, "--config", config, "--fingerprint", fingerprint, "--allow-http").CombinedOutput()
	if err != nil {
		s.t.Fatalf("pair: %v\n%s", err, out)
	}
	st, err := os.Stat(config)
	if err != nil {
		s.t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		s.t.Fatalf("configuration mode %v, want 0600", st.Mode().Perm())
	}
}

// agentProc is a running simrelay-agent.
type agentProc struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
}

// startAgent runs simrelay-agent run with the fake tools of dir first on PATH.
func startAgent(t *testing.T, bin, fakeDir string, args ...string) *agentProc {
	t.Helper()
	return startAgentCmd(t, fakeDir, exec.Command(bin, append([]string{"run"}, args...)...))
}

// startAgentCmd runs cmd (simrelay-agent run, perhaps under a program that
// starts it, as nohup does) with the fake tools of fakeDir first on PATH.
func startAgentCmd(t *testing.T, fakeDir string, cmd *exec.Cmd) *agentProc {
	t.Helper()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(fakeDir, "bin")+":/usr/bin:/bin", "FAKE_DIR="+fakeDir)
	p := &agentProc{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("agent log:\n%s", p.stderr.String())
		}
	})
	return p
}

// kill stops the agent with SIGKILL.
func (p *agentProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// writeScript writes an executable fake tool.
func writeScript(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// writeFile replaces a file atomically, so a fake tool never reads half of it.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// until polls cond every few milliseconds for up to a minute: the binaries
// poll their tools and reconnect with backoff, which takes longer than
// internal/poll's 10 s on a loaded machine. It never asserts a speed.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Within(t, time.Minute, what, cond)
}
