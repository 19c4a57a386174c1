// Package mailtest is a real SMTP server for tests: mail sent to it over the
// network is parsed and kept in memory, so a test can wait for a message and
// follow the link in it the way a user would.
//
// It listens on 127.0.0.1 only and stops when the test ends. With options it
// offers STARTTLS or implicit TLS with a self-signed certificate, and can
// require a user name and password.
package mailtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// shutdownTimeout bounds the wait for the server's connection goroutines at
// the end of a test; they stop as soon as their sockets close, so hitting it
// means a bug.
const shutdownTimeout = 10 * time.Second

// Option configures NewInbox.
type Option func(*options)

type options struct {
	startTLS, implicitTLS bool
	user, pass            string
	insecureAuth          bool
}

// WithSTARTTLS makes the inbox offer STARTTLS with a self-signed certificate
// for 127.0.0.1; clients must trust ClientTLSConfig.
func WithSTARTTLS() Option { return func(o *options) { o.startTLS = true } }

// WithImplicitTLS makes the inbox speak TLS from the first byte (smtps) with
// a self-signed certificate for 127.0.0.1; clients must trust ClientTLSConfig.
func WithImplicitTLS() Option { return func(o *options) { o.implicitTLS = true } }

// WithAuth requires AUTH PLAIN with these credentials before MAIL FROM. Like a
// real relay, the inbox offers AUTH only over TLS, so combine it with
// WithSTARTTLS or WithImplicitTLS. URL includes the credentials.
func WithAuth(user, pass string) Option {
	return func(o *options) { o.user, o.pass = user, pass }
}

// WithInsecureAuth offers AUTH on connections without TLS too, like a
// misconfigured relay: for testing that a client keeps its password to itself.
func WithInsecureAuth() Option { return func(o *options) { o.insecureAuth = true } }

// Inbox is a running SMTP server and the mail it received.
type Inbox struct {
	t         testing.TB
	opts      options
	url       string
	clientTLS *tls.Config
	srv       *smtp.Server
	ln        *trackingListener
	serveDone chan struct{}

	mu       sync.Mutex // guards the fields below
	msgs     []Received
	rejected []string      // why unparsable messages were refused
	failNext int           // deliveries still to refuse, see FailNext
	changed  chan struct{} // closed and replaced whenever msgs or rejected grow
	closing  bool          // stop logging to t: the test is ending
}

// NewInbox starts an SMTP server on 127.0.0.1 and stops it in t.Cleanup.
func NewInbox(t testing.TB, opts ...Option) *Inbox {
	t.Helper()
	in := &Inbox{t: t, changed: make(chan struct{}), serveDone: make(chan struct{})}
	for _, o := range opts {
		o(&in.opts)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mailtest: listen: %v", err)
	}
	in.ln = &trackingListener{Listener: raw, conns: make(map[net.Conn]struct{})}

	in.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &session{in: in}, nil
	}))
	in.srv.Domain = "mailtest.localhost"
	in.srv.ReadTimeout = 30 * time.Second
	in.srv.WriteTimeout = 30 * time.Second
	in.srv.MaxMessageBytes = 10 << 20
	in.srv.MaxRecipients = 100
	in.srv.ErrorLog = testLogger{in}
	in.srv.AllowInsecureAuth = in.opts.insecureAuth

	var ln net.Listener = in.ln
	scheme := "smtp"
	if in.opts.startTLS || in.opts.implicitTLS {
		serverTLS, clientTLS, err := SelfSigned()
		if err != nil {
			raw.Close()
			t.Fatalf("mailtest: certificate: %v", err)
		}
		in.srv.TLSConfig, in.clientTLS = serverTLS, clientTLS
		if in.opts.implicitTLS {
			ln, scheme = tls.NewListener(in.ln, serverTLS), "smtps"
		}
	}
	u := url.URL{Scheme: scheme, Host: raw.Addr().String()}
	if in.opts.user != "" {
		u.User = url.UserPassword(in.opts.user, in.opts.pass)
	}
	in.url = u.String()

	go func() {
		defer close(in.serveDone)
		_ = in.srv.Serve(ln) // ends when the listener closes
	}()
	t.Cleanup(in.close)
	return in
}

// URL is the server's address as an --smtp-url, e.g. smtp://127.0.0.1:PORT,
// with credentials when WithAuth was given.
func (in *Inbox) URL() string { return in.url }

// ClientTLSConfig trusts the inbox's self-signed certificate; nil without
// WithSTARTTLS or WithImplicitTLS. Each call returns a fresh copy.
func (in *Inbox) ClientTLSConfig() *tls.Config {
	if in.clientTLS == nil {
		return nil
	}
	return in.clientTLS.Clone()
}

// Messages returns the mail received so far, oldest first. The slice is a
// copy; treat the Received values in it as read-only.
func (in *Inbox) Messages() []Received {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Received(nil), in.msgs...)
}

// FailNext makes the next n deliveries fail at DATA with "451 4.3.0", a
// temporary error a sender should retry; n replaces any earlier count.
func (in *Inbox) FailNext(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failNext = n
}

// WaitFor returns the first (oldest) message whose envelope recipients
// include to (compared without regard to case), waiting up to timeout for it
// to arrive. On timeout it fails t, saying what the inbox did receive. Call
// it from the test's goroutine, as t.Fatal requires.
func (in *Inbox) WaitFor(t testing.TB, to string, timeout time.Duration) Received {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		in.mu.Lock()
		for _, m := range in.msgs {
			if m.sentTo(to) {
				in.mu.Unlock()
				return m
			}
		}
		changed := in.changed
		in.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("mailtest: no mail to %s within %s; %s", to, timeout, in.summary())
			return Received{}
		}
	}
}

// summary says what the inbox holds, for failure messages.
func (in *Inbox) summary() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var rcpts []string
	for _, m := range in.msgs {
		rcpts = append(rcpts, strings.Join(m.To, ","))
	}
	s := fmt.Sprintf("the inbox holds %d mail(s), to %v", len(in.msgs), rcpts)
	if len(in.rejected) > 0 {
		s += fmt.Sprintf("; refused as unparsable: %q", in.rejected)
	}
	return s
}

func (in *Inbox) add(m Received) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.msgs = append(in.msgs, m)
	close(in.changed)
	in.changed = make(chan struct{})
}

func (in *Inbox) reject(why string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rejected = append(in.rejected, why)
	close(in.changed)
	in.changed = make(chan struct{})
}

// takeFailure consumes one FailNext count, if any is left.
func (in *Inbox) takeFailure() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.failNext <= 0 {
		return false
	}
	in.failNext--
	return true
}

// close stops the server and waits for every goroutine it started: first the
// sockets close (no new ones are accepted), then the connection goroutines
// and the accept loop return.
func (in *Inbox) close() {
	in.mu.Lock()
	in.closing = true
	in.mu.Unlock()
	in.ln.shut()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := in.srv.Shutdown(ctx); err != nil && !errors.Is(err, net.ErrClosed) {
		in.t.Errorf("mailtest: shut down: %v", err)
	}
	<-in.serveDone
}

// session is one SMTP connection's transaction state; go-smtp calls its
// methods from that connection's goroutine only.
type session struct {
	in       *Inbox
	authed   bool
	mailFrom string
	rcpts    []string
}

func (s *session) AuthMechanisms() []string {
	if s.in.opts.user == "" {
		return nil // not advertised
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || s.in.opts.user == "" {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.in.opts.user || pass != s.in.opts.pass {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.in.opts.user != "" && !s.authed {
		return smtp.ErrAuthRequired
	}
	s.mailFrom, s.rcpts = from, nil
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r) // go-smtp wants r consumed before Data returns
	if err != nil {
		return err
	}
	if s.in.takeFailure() {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0},
			Message: "mailtest: failing this delivery on purpose (FailNext)"}
	}
	m, err := parse(raw)
	if err != nil {
		s.in.reject(err.Error())
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0},
			Message: "mailtest: cannot parse the message: " + err.Error()}
	}
	m.MailFrom = s.mailFrom
	m.To = append([]string(nil), s.rcpts...)
	s.in.add(m)
	return nil
}

func (s *session) Reset() { s.mailFrom, s.rcpts = "", nil }

func (s *session) Logout() error { return nil }

// testLogger routes go-smtp's error log to the test's log until the test
// starts ending; after that, closed-socket errors are expected noise.
type testLogger struct{ in *Inbox }

func (l testLogger) Printf(format string, v ...any) { l.log(fmt.Sprintf(format, v...)) }
func (l testLogger) Println(v ...any)               { l.log(fmt.Sprint(v...)) }

func (l testLogger) log(s string) {
	l.in.mu.Lock()
	defer l.in.mu.Unlock()
	if !l.in.closing {
		l.in.t.Logf("mailtest: %s", s)
	}
}

// trackingListener remembers the sockets it accepted so close can cut them:
// go-smtp's Shutdown waits for connection goroutines but does not close
// idle connections, and its Close does not wait.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex // guards conns and down
	conns map[net.Conn]struct{}
	down  bool
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// shut closes the listener and every accepted socket; later accepts fail.
func (l *trackingListener) shut() {
	l.mu.Lock()
	l.down = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	l.Listener.Close()
	for _, c := range conns {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l *trackingListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
