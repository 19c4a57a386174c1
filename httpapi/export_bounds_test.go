package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/store"
)

// TestCompanyExportsAtOnceAreBounded: exports whose clients never read hold
// their stream (a buffer and a page of messages) until a deadline ends it, so
// one company may run only a few at once: the next answers 429 rate_limited
// with Retry-After, another company's export still runs, and a slot comes
// back when a stalled client goes away.
func TestCompanyExportsAtOnceAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	e.pairPhone(a.apiKey, "acme-phone")
	// Megabytes of history, far more than the sockets' buffers hold, so a
	// client that does not read keeps its export's handler in a write.
	now := e.clock.Now()
	text := strings.Repeat("x", 1500)
	var msgs []store.Message
	for i := range 3000 {
		msgs = append(msgs, store.Message{UUID: fmt.Sprintf("acme-%06d", i), CompanyID: uint64(a.id), Device: "acme-phone", Direction: store.Outbound,
			Channel: "sms", Phone: fmt.Sprintf("+1555010%04d", i%50), Text: text, SIMSlot: "SIM1",
			Status: store.MsgDelivered, Segments: 10, CreatedAt: now, UpdatedAt: now})
	}
	if err := e.store.ImportMessages(msgs); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(e.url, "http://")
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	// Open stalled exports until one is refused; a bound of a few is the
	// point, so more than 20 is a failure.
	refused := false
	for i := 0; i < 20 && !refused; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "GET /company/export HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, a.apiKey)
		status, err := bufio.NewReaderSize(c, 16).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(status, "HTTP/1.1 200"):
			stalled = append(stalled, c) // read no further
		case strings.HasPrefix(status, "HTTP/1.1 429"):
			refused = true
			c.Close()
		default:
			t.Fatalf("export %d: got %q", i, status)
		}
	}
	if !refused {
		t.Fatalf("%d exports that never read ran at once; want a few, then 429", len(stalled))
	}
	r := e.do(call{method: "GET", path: "/company/export", token: a.apiKey})
	e.want(r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	// The refusal is an error body, not the document: named as the
	// download (Content-Disposition), a browser or `curl -OJ` saved it as
	// the export's file, and only what was in it told it was none.
	if cd := r.Header.Get("Content-Disposition"); cd != "" {
		t.Errorf("429 with Content-Disposition %q, want none", cd)
	}
	// Another company's export runs.
	e.want(e.do(call{method: "GET", path: "/company/export", token: b.apiKey}), http.StatusOK, "")
	// A stalled client that goes away gives its slot back.
	stalled[0].Close()
	stalled = stalled[1:]
	e.eventually("an export slot after a stalled client left", func() bool {
		return e.do(call{method: "GET", path: "/company/export", token: a.apiKey}).Status == http.StatusOK
	})
}
