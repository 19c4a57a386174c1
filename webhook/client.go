package webhook

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/simrelay/simrelay/internal/egress"
)

// NewClient returns the HTTP client deliveries go through: no proxy (a proxy
// would dial for us, past the address check), non-public addresses refused
// at connect time unless cfg.AllowPrivate, TLS verified (against cfg.RootCAs
// when set), redirects not followed, and each request bounded by cfg.Timeout.
func NewClient(cfg Config) *http.Client {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = egress.Control
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    cfg.Workers,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxResponseBytes,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		// A redirect is an answer, not an instruction: following it would let a
		// receiver point us anywhere, and the contract counts it as a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
