package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/simrelay/simrelay/internal/certfile"
	"github.com/simrelay/simrelay/smtpd"
	"github.com/simrelay/simrelay/web"
)

// smtpInConfig is the e-mail to SMS listener's settings (docs/email.md).
// Its flags are --smtp-listen and its companions; --smtp-url is the other
// direction, the server's own outgoing mail.
type smtpInConfig struct {
	listen, domain    string
	certFile, keyFile string
	maxConns, perIP   int
	tls               *tls.Config // loaded by validate
}

func smtpInFlags(fs *flag.FlagSet, c *smtpInConfig) {
	fs.StringVar(&c.listen, "smtp-listen", "", "e-mail to SMS: take mail to +E164@<--smtp-domain> on this host:port (docs/email.md); empty: off")
	fs.StringVar(&c.domain, "smtp-domain", "", "e-mail to SMS: the domain of the addresses, e.g. sms.example.com (required with --smtp-listen)")
	fs.StringVar(&c.certFile, "smtp-cert", "", "e-mail to SMS: PEM certificate (chain) file for STARTTLS; with it, AUTH is taken only after STARTTLS")
	fs.StringVar(&c.keyFile, "smtp-key", "", "e-mail to SMS: PEM private key file of --smtp-cert")
	fs.IntVar(&c.maxConns, "smtp-max-conns", smtpd.DefaultMaxConns, "e-mail to SMS: connections held at once, in all")
	fs.IntVar(&c.perIP, "smtp-max-conns-per-ip", smtpd.DefaultMaxConnsPerIP, "e-mail to SMS: connections one client address holds at once")
}

// validate checks the listener's settings and loads its certificate; the
// error names the flag.
func (c *smtpInConfig) validate() error {
	if c.listen == "" {
		if c.domain != "" || c.certFile != "" || c.keyFile != "" {
			return fmt.Errorf("%s, %s and %s need %s: without it there is no listener", both("smtp-domain"), both("smtp-cert"), both("smtp-key"), both("smtp-listen"))
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(c.listen); err != nil {
		return fmt.Errorf("%s %q: want host:port, e.g. 0.0.0.0:2525", both("smtp-listen"), c.listen)
	}
	if err := (smtpd.Config{Domain: c.domain}).Validate(); err != nil {
		return fmt.Errorf("%s: %v", both("smtp-domain"), err)
	}
	if c.maxConns < 1 || c.perIP < 1 || c.perIP > c.maxConns {
		return fmt.Errorf("%s %d and %s %d: want at least 1, and per address at most the total", both("smtp-max-conns"), c.maxConns, both("smtp-max-conns-per-ip"), c.perIP)
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return fmt.Errorf("%s and %s go together", both("smtp-cert"), both("smtp-key"))
	}
	if c.certFile != "" {
		// Read again when the files change: a certificate renewed on disk
		// is served from the next STARTTLS, not once it expired and every
		// client that checks it refused the listener until a restart.
		pair, err := certfile.Load(c.certFile, c.keyFile)
		if err != nil {
			return fmt.Errorf("%s / %s: %v", both("smtp-cert"), both("smtp-key"), err)
		}
		c.tls = &tls.Config{GetCertificate: pair.GetCertificate, MinVersion: tls.VersionTLS12}
	}
	return nil
}

// listenSMTP opens the e-mail to SMS listener's socket; nil when it is off.
// It is opened early, with the HTTP one, so that the console can show the
// port really bound.
func listenSMTP(c smtpInConfig) (net.Listener, error) {
	if c.listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return nil, fmt.Errorf("%s %q: cannot listen there: %w", both("smtp-listen"), c.listen, err)
	}
	return ln, nil
}

// consoleEmail is what the console's settings page tells of the listener.
func consoleEmail(c smtpInConfig, ln net.Listener) web.EmailToSMS {
	if ln == nil {
		return web.EmailToSMS{}
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return web.EmailToSMS{Domain: c.domain, Port: port, STARTTLS: c.tls != nil}
}

// startSMTP serves the e-mail to SMS listener on ln; the returned stop
// shuts it down within ctx. With no listener it does nothing.
func startSMTP(c smtpInConfig, ln net.Listener, deps smtpd.Deps, log *slog.Logger) (stop func(ctx context.Context), err error) {
	if ln == nil {
		return func(context.Context) {}, nil
	}
	srv, err := smtpd.New(smtpd.Config{Domain: c.domain, TLS: c.tls, MaxConns: c.maxConns, MaxConnsPerIP: c.perIP, Logger: log}, deps)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil {
			log.Error("smtp listener stopped", "err", err)
		}
	}()
	if c.tls == nil && !loopback(ln.Addr()) {
		log.Warn("the SMTP listener takes API keys without TLS on a non-loopback address; set --smtp-cert and --smtp-key", "addr", ln.Addr().String())
	}
	log.Info("smtp listening", "addr", ln.Addr().String(), "domain", c.domain, "starttls", onOff(c.tls != nil))
	return func(ctx context.Context) {
		if err := srv.Shutdown(ctx); err != nil {
			log.Warn("smtp shutdown", "err", err)
		}
		<-done
	}, nil
}

// loopback reports whether a listener's address is a loopback address.
func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
