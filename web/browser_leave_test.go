package web_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserLeavingALivePageAsksNothing: going from one page with a live
// stream to another costs the next page's requests alone. The stream the
// old page left ended as a refused one does, and the page asked the
// stream's address once more, with fetch, to learn why: a request that
// opened a stream (and on a cluster took its lease) for a page going away.
func TestBrowserLeavingALivePageAsksNothing(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	e := newEnv(t, func(o *envOptions) {
		o.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/console/events" && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
					asked.Add(1)
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	for _, p := range []string{"/console/devices", "/console/messages", "/console/devices", "/console/"} {
		do(t, ctx, "open "+p, chromedp.Navigate(e.url+p), chromedp.WaitReady(chromedp.CSS(`#main`)))
		if p != "/console/" {
			waitFor(t, ctx, "the stream open", `document.querySelector("[data-live-since]").dataset.live === "true"`)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("leaving pages with a live stream asked why it ended %d times", n)
	}
}
