package smtpd

import (
	"net"
	"sync"
	"time"

	"github.com/simrelay/simrelay/pacing"
)

// tooMany is the reply to a connection over a limit, written before it is closed.
const tooMany = "421 4.7.0 Too many connections; try again later\r\n"

// limitListener bounds open connections, in all and per client address, and
// remembers them so that Shutdown can cut those still open at its deadline
// (go-smtp's Shutdown waits for idle connections, its Close does not wait).
type limitListener struct {
	net.Listener
	total, perIP int
	life         time.Duration // a connection's longest life (Config.MaxSession)

	mu    sync.Mutex // guards the fields below
	conns map[*limitedConn]struct{}
	byIP  map[string]int
	down  bool
}

func newLimitListener(ln net.Listener, total, perIP int, life time.Duration) *limitListener {
	return &limitListener{Listener: ln, total: total, perIP: perIP, life: life, conns: map[*limitedConn]struct{}{}, byIP: map[string]int{}}
}

// Accept returns the next connection within the limits; those over a limit
// get a 421 reply and are closed here, and Accept waits for the next.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := pacing.ClientKey(hostOf(c.RemoteAddr()))
		l.mu.Lock()
		if l.down {
			l.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		if len(l.conns) >= l.total || l.byIP[ip] >= l.perIP {
			l.mu.Unlock()
			// The kernel's buffer takes a line without the client reading;
			// the deadline only guards against a full one.
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte(tooMany))
			c.Close()
			continue
		}
		lc := &limitedConn{Conn: c, l: l, ip: ip, end: time.Now().Add(l.life)}
		l.conns[lc] = struct{}{}
		l.byIP[ip]++
		l.mu.Unlock()
		_ = lc.SetReadDeadline(time.Time{}) // the session's end, until go-smtp sets its own
		return lc, nil
	}
}

// shut closes the listener; later accepts fail.
func (l *limitListener) shut() {
	l.mu.Lock()
	l.down = true
	l.mu.Unlock()
	l.Listener.Close()
}

// cut closes every open connection.
func (l *limitListener) cut() {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// open is the number of open connections.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	ip   string
	end  time.Time // no read waits past it
	once sync.Once
}

// SetReadDeadline keeps every read within the connection's life: go-smtp
// sets a deadline of Config.Timeout before each command, and a client that
// sends one just within it would otherwise never be cut. At the end the
// read times out and go-smtp answers 421 4.4.2 (a mail's text cut short:
// session.unread); writes keep their own deadlines, so that answer goes out.
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() || t.After(c.end) {
		t = c.end
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline's bound for reads, t for writes.
func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		if c.l.byIP[c.ip]--; c.l.byIP[c.ip] <= 0 {
			delete(c.l.byIP, c.ip)
		}
		c.l.mu.Unlock()
	})
	return err
}

// hostOf is the IP of a TCP address, the whole string of any other.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
