package connlimit_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/connlimit"
)

const busy = "busy\r\n"

// accepting runs l's accept loop as a server does, handing out what it
// accepts, until l is closed.
func accepting(t *testing.T, cfg connlimit.Config) (*connlimit.Listener, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Refuse = func(c net.Conn) { _, _ = io.WriteString(c, busy) }
	l := connlimit.New(ln, cfg)
	accepted := make(chan net.Conn, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
	})
	return l, accepted
}

// dialFrom connects to l from the loopback address ip.
func dialFrom(t *testing.T, l *connlimit.Listener, ip net.IP) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func take(t *testing.T, accepted <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-accepted:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted in 10 s")
		return nil
	}
}

// refusedWith reads what c is told, up to its end: the refusal and EOF.
func refusedWith(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		t.Fatalf("reading the refusal: %v", err)
	}
	return string(got)
}

// TestTotalBoundsEveryAddressTogether: with a total bound, connections
// from different addresses fill it together; the next is refused with the
// caller's answer and closed, and a connection closed makes room.
func TestTotalBoundsEveryAddressTogether(t *testing.T) {
	t.Parallel()
	l, accepted := accepting(t, connlimit.Config{PerClient: 5, Total: 2})
	dialFrom(t, l, net.IPv4(127, 0, 0, 1))
	first := take(t, accepted)
	dialFrom(t, l, net.IPv4(127, 0, 0, 2))
	take(t, accepted)
	if got := refusedWith(t, dialFrom(t, l, net.IPv4(127, 0, 0, 3))); got != busy {
		t.Fatalf("the third connection, from a third address: %q, want %q", got, busy)
	}
	if l.Refused() != 1 {
		t.Fatalf("refused %d, want 1", l.Refused())
	}
	_ = first.Close()
	dialFrom(t, l, net.IPv4(127, 0, 0, 3))
	take(t, accepted)
}

// TestExemptNetworksCountInTheTotal: a trusted proxy is not bounded per
// address, but its connections use the process's resources as any do.
func TestExemptNetworksCountInTheTotal(t *testing.T) {
	t.Parallel()
	_, proxy, _ := net.ParseCIDR("127.0.0.1/32")
	l, accepted := accepting(t, connlimit.Config{PerClient: 1, Exempt: []*net.IPNet{proxy}, Total: 2})
	for range 2 {
		dialFrom(t, l, net.IPv4(127, 0, 0, 1))
		take(t, accepted)
	}
	if got := refusedWith(t, dialFrom(t, l, net.IPv4(127, 0, 0, 2))); got != busy {
		t.Fatalf("over the total: %q, want %q", got, busy)
	}
}

// TestCloseAllCutsTrackedConnections: a tracked listener cuts the
// connections still open when a shutdown's deadline comes; a connection
// that gave its places back (Uncount) is cut too, since it is still open.
func TestCloseAllCutsTrackedConnections(t *testing.T) {
	t.Parallel()
	l, accepted := accepting(t, connlimit.Config{PerClient: 5, Total: 5, Track: true})
	clients := make([]net.Conn, 3)
	for i := range clients {
		clients[i] = dialFrom(t, l, net.IPv4(127, 0, 0, 1))
		c := take(t, accepted)
		if i == 0 {
			c.(interface{ Uncount() }).Uncount()
		}
	}
	if l.Live() != 3 || l.Open("127.0.0.1") != 2 {
		t.Fatalf("live %d, open %d; want 3 and 2", l.Live(), l.Open("127.0.0.1"))
	}
	_ = l.Close()
	l.CloseAll()
	for i, c := range clients {
		if got := refusedWith(t, c); got != "" {
			t.Fatalf("client %d read %q", i, got)
		}
	}
	if l.Live() != 0 || l.Open("127.0.0.1") != 0 {
		t.Fatalf("after CloseAll: live %d, open %d; want 0 and 0", l.Live(), l.Open("127.0.0.1"))
	}
}

// TestUntrackedListenersKnowNoConnections: tracking is the caller's
// choice; without it nothing is remembered (the HTTP server pays nothing
// for it) and CloseAll cuts nothing.
func TestUntrackedListenersKnowNoConnections(t *testing.T) {
	t.Parallel()
	l, accepted := accepting(t, connlimit.Config{PerClient: 5})
	client := dialFrom(t, l, net.IPv4(127, 0, 0, 1))
	server := take(t, accepted)
	l.CloseAll()
	if l.Live() != 0 {
		t.Fatalf("live %d, want 0", l.Live())
	}
	if _, err := io.WriteString(server, "x"); err != nil {
		t.Fatalf("the connection after CloseAll: %v, want it open", err)
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 1)
	if _, err := io.ReadFull(client, b); err != nil || b[0] != 'x' {
		t.Fatalf("the client read %q, %v; want what the server wrote after CloseAll", b, err)
	}
}
