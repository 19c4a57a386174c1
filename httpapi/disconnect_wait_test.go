package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// A request that closes a device's link (its deletion, its disabling, its
// registration again) waits for the device's last seen to be stored, but
// no longer than its client does: with that write hung, the client that
// gives up ends the request on the server too.
func TestDisconnectWaitEndsWithTheRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "hold@example.com")
	// The API's handler behind a server of the test's, which hears each
	// request end.
	ended := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusOf{ResponseWriter: w}
		e.handler.ServeHTTP(rec, r)
		ended <- fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status)
	}))
	t.Cleanup(srv.Close)
	hold := &heldDisconnect{called: make(chan string, 8), stored: make(chan struct{})}
	t.Cleanup(func() { close(hold.stored) }) // before srv.Close: a handler still waiting ends
	for _, tc := range []struct {
		fp, method, path, body string
	}{
		{"held-delete", "DELETE", "/device/delete/held-delete", ""},
		{"held-disable", "PATCH", "/device/held-disable", `{"status":"disabled"}`},
	} {
		e.pairPhone(a.apiKey, tc.fp)
		e.phones.hold.Store(hold)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+a.apiKey)
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		answered := make(chan error, 1)
		go func() {
			resp, err := testhttp.Client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			answered <- err
		}()
		select {
		case fp := <-hold.called:
			if fp != tc.fp {
				t.Fatalf("%s %s: Disconnect of %q, want %q", tc.method, tc.path, fp, tc.fp)
			}
		case err := <-answered:
			t.Fatalf("%s %s: answered (%v) before it closed the link", tc.method, tc.path, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %s: no Disconnect", tc.method, tc.path)
		}
		cancel() // the client gives up
		if err := <-answered; err == nil {
			t.Fatalf("%s %s: answered while the last seen was unstored", tc.method, tc.path)
		}
		select {
		case got := <-ended:
			// 499, a client's closing, not a server's failure (500).
			if want := tc.method + " " + tc.path + " 499"; got != want {
				t.Fatalf("ended %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %s: the request still runs after its client gave up", tc.method, tc.path)
		}
		e.phones.hold.Store(nil)
	}
}

// statusOf records the status a handler answers.
type statusOf struct {
	http.ResponseWriter
	status int
}

func (w *statusOf) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
