// Package stripemock runs stripe-mock, Stripe's own API double, for the
// tests, and a proxy in front of it that records the calls and lets a test
// answer some of them itself (what stripe-mock cannot be: a session already
// paid, a slow Stripe).
package stripemock

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// Start answers the URL of the test binary's stripe-mock on loopback,
// starting it on first use; Run stops it when the tests end. One serves
// every test of the binary: stripe-mock keeps no state between requests
// (each answer is a fixture shaped by the request), and what a test
// counts or answers itself goes through its own Proxy. One per test cost
// about half a second of a core each (loading Stripe's API description),
// and 2 to 3 s of a test's time where several started at once, for 9
// tests a pass.
func Start(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("stripemock: call stripemock.Run from the package's TestMain, so stripe-mock is stopped when the tests end")
	}
	shared.once.Do(func() { shared.url, shared.err = start() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	select {
	case <-shared.exited:
		t.Fatalf("stripe-mock exited during the tests: %v\n%s", shared.waitErr, shared.out.String())
	default:
	}
	return shared.url
}

// shared is the test binary's stripe-mock.
var (
	mainCalled atomic.Bool
	shared     struct {
		once    sync.Once
		url     string
		err     error
		cmd     *exec.Cmd
		out     syncbuf.Buffer
		exited  chan struct{}
		waitErr error // set before exited closes
	}
)

// Run runs the tests with run (m.Run itself, or a helper such as
// storetest.Run that wraps it), then stops the binary's stripe-mock if a
// test started it, and answers the code for os.Exit.
func Run(m *testing.M, run func(*testing.M) int) int {
	mainCalled.Store(true)
	code := run(m)
	if shared.cmd != nil {
		_ = shared.cmd.Process.Kill()
		<-shared.exited
	}
	return code
}

// start runs stripe-mock and waits until it listens.
func start() (string, error) {
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		gopath, gerr := exec.Command("go", "env", "GOPATH").Output()
		cand := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "stripe-mock")
		if _, serr := os.Stat(cand); gerr != nil || serr != nil {
			return "", errors.New("stripe-mock is not on PATH nor in $(go env GOPATH)/bin: `make test` installs it, or run go install github.com/stripe/stripe-mock@v0.203.0")
		}
		bin = cand
	}
	httpAddr, err := freeport.Free()
	if err != nil {
		return "", err
	}
	httpsAddr, err := freeport.Free()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "-http-addr", httpAddr, "-https-addr", httpsAddr)
	cmd.Stdout, cmd.Stderr = &shared.out, &shared.out
	endWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start stripe-mock: %w", err)
	}
	shared.cmd, shared.exited = cmd, make(chan struct{})
	go func() { shared.waitErr = cmd.Wait(); close(shared.exited) }()
	// stripe-mock loads Stripe's whole API description before it listens,
	// about two seconds on a busy 2-core machine, and more where parallel
	// tests start several at once (10 s ran out under a loaded httpapi
	// run). The wait bounds a start that is stuck, not its speed; a
	// stripe-mock that exited says why.
	deadline := time.Now().Add(startWait)
	for {
		select {
		case <-shared.exited:
			return "", fmt.Errorf("stripe-mock exited before it listened on %s: %v\n%s", httpAddr, shared.waitErr, shared.out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", httpAddr, time.Second); err == nil {
			c.Close()
			return "http://" + httpAddr, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("stripe-mock not listening on %s within %s; its output:\n%s", httpAddr, startWait, shared.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startWait bounds stripe-mock's start.
const startWait = 2 * time.Minute

// Proxy passes requests on to stripe-mock, recording each as
// "METHOD /path".
type Proxy struct {
	URL string

	mu     sync.Mutex
	calls  []string
	answer func(w http.ResponseWriter, r *http.Request) bool
}

// NewProxy starts a proxy in front of the binary's stripe-mock (Start),
// closed with the test: its record and answers are the test's own.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	target, err := url.Parse(Start(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = testhttp.Transport // a parallel test's httptest.Server.Close closes DefaultTransport's idle connections
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.calls = append(p.calls, r.Method+" "+r.URL.Path)
		answer := p.answer
		p.mu.Unlock()
		if answer != nil && answer(w, r) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Answer sets fn to see each request first: it answers one itself by
// returning true, and may block. Nil passes everything on.
func (p *Proxy) Answer(fn func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = fn
}

// Hold makes the proxy hold each request call ("POST /v1/checkout/sessions")
// until n of them have come, or a second has passed, then pass it on: n
// requests made at once overlap at Stripe, as a slow Stripe makes them.
func (p *Proxy) Hold(call string, n int) {
	var mu sync.Mutex
	asked, all := 0, make(chan struct{})
	p.Answer(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method+" "+r.URL.Path == call {
			mu.Lock()
			if asked++; asked == n {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(time.Second):
			}
		}
		return false
	})
}

// Calls counts the requests recorded as call ("POST /v1/checkout/sessions").
func (p *Proxy) Calls(call string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c == call {
			n++
		}
	}
	return n
}
