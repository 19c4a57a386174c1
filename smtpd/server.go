package smtpd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/connlimit"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Accounts checks the API key a client logs in with, and reads the
// company's e-mail device (account.Service).
type Accounts interface {
	Authenticate(ctx context.Context, token string) (account.Principal, error)
	Company(ctx context.Context, p account.Principal) (store.Company, error)
}

// Devices finds the device a mail is sent through (device.Service).
type Devices interface {
	List(ctx context.Context, companyID uint64) ([]store.Device, error)
	Get(ctx context.Context, companyID uint64, fingerprint string) (store.Device, error)
}

// Sender queues an SMS with every rule of the API's sends, lists the
// company's sender pools for the addresses that name one, and reads the
// company's opt-out list for a recipient at RCPT (sms.Service).
type Sender interface {
	Send(ctx context.Context, in sms.SendInput, answer sms.Answer) (store.Message, *store.Idempotent, error)
	Pools(ctx context.Context, companyID uint64) ([]store.Pool, error)
	// CheckOptOut answers the send's own refusal (RecipientOptedOut) for a
	// number on the list, nil for one that is not.
	CheckOptOut(ctx context.Context, companyID uint64, phone string) error
}

// Limits are the API's rate-limit windows (httpapi.Server), so that sends
// and failed logins count in the same windows whichever way they came.
type Limits interface {
	// CountRequest counts one request of a credential's identity.
	CountRequest(identity string) pacing.Result
	// CredentialsSpent reports whether a client address has no credential try left.
	CredentialsSpent(ip string) (bool, time.Duration)
	// CountCredentialFailure counts a failed credential try of a client address.
	CountCredentialFailure(ip string) pacing.Result
}

// Deps are the services behind the listener.
type Deps struct {
	Accounts Accounts
	Devices  Devices
	SMS      Sender
	Limits   Limits
}

// Server is the SMTP listener.
type Server struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	srv  *smtp.Server
	done chan struct{} // closed when Serve returns

	lives *lives // the open connections

	mu     sync.Mutex          // guards ln and closed
	ln     *connlimit.Listener // set by Serve
	closed bool                // Shutdown was called
}

// maxLineLength bounds a line of a mail's text (and of a command): RFC
// 5321's 1000, doubled as go-smtp does by default.
const maxLineLength = 2000

// New builds the listener; Serve starts it.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("smtpd: %w", err)
	}
	cfg.defaults()
	s := &Server{cfg: cfg, deps: deps, log: cfg.Logger, done: make(chan struct{}), lives: newLives()}
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = cfg.Domain
	srv.TLSConfig = cfg.TLS
	// Without a certificate there is no TLS to wait for: the operator chose
	// a listener on loopback or a trusted network (Config.TLS).
	srv.AllowInsecureAuth = cfg.TLS == nil
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.ReadTimeout = cfg.Timeout
	srv.WriteTimeout = cfg.Timeout
	srv.MaxLineLength = maxLineLength
	srv.ErrorLog = slogPrinter{cfg.Logger}
	s.srv = srv
	return s, nil
}

// Serve takes connections from ln until Shutdown; it returns nil then.
func (s *Server) Serve(ln net.Listener) error {
	defer close(s.done)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ln.Close()
	}
	lim := bound(ln, s.cfg)
	s.ln = lim
	s.mu.Unlock()
	err := s.srv.Serve(lifeListener{lim, s.cfg.MaxSession, s.lives})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Shutdown stops taking connections, ends those between mails (421
// 4.4.2), lets those in the middle of a mail finish it and then ends them,
// and cuts any still open when ctx ends. A Serve called after it returns at
// once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return nil
	}
	_ = ln.Close() // later accepts fail
	s.lives.drain()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		ln.CloseAll()
	}
	<-s.done
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("smtpd: connections still open at the shutdown deadline were cut: %w", err)
	}
	return nil
}

// Open is the number of open connections (for tests and metrics).
func (s *Server) Open() int {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return 0
	}
	return ln.Live()
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	// The connection as accepted: go-smtp starts a new session after
	// STARTTLS, on the TLS connection over it.
	nc := c.Conn()
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	life, _ := nc.(*lifeConn)
	_, ip := connlimit.ClientOf(c.Conn().RemoteAddr())
	return &session{s: s, conn: c, life: life, ip: ip}, nil
}

// slogPrinter is go-smtp's error log on the server's logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(format string, v ...any) {
	p.log.Warn("smtp", "msg", fmt.Sprintf(format, v...))
}
func (p slogPrinter) Println(v ...any) { p.log.Warn("smtp", "msg", fmt.Sprint(v...)) }
