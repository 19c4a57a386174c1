// Package webhooktest is a webhook receiver for tests: a real HTTP(S)
// server on loopback that records every delivery and answers as told.
package webhooktest

import (
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Request is one request the receiver got.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
}

// Receiver records what it gets and answers what respond says for the n-th
// request (from 1); 204 when respond is nil.
type Receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []Request
	respond func(n int, r *http.Request, w http.ResponseWriter) int
}

// NewReceiver starts a receiver, over TLS when tls is set (trust it with
// Pool); it is closed when the test ends.
func NewReceiver(t testing.TB, tls bool, respond func(n int, r *http.Request, w http.ResponseWriter) int) *Receiver {
	t.Helper()
	rc := &Receiver{respond: respond}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		n := len(rc.got)
		rc.mu.Unlock()
		status := http.StatusNoContent
		if rc.respond != nil {
			status = rc.respond(n, r, w)
		}
		w.WriteHeader(status)
	}))
	rc.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point of some tests
	if tls {
		rc.StartTLS()
	} else {
		rc.Start()
	}
	t.Cleanup(rc.Close)
	return rc
}

// Requests returns what the receiver got so far, in order.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.got...)
}

// Pool trusts the receiver's TLS certificate.
func (rc *Receiver) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(rc.Certificate())
	return p
}
