// Package stripemock runs stripe-mock, Stripe's own API double, for the
// tests, and a proxy in front of it that records the calls and lets a test
// answer some of them itself (what stripe-mock cannot be: a session already
// paid, a slow Stripe).
package stripemock

import (
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
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// Start runs stripe-mock on loopback for the test and returns its URL.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		gopath, gerr := exec.Command("go", "env", "GOPATH").Output()
		cand := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "stripe-mock")
		if _, serr := os.Stat(cand); gerr != nil || serr != nil {
			t.Fatalf("stripe-mock is not on PATH nor in $(go env GOPATH)/bin: `make test` installs it, or run go install github.com/stripe/stripe-mock@v0.203.0")
		}
		bin = cand
	}
	httpAddr, httpsAddr := freeport.Addr(t), freeport.Addr(t)
	cmd := exec.Command(bin, "-http-addr", httpAddr, "-https-addr", httpsAddr)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	// stripe-mock loads Stripe's whole API description before it listens,
	// about two seconds on a busy 2-core machine, and more where parallel
	// tests start several at once (10 s ran out under a loaded httpapi
	// run). The wait bounds a start that is stuck, not its speed; a
	// stripe-mock that exited says why.
	deadline := time.Now().Add(startWait)
	for {
		select {
		case <-exited:
			t.Fatalf("stripe-mock exited before it listened on %s: %v\n%s", httpAddr, waitErr, out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", httpAddr, time.Second); err == nil {
			c.Close()
			return "http://" + httpAddr
		}
		if time.Now().After(deadline) {
			t.Fatalf("stripe-mock not listening on %s within %s; its output:\n%s", httpAddr, startWait, out.String())
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

// NewProxy starts stripe-mock and a proxy in front of it, both closed with the test.
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
