// Package deaf is a TCP listener on loopback that takes connections and
// never answers them, as a server (or a proxy before it) that hangs does:
// for the tests of clients that must give up waiting.
package deaf

import (
	"net"
	"sync"
	"testing"
)

// Listener takes connections and reads none of them; they stay open until
// the test ends.
type Listener struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// Listen starts a deaf listener on 127.0.0.1, closed with every connection
// it took when the test ends.
func Listen(t testing.TB) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &Listener{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.conns {
			c.Close()
		}
	})
	return l
}

// Addr is the listener's host:port.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Accepted is how many connections it took so far.
func (l *Listener) Accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
