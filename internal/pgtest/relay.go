package pgtest

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
)

// Relayed is the way to a test's database through a relay on a Unix socket
// of its own, standing for the network to the database: Cut closes every
// connection through it and refuses new ones, the database going away;
// Resume lets connections through again, the database back.
type Relayed struct {
	// URL reaches the database through the relay.
	URL string

	mu      sync.Mutex
	conns   []net.Conn // both ends of every connection made; guarded by mu
	refused bool       // guarded by mu
}

// Relay opens a relay to the database at dbURL (one of URL's); it closes
// with the test.
func Relay(t testing.TB, dbURL string) *Relayed {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	socket := filepath.Join(q.Get("host"), ".s.PGSQL."+q.Get("port"))
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL."+q.Get("port")))
	if err != nil {
		t.Fatal(err)
	}
	q.Set("host", dir)
	u.RawQuery = q.Encode()
	r := &Relayed{URL: u.String()}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			db, err := net.Dial("unix", socket)
			if err != nil {
				c.Close()
				continue
			}
			// Refused is read where the connection is recorded, in one hold
			// of mu: a Cut between a check and the record would leave this
			// connection open through the cut (and, at the test's end, its
			// copies running past wg.Wait's wait).
			r.mu.Lock()
			refused := r.refused
			if !refused {
				r.conns = append(r.conns, c, db)
			}
			r.mu.Unlock()
			if refused {
				c.Close()
				db.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(db, c); db.Close() })
			wg.Go(func() { _, _ = io.Copy(c, db); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		r.Cut()
		wg.Wait()
	})
	return r
}

// Cut closes every connection through the relay and refuses new ones until
// Resume.
func (r *Relayed) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = true
	for _, c := range r.conns {
		c.Close() // does not block
	}
	r.conns = nil
}

// Resume lets new connections through again.
func (r *Relayed) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = false
}
