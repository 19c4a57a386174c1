package smtpd

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/simrelay/simrelay/internal/connlimit"
)

// tooMany is the reply to a connection over a limit, written before it is closed.
const tooMany = "421 4.7.0 Too many connections; try again later\r\n"

// bound bounds ln's open connections, in all and per client address, and
// remembers them so that Shutdown can cut those still open at its deadline
// (go-smtp's Shutdown waits for idle connections, its Close does not wait).
func bound(ln net.Listener, cfg Config) *connlimit.Listener {
	return connlimit.New(ln, connlimit.Config{
		PerClient: cfg.MaxConnsPerIP,
		Total:     cfg.MaxConns,
		Refuse:    func(c net.Conn) { _, _ = io.WriteString(c, tooMany) },
		Track:     true,
	})
}

// lifeListener gives each connection its longest life (Config.MaxSession),
// and keeps the open ones in lives, for Shutdown.
type lifeListener struct {
	*connlimit.Listener
	life  time.Duration
	lives *lives
}

func (l lifeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	end := time.Now().Add(l.life)
	lc := &lifeConn{Conn: c, lives: l.lives, life: end, end: end}
	_ = lc.SetReadDeadline(time.Time{}) // the session's end, until go-smtp sets its own
	l.lives.add(lc)
	return lc, nil
}

// lives are a listener's open connections, so that Shutdown can end them:
// go-smtp's Shutdown waits for each to end by itself, and a client idle
// between mails held it until its deadline.
type lives struct {
	mu       sync.Mutex
	conns    map[*lifeConn]struct{}
	draining bool // Shutdown began: every connection is draining
}

func newLives() *lives { return &lives{conns: map[*lifeConn]struct{}{}} }

func (l *lives) add(c *lifeConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining {
		c.drain()
	}
	l.conns[c] = struct{}{}
}

func (l *lives) remove(c *lifeConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

// drain ends each connection between mails, or before a mail's text, at
// once, and each in a mail's text once that mail's reply is written.
func (l *lives) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.draining = true
	for c := range l.conns {
		c.drain()
	}
}

type lifeConn struct {
	net.Conn
	lives    *lives
	mu       sync.Mutex  // guards end, and the read deadline set from it
	life     time.Time   // the connection's longest life: its start and Config.MaxSession
	end      time.Time   // no read waits past it: life, or earlier once ended (endLocked)
	ended    atomic.Bool // a read failed or met the end of the client's data
	inText   atomic.Bool // a chunked (BDAT) mail's text is being read: session.Data runs
	answered atomic.Bool // a read timed out in a chunked mail's text and answered errTextStalled
	closing  atomic.Bool // the write of that answer closes the connection
	inMail   atomic.Bool // a mail's text is read or sent: from its DATA (or first BDAT) until its reply is written (mailDone)
	draining atomic.Bool // Shutdown began: the connection ends when no mail is open
}

// drain ends the connection's life now when no mail's text is under way
// (between mails, or after MAIL or RCPT: nothing of that mail is queued),
// else when that mail's reply is written (mailDone). drain, mailOpen and
// mailDone each set their flag and check the other under mu, so that one
// of them ends the life, and a mail opened gets it back.
func (c *lifeConn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining.Store(true)
	if !c.inMail.Load() {
		c.endLocked()
	}
}

// mailOpen notes a mail's text begun (DATA, or its first BDAT chunk). On a
// draining connection it gives the text back the connection's life, which
// a drain that found no mail open had ended: go-smtp answers DATA with 354
// before it hands the text to the session, so a shutdown between the two
// cut a text the client was told to send (421), where a mail in its text
// finishes. The session's own deadline for the text follows (Data).
func (c *lifeConn) mailOpen() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inMail.Store(true)
	if c.draining.Load() && c.end.Before(c.life) {
		c.end = c.life
		_ = c.Conn.SetReadDeadline(c.end)
	}
}

// mailDone notes that no mail is open (go-smtp's reset, after a mail's
// reply, RSET or a new greeting); a draining connection ends then.
func (c *lifeConn) mailDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inMail.Store(false)
	if c.draining.Load() {
		c.endLocked()
	}
}

// endLocked ends the connection's life now, with mu held: the read
// waiting, or the next, times out, and go-smtp answers 421 4.4.2 and
// closes the connection, as at the end of MaxSession.
func (c *lifeConn) endLocked() {
	c.end = time.Now()
	_ = c.Conn.SetReadDeadline(c.end)
}

// errTextStalled is what a read of a chunked mail's text that timed out
// returns: go-smtp answers a chunk's read error itself, with an
// *smtp.SMTPError as it is and anything else as 554 5.0.0 with the error's
// text (for a timeout, the socket's addresses): a permanent failure that a
// mail server bounces, where the client's retry would have sent the mail.
var errTextStalled = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: unreadText}

// Read notes a read that ends the connection's data: go-smtp reads a BDAT
// chunk with io.Copy, which takes the end of the data for the chunk's end,
// so a chunk cut short looks whole to the session (readsEnded). A read of a
// chunked mail's text that times out is errTextStalled, so that the mail
// is refused as one whose text stopped after DATA is (session.unread).
func (c *lifeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.ended.Store(true)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && c.inText.Load() {
			c.answered.Store(true)
			return n, errTextStalled
		}
	}
	return n, err
}

// Write closes the connection after the first write that follows
// errTextStalled: go-smtp's reply with it, 421. Left open, go-smtp read on
// (under TLS the stalled read's error stays, and it answered that as a
// second reply, 421 4.4.0), or the rest of the chunk arrived as commands.
func (c *lifeConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.answered.Load() && c.closing.CompareAndSwap(false, true) {
		_ = c.Conn.Close()
	}
	return n, err
}

// SetReadDeadline keeps every read within the connection's life: go-smtp
// sets a deadline of Config.Timeout before each command, and a client that
// sends one just within it would otherwise never be cut. At the end the
// read times out and go-smtp answers 421 4.4.2 (a mail's text cut short:
// session.unread); writes keep their own deadlines, so that answer goes out.
func (c *lifeConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.IsZero() || t.After(c.end) {
		t = c.end
	}
	return c.Conn.SetReadDeadline(t)
}

// Close forgets the connection in lives and closes it.
func (c *lifeConn) Close() error {
	c.lives.remove(c)
	return c.Conn.Close()
}

// SetDeadline is SetReadDeadline's bound for reads, t for writes.
func (c *lifeConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}
