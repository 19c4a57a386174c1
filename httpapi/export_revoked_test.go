package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// An export is read page by page for as long as its client takes, and the
// credential that asked for it is checked again before each page: once the
// API key is rotated (or the user removed, demoted or signed out
// everywhere) the document is cut there, as every other request of that
// credential is refused at once. It streamed on to its end, messages
// stored after the rotation included, for as long as its client kept
// reading.
func TestCompanyExportEndsWithItsCredential(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	// Tens of megabytes of history, far more than the sockets' buffers
	// hold, so the export is still reading its pages when the key is
	// rotated (the client reads only up to the first message until then).
	now := e.clock.Now()
	text := strings.Repeat("x", 8000)
	const total = 3000
	var msgs []store.Message
	for i := range total {
		msgs = append(msgs, store.Message{UUID: fmt.Sprintf("acme-%06d", i), CompanyID: uint64(a.id), Device: "acme-phone", Direction: store.Outbound,
			Channel: "sms", Phone: fmt.Sprintf("+1555010%04d", i%50), Text: text, SIMSlot: "SIM1",
			Status: store.MsgDelivered, Segments: 10, CreatedAt: now, UpdatedAt: now})
	}
	if err := e.store.ImportMessages(msgs); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(e.url, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /company/export HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", addr, a.apiKey)
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("the export: %v, %v", r, err)
	}
	// The first message read, the key is rotated: the server has begun the
	// messages and holds the rest back until the client reads on.
	var before []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(before), `"uuid":"acme-`) {
		n, err := r.Body.Read(buf)
		before = append(before, buf[:n]...)
		if err != nil {
			t.Fatalf("reading the export up to its first message: %v (%d bytes)", err, len(before))
		}
	}

	e.want(e.do(call{method: "POST", path: "/account/api-key/rotate", token: a.access}), http.StatusOK, "")
	// The document is cut: the connection closes before the body's end, so
	// the client's transfer fails rather than ending as a whole one.
	rest, err := io.ReadAll(r.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the export after the rotation: %v (%d bytes), want the transfer to fail", err, len(rest))
	}
	// The request is counted as any other, though its handler aborted.
	if m := e.do(call{method: "GET", path: "/metrics"}); !strings.Contains(string(m.Raw), `simrelay_http_requests_total{method="GET",route="/company/export",status="200"} 1`) {
		t.Fatalf("/metrics does not count the cut export:\n%s", m.Raw)
	}
	got := strings.Count(string(before)+string(rest), `"uuid":"acme-`)
	if got >= total {
		t.Fatalf("the export of a rotated key went on to its end: %d of %d messages", got, total)
	}
	if got == 0 {
		t.Fatalf("nothing of the export came before the rotation")
	}
}

// TestCompanyExportEndsWithItsAdminRole: the export's checks ask for the
// level its route demanded (admins and the API key), as its first check
// did: an admin demoted to member while the document streams is cut, as
// a member's export is refused.
func TestCompanyExportEndsWithItsAdminRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	const total = 1500 // 6 MB, beyond what the sockets' buffers hold
	fillExport(t, e, a, total, 4000)
	id, access := e.phonesInviteMember(a, "ada@acme.test")
	promote := func(role string) {
		t.Helper()
		e.want(e.do(call{method: "PATCH", path: fmt.Sprintf("/users/%.0f", id), token: a.access, body: map[string]any{"role": role}}), http.StatusOK, "")
	}
	promote("admin")
	c := dialExport(t, e, access, 4096)
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	r, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("the export: %v, %v", r, err)
	}
	defer r.Body.Close()
	var before []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(before), `"uuid":"msg-`) {
		n, err := r.Body.Read(buf)
		before = append(before, buf[:n]...)
		if err != nil {
			t.Fatalf("reading the export up to its first message: %v (%d bytes)", err, len(before))
		}
	}

	promote("member")
	rest, err := io.ReadAll(r.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the export after the demotion: %v (%d bytes), want the transfer to fail", err, len(before)+len(rest))
	}
	if got := strings.Count(string(before)+string(rest), `"uuid":"msg-`); got >= total {
		t.Fatalf("the export of a demoted admin went on to its end: %d of %d messages", got, total)
	}
	e.want(e.do(call{method: "GET", path: "/company/export", token: access}), http.StatusForbidden, "forbidden")
}
