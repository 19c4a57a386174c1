package webhook

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// switcher is a receiver that answers every request 101 Switching
// Protocols and then sends nothing more, holding the connection until the
// test ends: net/http hands such an answer's raw connection over as its
// body, whose reads the request's deadline does not bound.
type switcher struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn // guarded by mu
}

func newSwitcher(t *testing.T) *switcher {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switcher{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: hold\r\n\r\n"))
			}()
		}
	}()
	return s
}

// close ends the listener and every connection it holds.
func (s *switcher) close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// A receiver that answers 101 Switching Protocols and then holds the
// connection fails the attempt within its timeout, as one that never
// answers does: its worker is free again and the attempt is logged. The
// attempt read the switched connection without a deadline, and the worker
// (with its company's and its entry's places) stayed there for good, as
// did the server's shutdown, which waits for the workers.
func TestProtocolSwitchDoesNotHoldAWorker(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sw := newSwitcher(t)
	svc, _ := f.start(Config{AllowPrivate: true, Workers: 1, Timeout: 500 * time.Millisecond, Schedule: []time.Duration{time.Hour}}, nil)
	t.Cleanup(sw.close) // before the service stops: a held read ends there
	f.configure(svc, EntryInput{URL: "http://" + sw.ln.Addr().String() + "/hook"})
	f.inbound(svc, f.device, "SIM1", time.Now())
	var lines []store.WebhookAttempt
	eventually(t, "the attempt logged", func() bool {
		lines = f.lines()
		return len(lines) == 1
	})
	l := lines[0]
	if l.StatusCode != http.StatusSwitchingProtocols || l.State != store.WebhookPending || !strings.Contains(l.Error, "101 Switching Protocols") {
		t.Fatalf("got %+v, want a failed attempt, status 101, to be retried", l)
	}
}
