package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/web"
)

// heldPhones is the hub with its store write hung: Disconnect closes the
// link, tells called, and returns stored, which the test closes.
type heldPhones struct {
	*gateway.Hub
	called chan string
	stored chan struct{}
}

func (p *heldPhones) Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{} {
	p.Hub.Disconnect(fingerprint, deviceID, code, reason)
	p.called <- fingerprint
	return p.stored
}

// The console's disabling or deletion of a device waits for its last seen
// to be stored, but no longer than its browser does: with that write hung,
// the browser that gives up ends the request on the server too.
func TestConsoleDisconnectWaitEndsWithTheRequest(t *testing.T) {
	t.Parallel()
	held := &heldPhones{called: make(chan string, 8), stored: make(chan struct{})}
	ended := make(chan string, 64)
	var logs syncbuf.Buffer
	e := newEnv(t, func(o *envOptions) {
		o.phones = func(h *gateway.Hub) web.Phones { held.Hub = h; return held }
		o.logs = &logs
		o.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/console/devices/fp-1") {
					next.ServeHTTP(w, r) // the phone's WebSocket among them
					return
				}
				rec := &statusOf{ResponseWriter: w}
				next.ServeHTTP(rec, r)
				ended <- fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status)
			})
		}
	})
	t.Cleanup(func() { close(held.stored) }) // before the server's close: a handler still waiting ends
	b := e.acmeWithPhone()
	for _, tc := range []struct {
		path string
		form url.Values
		json bool // the JavaScript's post, not a plain form's
	}{
		{"/console/devices/fp-1", url.Values{"device_name": {"Pixel"}, "selected_sim": {"BOTH"}, "status": {"disabled"}}, false},
		{"/console/devices/fp-1/delete", url.Values{}, true},
	} {
		tc.form.Set("csrf", b.csrf)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+tc.path, strings.NewReader(tc.form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.json {
			req.Header.Set("Accept", "application/json")
		}
		answered := make(chan error, 1)
		go func() {
			res, err := b.c.Do(req)
			if err == nil {
				res.Body.Close()
			}
			answered <- err
		}()
		select {
		case fp := <-held.called:
			if fp != "fp-1" {
				t.Fatalf("POST %s: Disconnect of %q, want fp-1", tc.path, fp)
			}
		case err := <-answered:
			t.Fatalf("POST %s: answered (%v) before it closed the link", tc.path, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("POST %s: no Disconnect", tc.path)
		}
		cancel() // the browser gives up
		if err := <-answered; err == nil {
			t.Fatalf("POST %s: answered while the last seen was unstored", tc.path)
		}
		deadline := time.After(10 * time.Second)
		for done := false; !done; {
			select {
			case got := <-ended:
				if done = strings.HasPrefix(got, "POST "+tc.path+" "); done {
					// 499, a client's closing, not a server's failure (500).
					if want := "POST " + tc.path + " 499"; got != want {
						t.Fatalf("ended %q, want %q", got, want)
					}
				}
			case <-deadline:
				t.Fatalf("POST %s: the request still runs after its browser gave up", tc.path)
			}
		}
	}
	// Logged at debug, not as a failure.
	if strings.Contains(logs.String(), "console request failed") || strings.Count(logs.String(), "console request ended by its client") != 2 {
		t.Fatalf("log, want two debug lines of requests ended by their clients and no failure:\n%s", logs.String())
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
