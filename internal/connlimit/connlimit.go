package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simrelay/simrelay/pacing"
)

// DefaultPerClient is the HTTP server's default bound of connections from
// one address (--max-conns-per-ip): far above what a browser (6 per host),
// an API client's pool or the phones of one office reconnecting at once
// behind a NAT hold (a registered link gives its place back: Uncount), far
// below the process's file descriptors.
const DefaultPerClient = 1000

// refuseWithin bounds the write of a refusal. The kernel's send buffer takes
// a short answer without the client reading; the deadline only guards
// against a full one, so that Accept never waits on a client.
const refuseWithin = time.Second

// Config says what a Listener bounds; the zero Config bounds nothing.
type Config struct {
	// PerClient bounds the connections one client address holds open at
	// once (an IPv6 client is its /64); <= 0 bounds nothing.
	PerClient int
	// Exempt are networks whose connections are not counted per address:
	// a trusted proxy carries many clients on its connections. They still
	// count in Total, which guards the process, not fairness.
	Exempt []*net.IPNet
	// Total bounds the connections held open at once, in all; <= 0 bounds
	// nothing.
	Total int
	// Refuse answers a connection over a bound before the listener closes
	// it (HTTP's 429, SMTP's 421). It runs on the accepting goroutine with a
	// write deadline a second away, so it must only write. nil: the
	// connection is closed without a word.
	Refuse func(net.Conn)
	// Track remembers every open connection, so that CloseAll can cut those
	// still open at a shutdown's deadline (go-smtp's Shutdown only waits for
	// them). It costs a map entry per connection: the HTTP server, whose
	// http.Server tracks its own, goes without.
	Track bool
}

// Listener accepts connections within its Config's bounds.
type Listener struct {
	net.Listener
	cfg Config

	mu     sync.Mutex         // guards the fields below; held only for map and counter updates
	open   map[string]int     // connections counted per client key
	held   int                // connections counted in cfg.Total
	live   map[*conn]struct{} // open connections, with cfg.Track
	closed bool               // Close was called

	refused atomic.Uint64
}

// New bounds ln as cfg says.
func New(ln net.Listener, cfg Config) *Listener {
	l := &Listener{Listener: ln, cfg: cfg, open: map[string]int{}}
	if cfg.Track {
		l.live = map[*conn]struct{}{}
	}
	return l
}

// Accept returns the next connection within the bounds. One over a bound is
// answered (Config.Refuse) and closed here, and Accept waits for the next.
// A connection that counts in nothing and is not tracked is returned as it
// is; the others are wrapped to give their places back on Close.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := l.keyOf(c)
		if key == "" && l.cfg.Total <= 0 && !l.cfg.Track {
			return c, nil
		}
		l.mu.Lock()
		if l.cfg.Track && l.closed {
			// Taken from the socket as the listener closed: handed out, it
			// would escape a CloseAll already under way.
			l.mu.Unlock()
			_ = c.Close()
			return nil, net.ErrClosed
		}
		if (key != "" && l.open[key] >= l.cfg.PerClient) || (l.cfg.Total > 0 && l.held >= l.cfg.Total) {
			l.mu.Unlock()
			l.refuse(c)
			continue
		}
		lc := &conn{Conn: c, l: l, key: key, counted: true}
		if key != "" {
			l.open[key]++
		}
		if l.cfg.Total > 0 {
			l.held++
		}
		if l.cfg.Track {
			l.live[lc] = struct{}{}
		}
		l.mu.Unlock()
		return lc, nil
	}
}

// Close closes the listener; with Config.Track, a connection it takes from
// the socket from then on is closed rather than handed out.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

// CloseAll closes every open connection (with Config.Track; without, it
// knows of none): a shutdown's last step, for those still open at its
// deadline. Call it after Close, so that no new one arrives.
func (l *Listener) CloseAll() {
	l.mu.Lock()
	conns := make([]*conn, 0, len(l.live))
	for c := range l.live {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Refused is how many connections were refused over a bound.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Open is how many counted connections key (a client address as
// pacing.ClientKey writes it) holds now.
func (l *Listener) Open(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[key]
}

// Live is how many connections are open now (with Config.Track; 0 without).
func (l *Listener) Live() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.live)
}

// keyOf is the key c counts under per client address; "" when it is not
// counted per address (no PerClient bound, or an exempt network).
func (l *Listener) keyOf(c net.Conn) string {
	if l.cfg.PerClient <= 0 {
		return ""
	}
	ip, host := ClientOf(c.RemoteAddr())
	for _, n := range l.cfg.Exempt {
		if n.Contains(ip) {
			return ""
		}
	}
	return pacing.ClientKey(host)
}

func (l *Listener) refuse(c net.Conn) {
	l.refused.Add(1)
	if l.cfg.Refuse != nil {
		_ = c.SetWriteDeadline(time.Now().Add(refuseWithin))
		l.cfg.Refuse(c)
	}
	_ = c.Close()
}

// release gives c's places back in the bounds, once, and with closed, forgets
// it; without closed (Uncount), only until Recount or Close settled it.
func (l *Listener) release(c *conn, closed bool) {
	l.mu.Lock()
	if c.counted && (closed || !c.settled) {
		c.counted = false
		if c.key != "" {
			if l.open[c.key]--; l.open[c.key] <= 0 {
				delete(l.open, c.key)
			}
		}
		if l.cfg.Total > 0 {
			l.held--
		}
	}
	if closed {
		c.settled = true
		if l.live != nil {
			delete(l.live, c)
		}
	}
	l.mu.Unlock()
}

// ClientOf is the IP of a connection's remote address and the text it is
// counted under: the IP of a TCP address, the host (or the whole string) of
// any other. The SMTP server names its sessions' clients with that text too.
func ClientOf(a net.Addr) (net.IP, string) {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP, ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		host = a.String()
	}
	return net.ParseIP(host), host
}
