package smtpd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/simrelay/simrelay/sms"
)

// Defaults, and why.
const (
	// DefaultMaxMessageBytes is the SIZE the listener announces: an SMS is at
	// most 1600 characters, and even as HTML with a quoted thread and a
	// signature a mail carrying one fits in far less; attachments have no
	// place in an SMS, so they need not fit.
	DefaultMaxMessageBytes = 256 << 10
	// DefaultMaxRecipients bounds the SMS one mail makes (RCPTMAX): each is
	// a send, and each recipient is counted in the rate limit at RCPT.
	DefaultMaxRecipients = 10
	// DefaultMaxConns bounds the listener's open connections, in all: each
	// holds a goroutine and up to about 1.5 times MaxMessageBytes while its
	// DATA is read (the read buffer grows ahead of the text).
	DefaultMaxConns = 100
	// DefaultMaxConnsPerIP bounds one client address's connections (an IPv6
	// client is its /64), so that one client cannot take them all.
	DefaultMaxConnsPerIP = 10
	// DefaultTimeout bounds each read and write of a connection: RFC 5321
	// asks servers for minutes; a client silent this long is cut.
	DefaultTimeout = time.Minute
	// DefaultMaxSession bounds a connection's whole life: Timeout alone
	// lets a client that sends a command (a NOOP) just within it keep its
	// place among MaxConns for ever. Half an hour is many mails' worth for
	// a mail server on one connection; cut, it gets 421 and connects again.
	DefaultMaxSession = 30 * time.Minute
)

// Config tunes the listener; zero fields take their defaults.
type Config struct {
	// Domain is the part after @ of the addresses the listener takes, and
	// the name it greets with.
	Domain string
	// TLS, when set, is offered as STARTTLS, and AUTH is then accepted only
	// after it. Without it, AUTH (the API key) travels in the clear: only
	// for a listener on loopback or a trusted network.
	TLS *tls.Config
	// MaxMessageBytes is the largest mail taken (SIZE).
	MaxMessageBytes int64
	// MaxRecipients is the most recipients of one mail.
	MaxRecipients int
	// MaxConns and MaxConnsPerIP bound open connections in all and per client address.
	MaxConns      int
	MaxConnsPerIP int
	// Timeout bounds each read and write.
	Timeout time.Duration
	// MaxSession bounds a connection's life: no read waits past it, and
	// the client is then answered 421 4.4.2 and the connection closed.
	MaxSession time.Duration
	// Logger logs refusals and faults; nil discards.
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxRecipients <= 0 {
		c.MaxRecipients = DefaultMaxRecipients
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerIP <= 0 {
		c.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxSession <= 0 {
		c.MaxSession = DefaultMaxSession
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	d := c.Domain
	if d == "" {
		return errors.New("the mail domain is required, e.g. sms.example.com")
	}
	if strings.ContainsAny(d, "@ \t/") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") {
		return fmt.Errorf("%q is not a domain name such as sms.example.com", d)
	}
	if c.MaxMessageBytes > 0 && c.MaxMessageBytes < sms.MaxMessageChars {
		return fmt.Errorf("the message size limit %d is below one SMS of %d characters", c.MaxMessageBytes, sms.MaxMessageChars)
	}
	return nil
}
