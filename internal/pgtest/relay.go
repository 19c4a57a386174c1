package pgtest

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
)

// Relay answers a URL of the database at dbURL (one of URL's) that reaches
// it through a relay on a Unix socket of its own, standing for the network
// to the database: cut closes the relay and every connection through it,
// the database going away (new connections are refused from then on).
func Relay(t testing.TB, dbURL string) (relayed string, cut func()) {
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
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
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
			mu.Lock()
			conns = append(conns, c, db)
			mu.Unlock()
			go func() { _, _ = io.Copy(db, c); db.Close() }()
			go func() { _, _ = io.Copy(c, db); c.Close() }()
		}
	}()
	cut = func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
	t.Cleanup(cut)
	q.Set("host", dir)
	u.RawQuery = q.Encode()
	return u.String(), cut
}
