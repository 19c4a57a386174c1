package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/connlimit"
	"github.com/simrelay/simrelay/internal/storetest"
)

// TestRegisteredLinksLeaveTheAddressBound: the server bounds the connections
// one client address holds (internal/connlimit, --max-conns-per-ip). A phone
// link gives its place back once it is registered (its device's one link),
// so more phones than the bound connect from one address, as a fleet behind
// a NAT does, while anything else from that address still meets the bound.
func TestRegisteredLinksLeaveTheAddressBound(t *testing.T) {
	t.Parallel()
	const bound = 2
	r := newRigServed(t, Config{}, time.Now, storetest.Options{}, func(ln net.Listener) net.Listener {
		return connlimit.New(ln, connlimit.Config{PerClient: bound, Refuse: refuse429})
	})
	for i := range 2 * bound {
		r.connect(r.pair(fmt.Sprintf("fp-bound-%d", i)))
	}
	addr := strings.TrimPrefix(r.url, "ws://")
	status := func() int {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET /device/ws HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	// Connections without a registered link keep their places (kept alive
	// after their 401), up to the bound.
	for i := range bound {
		if got := status(); got != http.StatusUnauthorized {
			t.Fatalf("connection %d without a token: %d, want 401", i, got)
		}
	}
	if got := status(); got != http.StatusTooManyRequests {
		t.Fatalf("connection over the bound: %d, want 429", got)
	}
}

// refuse429 answers a connection over the bound as the server does (its body
// is httpapi's, which this package does not import).
func refuse429(c net.Conn) {
	_, _ = io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}
