package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/connlimit"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/pacing"
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

// TestReplacedLinksCountAgain: a link replaced by its device's newer one is
// no longer that device's one link, and counts against its address again
// until its connection is closed. Without that, one device token opening
// links that never answer the close handshake held thousands of
// connections from one address (each for the handshake's 5 to 10 s) past
// --max-conns-per-ip 1000.
func TestReplacedLinksCountAgain(t *testing.T) {
	t.Parallel()
	ln := new(*connlimit.Listener)
	r := newRigServed(t, Config{}, time.Now, storetest.Options{}, func(l net.Listener) net.Listener {
		*ln = connlimit.New(l, connlimit.Config{PerClient: 1, Refuse: refuse429})
		return *ln
	})
	addr := strings.TrimPrefix(r.url, "ws://")
	token := r.pair("fp-replaced")
	key := pacing.ClientKey("127.0.0.1")
	// The replaced link's phone reads but never answers the close: the
	// server waits for that answer a few seconds. A machine so slow that
	// the wait ended before the count was read proves nothing either way,
	// and the round is played again.
	for round := range 5 {
		first := rawLink(t, addr, token)
		second := rawLink(t, addr, token)
		r.serverClosed("fp-replaced", proto.CloseReplaced)
		open := (*ln).Open(key)
		if !stillOpen(t, first) {
			t.Logf("round %d: the replaced link ended before the count was read", round)
			_ = second.Close()
			continue
		}
		if open != 1 {
			t.Fatalf("counted connections of the address with a replaced link still open: %d, want 1", open)
		}
		_ = first.Close()
		_ = second.Close()
		return
	}
	t.Skip("every replaced link ended before its count could be read")
}

// rawLink upgrades a TCP connection with token, says hello and reads up to
// the welcome; it never answers anything the server sends after that.
func rawLink(t *testing.T, addr, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /device/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer " + token + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	hello := []byte(`{"type":"hello","protocol":1,"app_version":"test"}`)
	// A client's frame is masked; a zero mask leaves the payload as it is.
	frame := append([]byte{0x81, 0x80 | byte(len(hello)), 0, 0, 0, 0}, hello...)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	buf := make([]byte, 512)
	for !strings.Contains(string(seen), `"welcome"`) {
		n, err := br.Read(buf)
		if err != nil {
			t.Fatalf("reading the welcome: %v (read %q)", err, seen)
		}
		seen = append(seen, buf[:n]...)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// stillOpen reads what the server sent on c and says whether the server
// has not closed the connection.
func stillOpen(t *testing.T, c net.Conn) bool {
	t.Helper()
	buf := make([]byte, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := c.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.As(err, &ne) && ne.Timeout():
			return true
		default:
			return false
		}
	}
}
