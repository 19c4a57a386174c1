// Package connlimit bounds the connections one client address holds open on
// a listener. The HTTP server's timeouts bound how long each connection
// lives (10 s for a request's header, a minute for its body, two minutes
// idle between requests), but not how many one client opens: without a
// bound, one address could hold every file descriptor the process may open
// with idle keep-alive connections, and no phone, browser or API client
// could connect any more.
package connlimit

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/simrelay/simrelay/pacing"
)

// DefaultPerClient is the default bound of connections from one address:
// far above what a browser (6 per host), an API client's pool or the phones
// of one office reconnecting at once behind a NAT hold (a registered link
// gives its place back: Uncount), far below the process's
// file descriptors.
const DefaultPerClient = 1000

// refusalBody is the contract's error body of the refusal.
const refusalBody = `{"error":"rate_limited","message":"Too many connections from this address at once; close some and try again."}`

// refusal is written to a connection over the bound before it is closed.
// It is a whole HTTP answer, since the connection is refused before any
// request is read: a client sees 429 rate_limited rather than a reset.
var refusal = []byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
	strconv.Itoa(len(refusalBody)) + "\r\n\r\n" + refusalBody)

// Listener accepts at most PerClient open connections from one client
// address (an IPv6 client is its /64, as in the rate limits); connections
// from an exempt network (the trusted proxies, which carry many clients
// each) are not counted.
type Listener struct {
	net.Listener
	perClient int
	exempt    []*net.IPNet

	mu   sync.Mutex // guards open; held only for map updates
	open map[string]int

	refused atomic.Uint64
}

// New bounds ln to perClient connections per client address; perClient <= 0
// bounds nothing and returns ln's connections as they are.
func New(ln net.Listener, perClient int, exempt []*net.IPNet) *Listener {
	return &Listener{Listener: ln, perClient: perClient, exempt: exempt, open: map[string]int{}}
}

// Accept returns the next connection within the bound. One over it is
// answered 429 and closed here, and Accept waits for the next.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.perClient <= 0 {
			return c, nil
		}
		ip := hostOf(c.RemoteAddr())
		if l.exempted(ip) {
			return c, nil
		}
		key := pacing.ClientKey(ip.String())
		l.mu.Lock()
		if l.open[key] >= l.perClient {
			l.mu.Unlock()
			l.refused.Add(1)
			// The kernel's send buffer takes the answer without the client
			// reading; the deadline only guards against a full one, so
			// Accept never waits on a client.
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write(refusal)
			_ = c.Close()
			continue
		}
		l.open[key]++
		l.mu.Unlock()
		return &conn{Conn: c, l: l, key: key, counted: true}, nil
	}
}

// Refused is how many connections were refused over the bound.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Open is how many counted connections key (a client address as
// pacing.ClientKey writes it) holds now.
func (l *Listener) Open(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[key]
}

func (l *Listener) exempted(ip net.IP) bool {
	for _, n := range l.exempt {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func (l *Listener) release(key string) {
	l.mu.Lock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
	l.mu.Unlock()
}

// conn holds a place in its address's count from Accept until its first
// Close (the HTTP server may close a connection more than once), except
// while Uncount has given it back.
type conn struct {
	net.Conn
	l   *Listener
	key string

	mu      sync.Mutex
	counted bool // the connection holds a place; guarded by mu
	settled bool // Recount or Close was called: Uncount no longer gives the place back; guarded by mu
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	counted := c.counted
	c.counted, c.settled = false, true
	c.mu.Unlock()
	if counted {
		c.l.release(c.key)
	}
	return err
}

// Uncount gives the connection's place back while it stays open: the
// phone hub calls it once a link's device token is checked and the link
// registered. Such a link is the device's one link (a newer one replaces
// it), so what a company's links hold is bounded by its devices, not by
// this bound; without it, more phones than the bound behind one NAT
// address could not all connect. Anonymous and unregistered connections
// stay counted. After Recount or Close it does nothing.
func (c *conn) Uncount() {
	c.mu.Lock()
	give := c.counted && !c.settled
	if give {
		c.counted = false
	}
	c.mu.Unlock()
	if give {
		c.l.release(c.key)
	}
}

// Recount takes the connection's place back, over the bound if need be
// (the connection is open already): the phone hub calls it when a link
// stops being its device's one link (replaced by a newer one, or closed by
// the server), since the close handshake that follows can keep the
// connection open for seconds. Without it, a client opening link after
// link with one device token, each replacing the last and none answering
// its close, held connections from one address far past the bound.
// Connections from the address are refused until the count falls below
// the bound again. It is final: a later Uncount gives nothing back.
func (c *conn) Recount() {
	c.mu.Lock()
	take := !c.counted && !c.settled
	if take {
		c.counted = true
	}
	c.settled = true
	c.mu.Unlock()
	if take {
		c.l.mu.Lock()
		c.l.open[c.key]++
		c.l.mu.Unlock()
	}
}

// SyscallConn gives the socket's descriptor, as the TCP connection does:
// the phone links' reader waits for data on it directly, outside the
// WebSocket library and without a buffer (gateway's linkIO), and without
// it every link would fall back to the library's buffers and deep waits.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// CloseWrite keeps the TCP connection's half-close, with which the HTTP
// server lets a client read an error answer before the connection ends.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// hostOf is the IP of a connection's remote address.
func hostOf(a net.Addr) net.IP {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return net.ParseIP(a.String())
	}
	return net.ParseIP(host)
}
