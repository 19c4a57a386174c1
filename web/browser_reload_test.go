package web_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/web"
)

// TestBrowserThreadReloadSaysTheSessionEnded: the messages page reloads
// its thread when its live stream opens again; a session that ended
// between the two is a 401 to that reload, and the page says the session
// ended (with the sign-in link), keeping what was typed, instead of
// leaving the thread as it was without a word. The session is ended by the
// server itself as the reload reaches it, so the stream, which opened
// under a live session, cannot be the one that tells (its heartbeat is an
// hour away).
func TestBrowserThreadReloadSaysTheSessionEnded(t *testing.T) {
	t.Parallel()
	reloadRefused(t, func(t *testing.T, e *env) {
		if err := e.store.RevokeUserSessions(1); err != nil { // signed out elsewhere, just now
			t.Error(err)
		}
	}, "session has expired")
}

// TestBrowserThreadReloadSaysWhyItWasRefused: a thread's reload refused
// for another reason than the session (here the device deleted elsewhere
// as the reload reaches the server, a 404) is said in the banner with the
// server's message, keeping what was typed; the page said nothing and
// left the thread as it was.
func TestBrowserThreadReloadSaysWhyItWasRefused(t *testing.T) {
	t.Parallel()
	reloadRefused(t, func(t *testing.T, e *env) {
		if _, err := e.store.DeleteDevice(1, "fp-1", time.Now()); err != nil { // deleted elsewhere, just now
			t.Error(err)
		}
	}, "The messages could not be reloaded: No such device.")
}

// reloadRefused opens a thread in the browser, types a message, and has
// interfere run as the thread's reload (after the live stream's resync)
// reaches the server: the banner must say banner, and the typed text stay.
func reloadRefused(t *testing.T, interfere func(*testing.T, *env), banner string) {
	t.Helper()
	var armed atomic.Bool
	var e *env
	e = newEnv(t, func(o *envOptions) {
		// The browser opens the stream again 100 ms after the resync ends
		// it, not the default's 3 s: the reload that follows is the point.
		o.streams = web.StreamConfig{Heartbeat: time.Hour, Retry: 100 * time.Millisecond}
		o.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/console/messages/thread" && armed.CompareAndSwap(true, false) {
					interfere(t, e)
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	e.acmeWithPhone()
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"))
	waitFor(t, ctx, "the stream open", `document.querySelector("[data-live]").dataset.live === "true"`)
	do(t, ctx, "type a message", chromedp.SendKeys(chromedp.CSS(`#chat textarea`), "half written"))
	armed.Store(true)
	e.broker.Resync() // the stream ends; the browser opens it again and reloads the thread
	waitText(t, ctx, "#banner", banner)
	if armed.Load() {
		t.Fatal("the thread was not reloaded")
	}
	if got := eval[string](t, ctx, `document.querySelector('#chat textarea').value`); !strings.Contains(got, "half written") {
		t.Errorf("after the refused reload the message box holds %q", got)
	}
}

// TestBrowserThreadReloadSaysTheServerWasNotReached: a thread's reload
// that gets no answer at all (the connection dropped) says so, keeping
// what was typed; the page said nothing and showed the thread as it stood,
// the events missed while away missing.
func TestBrowserThreadReloadSaysTheServerWasNotReached(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	var hits atomic.Int32
	e := newEnv(t, func(o *envOptions) {
		// As in reloadRefused: the browser opens the stream again 100 ms
		// after the resync ends it, not the default's 3 s.
		o.streams = web.StreamConfig{Heartbeat: time.Hour, Retry: 100 * time.Millisecond}
		o.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Every try while armed: a browser retries a request whose
				// reused connection closed without an answer.
				if r.URL.Path == "/console/messages/thread" && armed.Load() {
					hits.Add(1)
					conn, _, err := http.NewResponseController(w).Hijack()
					if err != nil {
						t.Error(err)
						return
					}
					conn.Close() // no answer at all
					return
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	e.acmeWithPhone()
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"))
	waitFor(t, ctx, "the stream open", `document.querySelector("[data-live]").dataset.live === "true"`)
	do(t, ctx, "type a message", chromedp.SendKeys(chromedp.CSS(`#chat textarea`), "half written"))
	armed.Store(true)
	e.broker.Resync() // the stream ends; the browser opens it again and reloads the thread
	waitText(t, ctx, "#banner", "The messages could not be reloaded: the server could not be reached")
	armed.Store(false)
	if hits.Load() == 0 {
		t.Fatal("the thread was not reloaded")
	}
	if got := eval[string](t, ctx, `document.querySelector('#chat textarea').value`); !strings.Contains(got, "half written") {
		t.Errorf("after the failed reload the message box holds %q", got)
	}
}
