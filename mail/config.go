package mail

import (
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/simrelay/simrelay/internal/redact"
	"github.com/simrelay/simrelay/store"
)

// DefaultFrom is the From address when none is configured. A "localhost"
// domain will not pass anyone's SPF check, which is the point: an operator who
// turns SMTP on is nudged to set --smtp-from to a domain they own.
const DefaultFrom = "simrelay <no-reply@localhost>"

// DefaultSendTimeout bounds one SMTP attempt (dial, TLS, AUTH, DATA). Thirty
// seconds is generous for a relay on the same continent and still short
// enough that a dead relay does not hold the worker for long.
const DefaultSendTimeout = 30 * time.Second

// DefaultSchedule returns the waits between delivery attempts: the first retry
// comes quickly (greylisting answers 4xx for a few minutes), later ones
// spread out to ride out a relay outage of about ten hours. A failure after
// the last wait marks the mail failed.
func DefaultSchedule() []time.Duration {
	return []time.Duration{
		30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
		time.Hour, 3 * time.Hour, 6 * time.Hour,
	}
}

// redactedPassword replaces the password wherever it is shown: the mask
// redact.URL puts in a URL.
const redactedPassword = redact.Mask

// Config says where mail goes. The zero value is valid: no SMTP server, mail
// is written to the log and kept in the outbox.
type Config struct {
	// SMTPURL is smtp://[user:pass@]host:port[?tls=MODE] (STARTTLS) or
	// smtps://[user:pass@]host:port (implicit TLS). Empty: no SMTP. User and
	// password are URL-escaped (e.g. "@" in a user name is %40). MODE says
	// what an smtp:// attempt does when the server offers no STARTTLS:
	// "required" (the default) fails it; "opportunistic" sends the mail
	// without TLS but no credentials (refused with a user name);
	// "insecure" sends the mail and the credentials without TLS. A URL
	// without user name whose host is a loopback address or "localhost"
	// defaults to "opportunistic": a local relay, its traffic never on a
	// network.
	SMTPURL string
	// From is the From header, e.g. "Acme SMS <sms@acme.example>";
	// DefaultFrom when empty.
	From string
	// PublicURL is the server's base URL as users reach it. The templates take
	// it explicitly; it sits here so that one Config describes the mail setup
	// and Validate checks the link base together with the rest.
	PublicURL string
	// Poll, when set, is the longest the worker sleeps between looks at the
	// outbox. On one node 0: every mail is appended by this process, whose
	// Send wakes the worker. On a cluster (DefaultClusterPoll) a mail whose
	// node died mid-attempt is claimed by another node within its lease and
	// one Poll.
	Poll time.Duration
	// MaxCompanyPending and MaxCompanyPendingBytes bound one company's
	// pending mails (Message.CompanyID, its e-mail webhook entries'); the
	// defaults when 0, no bound when negative. The server's own account
	// mails are outside them.
	MaxCompanyPending      int
	MaxCompanyPendingBytes int64
}

// Defaults of a company's pending mails, and why. An e-mail webhook
// delivery is done once its mail is in the outbox, so while the SMTP relay
// is down a company's e-mail entries (up to 20, each event one mail) would
// otherwise move its webhook outbox's bound-free flow into this outbox.
// 1,000 mails pending is a company's e-mail entries riding out the
// schedule's ten hours at about a hundred mails an hour; beyond it the
// webhook delivery fails and is retried on the webhook schedule (about two
// days), so nothing is lost to a short outage and the webhook outbox's own
// bound holds the rest. 16 MiB is 1,000 mails of 16 KiB, several times an
// ordinary one, and about 400 of the largest (10,000 characters of up to 4
// bytes each).
const (
	DefaultMaxCompanyPending      = 1000
	DefaultMaxCompanyPendingBytes = 16 << 20
)

// companyLimits is the store's form of the company bound.
func (c Config) companyLimits() store.MailLimits {
	lim := store.MailLimits{MaxPending: c.MaxCompanyPending, MaxBytes: c.MaxCompanyPendingBytes}
	switch {
	case lim.MaxPending == 0:
		lim.MaxPending = DefaultMaxCompanyPending
	case lim.MaxPending < 0:
		lim.MaxPending = 0 // the store's "no bound"
	}
	switch {
	case lim.MaxBytes == 0:
		lim.MaxBytes = DefaultMaxCompanyPendingBytes
	case lim.MaxBytes < 0:
		lim.MaxBytes = 0
	}
	return lim
}

// DefaultClusterPoll is Poll on a cluster. A mail is sent by the node that
// appended it, woken at once; the poll only finds mails a dead node left,
// whose lease (a minute) bounds the takeover anyway, so a few seconds more
// cost nothing and spare the outbox's read.
const DefaultClusterPoll = 5 * time.Second

// Validate checks the configuration; errors name the flag at fault and never
// show the SMTP password.
func (c Config) Validate() error {
	if _, err := parseSMTPURL(c.SMTPURL); err != nil {
		return err
	}
	if c.Poll < 0 {
		return fmt.Errorf("mail poll %s: must be positive", c.Poll)
	}
	from := c.from()
	if a, err := netmail.ParseAddress(from); err != nil || !strings.Contains(a.Address, "@") {
		return fmt.Errorf("--smtp-from %q: want an address such as %q", from, "Acme SMS <sms@acme.example>")
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--public-url %q: want an absolute http(s) URL such as https://sms.example.com", c.PublicURL)
		}
	}
	return nil
}

// Redacted returns the SMTP URL with its password masked, "" when SMTP is off.
func (c Config) Redacted() string {
	return redact.URL(c.SMTPURL)
}

// String describes the configuration for logs and errors, password masked.
func (c Config) String() string {
	smtp := c.Redacted()
	if smtp == "" {
		smtp = "off (mail is written to the log)"
	}
	return fmt.Sprintf("smtp=%s from=%q public_url=%s", smtp, c.from(), c.PublicURL)
}

// LogValue keeps the password out of structured logs that log a Config whole.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("smtp_url", c.Redacted()),
		slog.String("from", c.from()),
		slog.String("public_url", c.PublicURL),
	)
}

func (c Config) from() string {
	if c.From == "" {
		return DefaultFrom
	}
	return c.From
}

// TLS modes of an smtp:// URL (its tls parameter): what an attempt does
// when the server offers no STARTTLS.
const (
	// TLSRequired fails the attempt: nothing is sent without TLS.
	TLSRequired = "required"
	// TLSOpportunistic sends the mail without TLS; a URL with a user name
	// cannot have it, as the credentials would go without TLS too.
	TLSOpportunistic = "opportunistic"
	// TLSInsecure sends the mail and the credentials without TLS: the
	// operator's explicit choice, for a relay on a network they trust.
	TLSInsecure = "insecure"
)

// smtpTarget is a parsed, valid SMTP URL.
type smtpTarget struct {
	host        string
	port        int
	user        string
	pass        string
	implicitTLS bool
	// tls is the mode of an smtp:// URL (TLSRequired, TLSOpportunistic or
	// TLSInsecure), its default filled in; TLSRequired for smtps://.
	tls string
}

// isLoopback reports whether host names this machine: "localhost" or a
// loopback address. Mail to it never crosses a network.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseSMTPURL turns --smtp-url into a target; nil, nil when raw is empty.
// Errors quote the URL only in redacted form: url.Parse's own errors repeat
// the input, password included, so they are never wrapped.
func parseSMTPURL(raw string) (*smtpTarget, error) {
	if raw == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("--smtp-url %q: %s; want smtp://[user:pass@]host:port[?tls=required|opportunistic|insecure] (STARTTLS) or smtps://[user:pass@]host:port (implicit TLS)", redact.URL(raw), why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad("not a URL")
	}
	t := &smtpTarget{}
	switch u.Scheme {
	case "smtp":
	case "smtps":
		t.implicitTLS = true
	case "":
		return nil, bad("no scheme")
	default:
		return nil, bad(fmt.Sprintf("unknown scheme %q", u.Scheme))
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, bad("no host")
	}
	if (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return nil, bad("a path or fragment has no meaning here")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad("a query that does not parse")
	}
	for k, v := range q {
		if k != "tls" {
			return nil, bad(fmt.Sprintf("unknown parameter %q (tls is the only one)", k))
		}
		if len(v) != 1 {
			return nil, bad("tls given more than once")
		}
	}
	host, portStr, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return nil, bad("want host:port")
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return nil, bad("port must be 1 to 65535")
	}
	t.host, t.port = host, port
	if u.User != nil {
		t.user = u.User.Username()
		t.pass, _ = u.User.Password()
		if t.user == "" {
			return nil, bad("a password needs a user name")
		}
	}
	mode := q.Get("tls")
	switch {
	case t.implicitTLS:
		if mode != "" && mode != TLSRequired {
			return nil, bad(fmt.Sprintf("tls=%s: smtps is TLS from the first byte", mode))
		}
		mode = TLSRequired
	case mode == "" && t.user == "" && isLoopback(host):
		mode = TLSOpportunistic
	case mode == "":
		mode = TLSRequired
	case mode == TLSOpportunistic && t.user != "":
		return nil, bad("tls=opportunistic with a user name: the password would go without TLS to a server that offers no STARTTLS; tls=insecure allows that, tls=required (the default) refuses it")
	case mode != TLSRequired && mode != TLSOpportunistic && mode != TLSInsecure:
		return nil, bad(fmt.Sprintf("tls=%q: want required, opportunistic or insecure", mode))
	}
	t.tls = mode
	return t, nil
}
