package connlimit_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/connlimit"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/pacing"
)

// serve runs an HTTP server with the server's timeouts on a loopback
// listener bounded as cmd/simrelay bounds it, answering every request 200 "ok".
func serve(t *testing.T, perClient int, exempt []*net.IPNet) (*connlimit.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(ln, connlimit.Config{PerClient: perClient, Exempt: exempt, Refuse: httpapi.RefuseConnection})
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return l, ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// get sends one request on c and reads the answer's status and body.
func get(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return read(t, c)
}

func read(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// TestOneAddressHoldsAtMostItsShare: idle keep-alive connections of one
// address stop at the bound; the one over it is answered 429 rate_limited
// in the contract's body and closed, and a connection closed makes room.
func TestOneAddressHoldsAtMostItsShare(t *testing.T) {
	t.Parallel()
	l, addr := serve(t, 3, nil)
	held := make([]net.Conn, 3)
	for i := range held {
		held[i] = dial(t, addr)
		if st, body := get(t, held[i]); st != http.StatusOK || body != "ok" {
			t.Fatalf("connection %d: %d %q", i, st, body)
		}
	}
	over := dial(t, addr)
	st, body := read(t, over) // answered before it sends anything
	if st != http.StatusTooManyRequests || !strings.Contains(body, `"error":"rate_limited"`) || !strings.Contains(body, `"message":"Too many connections`) {
		t.Fatalf("the fourth connection: %d %s, want 429 rate_limited", st, body)
	}
	if _, err := over.Read(make([]byte, 1)); err == nil {
		t.Fatal("the refused connection stays open")
	}
	if l.Refused() != 1 || l.Open("127.0.0.1") != 3 {
		t.Fatalf("refused %d, open %d; want 1 and 3", l.Refused(), l.Open("127.0.0.1"))
	}
	_ = held[0].Close()
	poll.Until(t, "the closed connection's place is given back", func() bool { return l.Open("127.0.0.1") == 2 })
	if st, body := get(t, dial(t, addr)); st != http.StatusOK || body != "ok" {
		t.Fatalf("after a close: %d %q", st, body)
	}
}

// TestExemptNetworksAreNotCounted: a trusted proxy carries many clients on
// its connections, so its address is not bounded.
func TestExemptNetworksAreNotCounted(t *testing.T) {
	t.Parallel()
	_, loop, _ := net.ParseCIDR("127.0.0.0/8")
	l, addr := serve(t, 1, []*net.IPNet{loop})
	for i := range 3 {
		if st, _ := get(t, dial(t, addr)); st != http.StatusOK {
			t.Fatalf("connection %d from an exempt address: %d", i, st)
		}
	}
	if l.Refused() != 0 {
		t.Fatalf("refused %d", l.Refused())
	}
}

// TestZeroBoundsNothing: --max-conns-per-ip 0 turns the bound off.
func TestZeroBoundsNothing(t *testing.T) {
	t.Parallel()
	_, addr := serve(t, 0, nil)
	for i := range 3 {
		if st, _ := get(t, dial(t, addr)); st != http.StatusOK {
			t.Fatalf("connection %d: %d", i, st)
		}
	}
}

// TestRecountTakesThePlaceBackForGood: a connection given back (Uncount)
// and taken again (Recount) holds its place until it is closed, whatever
// Uncount says after that, and gives it back once however often it is
// closed.
func TestRecountTakesThePlaceBackForGood(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(raw, connlimit.Config{PerClient: 1})
	t.Cleanup(func() { _ = l.Close() })
	dial(t, raw.Addr().String())
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	key := pacing.ClientKey("127.0.0.1")
	type counter interface {
		Uncount()
		Recount()
	}
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"accepted", func() {}, 1},
		{"uncounted", c.(counter).Uncount, 0},
		{"recounted", c.(counter).Recount, 1},
		{"uncounted after recount", c.(counter).Uncount, 1},
		{"closed", func() { _ = c.Close() }, 0},
		{"closed twice", func() { _ = c.Close() }, 0},
		{"recounted after close", c.(counter).Recount, 0},
	}
	for _, s := range steps {
		s.do()
		if got := l.Open(key); got != s.want {
			t.Fatalf("%s: open %d, want %d", s.name, got, s.want)
		}
	}
}
