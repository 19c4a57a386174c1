package httpapi_test

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// TestCompanyExportOutlivesItsAccessTokensExpiry: an admin's export asked
// with an access token, read steadily, is not cut when the token expires
// (15 minutes), which revokes nothing: a company whose document takes
// longer than that to download at the minimum rate got a document that
// did not parse. What revokes the token still cuts it, expired or not: a
// sign-out everywhere (its generation moved on).
func TestCompanyExportOutlivesItsAccessTokensExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	const total = 1500 // 6 MB, beyond what the sockets' buffers hold
	fillExport(t, e, a, total, 4000)
	// open reads an export by the admin's access token up to its first
	// message: the server holds the rest back until the client reads on.
	open := func() (*http.Response, []byte) {
		t.Helper()
		c := dialExport(t, e, a.access, 4096)
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		r, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("the export: %v, %v", r, err)
		}
		t.Cleanup(func() { r.Body.Close() })
		var before []byte
		buf := make([]byte, 4096)
		for !strings.Contains(string(before), `"uuid":"msg-`) {
			n, err := r.Body.Read(buf)
			before = append(before, buf[:n]...)
			if err != nil {
				t.Fatalf("reading the export up to its first message: %v (%d bytes)", err, len(before))
			}
		}
		return r, before
	}

	// Both of the company's slots, taken before the token expires.
	r, before := open()
	r2, before2 := open()
	e.clock.Advance(time.Hour) // the access token expired meanwhile
	rest, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("the export was cut after %d bytes: %v", len(before)+len(rest), err)
	}
	if got := decodeExport(t, append(before, rest...)); got != total {
		t.Fatalf("the export has %d messages, want %d", got, total)
	}

	if _, err := e.store.UpdateUser(uint64(a.adminID), func(u *store.User) error { u.TokenGeneration++; return nil }); err != nil {
		t.Fatal(err)
	}
	rest, err = io.ReadAll(r2.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the export after the sign-out everywhere: %v (%d bytes), want the transfer to fail", err, len(before2)+len(rest))
	}
	if got := strings.Count(string(before2)+string(rest), `"uuid":"msg-`); got >= total {
		t.Fatalf("the export of a revoked access token went on to its end: %d of %d messages", got, total)
	}
}
