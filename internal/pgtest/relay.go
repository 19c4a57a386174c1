package pgtest

import (
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Relayed is the way to a test's database through a relay on a Unix socket
// of its own, standing for the network to the database: Cut closes every
// connection through it and refuses new ones, the database going away;
// Stall keeps every connection open and accepts new ones but forwards
// nothing, dropping the bytes either way, a database host that went
// silent (powered off behind a firewall, a network partition); Resume
// lets connections through again, the database back.
type Relayed struct {
	// URL reaches the database through the relay.
	URL string

	mu      sync.Mutex
	conns   []net.Conn // both ends of every connection made; guarded by mu
	refused bool       // guarded by mu
	// stalled is set by Stall: the copies drop what they read.
	stalled atomic.Bool
	// fromDB counts the bytes the database sent through the relay.
	fromDB atomic.Int64
}

// FromDatabase is how many bytes the database has sent through the relay
// so far: what its clients were sent, whether they read it or not.
func (r *Relayed) FromDatabase() int64 { return r.fromDB.Load() }

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
			wg.Go(func() { r.copy(db, c, nil); db.Close() })
			wg.Go(func() { r.copy(c, db, &r.fromDB); c.Close() })
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

// copy forwards what src sends to dst until either fails or closes,
// dropping it instead while the relay is stalled; count, when set, counts
// the bytes forwarded.
func (r *Relayed) copy(dst, src net.Conn, count *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !r.stalled.Load() {
			if count != nil {
				count.Add(int64(n))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall makes the relay silent: the connections through it stay open and
// new ones are accepted, but nothing is forwarded either way, what is sent
// dropped, as to a host that stopped answering without refusing. Only a
// deadline of the client's own ends its wait.
func (r *Relayed) Stall() { r.stalled.Store(true) }

// Resume lets new connections through again. After a Stall it first
// closes every connection made before, which lost bytes (the host back:
// its sessions are gone).
func (r *Relayed) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stalled.Load() {
		for _, c := range r.conns {
			c.Close()
		}
		r.conns = nil
		r.stalled.Store(false)
	}
	r.refused = false
}
