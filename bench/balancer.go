package bench

import (
	"io"
	"net"
	"sync"
	"time"
)

// balancer is the cluster bench's stand-in for the load balancer in front
// of the nodes (docs/cluster.md tries nginx and HAProxy): a TCP forwarder
// on loopback that gives each connection to the first backend that accepts
// it, in order. So a phone lands on the first node while it lives and on
// the next one once it is dead, as a balancer that tries the next upstream
// when a connection is refused. It stands in for nothing of simrelay's: it
// only spares the bench a balancer process of its own.
type balancer struct {
	ln       net.Listener
	backends []string // host:port, in the order tried

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // the accept loop and every pipe
}

func newBalancer(backends []string) (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	b.wg.Go(b.accept)
	return b, nil
}

// url is the balancer's address as an http:// base.
func (b *balancer) url() string { return "http://" + b.ln.Addr().String() }

func (b *balancer) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		if !b.track(c) {
			return
		}
		b.wg.Go(func() { b.pipe(c) })
	}
}

// track registers a connection for close; false once the balancer closed.
func (b *balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		c.Close()
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *balancer) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	c.Close()
}

// pipe joins c to the first backend that accepts, and closes both sides
// when either ends: a node that dies closes its phones' links at once.
func (b *balancer) pipe(c net.Conn) {
	defer b.untrack(c)
	for _, addr := range b.backends {
		up, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		if !b.track(up) {
			return
		}
		defer b.untrack(up)
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
		<-done
		// Closing both ends the other copy; wait for it before returning.
		c.Close()
		up.Close()
		<-done
		return
	}
}

// close stops accepting, closes every connection and waits for the pipes.
func (b *balancer) close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
}
