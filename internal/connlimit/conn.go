package connlimit

import (
	"errors"
	"net"
	"syscall"
)

// conn is a connection the Listener counts or tracks. It gives its places
// back once, on its first Close or Uncount (the HTTP server may close a
// connection more than once).
type conn struct {
	net.Conn
	l       *Listener
	key     string // its client address's key; "" when not counted per address
	counted bool   // it holds its places in the bounds; guarded by l.mu
	settled bool   // Recount or Close was called: Uncount gives nothing back; guarded by l.mu
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.release(c, true)
	return err
}

// Uncount gives the connection's places back while it stays open (a tracked
// one stays tracked, so that CloseAll still cuts it): the phone hub calls it
// once a link's device token is checked and the link registered. Such a link
// is the device's one link (a newer one replaces it), so what a company's
// links hold is bounded by its devices, not by this bound; without it, more
// phones than the bound behind one NAT address could not all connect.
// Anonymous and unregistered connections stay counted. After Recount or
// Close it does nothing.
func (c *conn) Uncount() { c.l.release(c, false) }

// Recount takes the connection's places back, over the bounds if need be
// (the connection is open already): the phone hub calls it when a link
// stops being its device's one link (replaced by a newer one, or closed by
// the server), since the close handshake that follows can keep the
// connection open for up to 10 s. Without it, a client opening link after
// link, each replacing the last and none answering its close, held
// connections from one address far past the bound. Connections from the
// address are refused until its count falls below the bound again. It is
// final: a later Uncount gives nothing back, and Close gives the places
// back once.
func (c *conn) Recount() {
	l := c.l
	l.mu.Lock()
	if !c.counted && !c.settled {
		c.counted = true
		if c.key != "" {
			l.open[c.key]++
		}
		if l.cfg.Total > 0 {
			l.held++
		}
	}
	c.settled = true
	l.mu.Unlock()
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
