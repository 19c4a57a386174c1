package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
)

// TestBulkSendsAtOncePerCompany: a bulk send holds several megabytes while
// it is read, checked and stored, so one company's bulk sends run
// httpapi.BulksPerCompany at once; another waits for a place, and past the
// wait answers 429 rate_limited with Retry-After, while another company's
// bulk sends still run, and a place comes back when a bulk send ends, its
// client gone included.
func TestBulkSendsAtOncePerCompany(t *testing.T) {
	t.Parallel()
	// The wait is long next to a bulk send of one message, so that a
	// stalled upload below that finds a place held by one of the test's
	// own bulk sends gets it when that ends, rather than a 429 (under load
	// on PostgreSQL such a bulk send took over 50 ms, and with a wait of
	// 50 ms the uploads were refused and replaced over and over).
	e := newEnv(t, roomy, func(c *httpapi.Config) { c.BulkWait = time.Second })
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	e.pairPhone(a.apiKey, "acme-phone")
	e.pairPhone(b.apiKey, "beta-phone")
	bulk := func(key, device string) resp {
		return e.do(call{method: "POST", path: "/chat/send-bulk", token: key, body: map[string]any{
			"device_fingerprint": device, "messages": []map[string]any{{"phone": "+15550100001", "message": "hi"}}}})
	}
	e.want(bulk(a.apiKey, "acme-phone"), http.StatusOK, "")
	// Uploads that send their headers and stop: each holds a place of its
	// company while its body is awaited.
	addr := strings.TrimPrefix(e.url, "http://")
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	stall := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /chat/send-bulk HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr, a.apiKey)
		return c
	}
	for range httpapi.BulksPerCompany {
		stalled = append(stalled, stall())
	}
	// A stalled upload that came to its place while a bulk send below held
	// it waits BulkWait, and under a heavy load may still be answered 429
	// before the place is free: the bulk sends then find it free. Such an
	// upload is replaced, so that both places end up held.
	var refused resp
	e.eventually("a bulk send refused while the company's places are held", func() bool {
		refused = bulk(a.apiKey, "acme-phone")
		if refused.Status == http.StatusOK {
			for i, c := range stalled {
				c.SetReadDeadline(time.Now().Add(time.Millisecond))
				if n, _ := c.Read(make([]byte, 1)); n > 0 {
					c.Close()
					stalled[i] = stall()
				}
			}
		}
		return refused.Status == http.StatusTooManyRequests
	})
	e.want(refused, http.StatusTooManyRequests, "rate_limited")
	if refused.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// Another company's bulk sends run.
	e.want(bulk(b.apiKey, "beta-phone"), http.StatusOK, "")
	// A client that goes away gives its place back.
	stalled[0].Close()
	stalled = stalled[1:]
	e.eventually("a bulk send once a stalled upload left", func() bool {
		return bulk(a.apiKey, "acme-phone").Status == http.StatusOK
	})
}
