//go:build unix

package connlimit_test

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/connlimit"
)

// TestCountedConnectionsKeepTheirSocket: a counted connection gives its
// socket's descriptor as the TCP connection does (syscall.Conn). The phone
// links' reader waits on it outside the WebSocket library; a wrapper without
// it would quietly put every link of a server with the bound on (the
// default) back on the library's buffers.
func TestCountedConnectionsKeepTheirSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(ln, connlimit.Config{PerClient: 10})
	t.Cleanup(func() { _ = l.Close() })
	client := dial(t, ln.Addr().String())
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("an accepted %T gives no socket descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(client, "x"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	err = raw.Read(func(fd uintptr) bool {
		buf := make([]byte, 8)
		n, rerr := syscall.Read(int(fd), buf)
		if rerr == syscall.EAGAIN {
			return false
		}
		got = buf[:max(n, 0)]
		return true
	})
	if err != nil || string(got) != "x" {
		t.Fatalf("read %q through the descriptor: %v", got, err)
	}
}
