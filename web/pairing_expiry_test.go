package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
)

// stateOf is the pairing panel's poll: the devices, and whether its code
// still works.
func stateOf(t *testing.T, b *browser, code string) (status int, pairing string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.e.url+"/console/devices/state?pairing="+url.QueryEscape(code), nil)
	req.Header.Set("Accept", "application/json")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := read(t, res)
	var s struct{ Pairing string }
	if p.status == http.StatusOK {
		if err := json.Unmarshal([]byte(p.body), &s); err != nil {
			t.Fatalf("%s: %v", p.body, err)
		}
	}
	return p.status, s.Pairing
}

var pairingParam = regexp.MustCompile(`pairing=([A-Za-z0-9-]+)`)

// TestPairingStateSaysWhenTheCodeExpired: the pairing panel's poll names
// its code and learns whether a phone can still register with it: "live",
// then "expired" after the code's time (or for another company's code),
// so the panel stops asking instead of asking every 1.5 s for as long as
// the tab stays open.
func TestPairingStateSaysWhenTheCodeExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	p := ada.post("/console/pairing", nil)
	m := pairingParam.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("pairing: %d %s", p.status, p.body)
	}
	code := m[1]
	if status, st := stateOf(t, ada, code); status != http.StatusOK || st != "live" {
		t.Errorf("a fresh code: %d %q, want live", status, st)
	}
	e.company("Other", "bo@other.test", "Correct1horse")
	bo := e.browser()
	bo.signIn("bo@other.test", "Correct1horse")
	if status, st := stateOf(t, bo, code); status != http.StatusOK || st != "expired" {
		t.Errorf("another company's code: %d %q, want expired (no live code of its own)", status, st)
	}
	e.clock.Advance(device.DefaultPairingTTL)
	if status, st := stateOf(t, ada, code); status != http.StatusOK || st != "expired" {
		t.Errorf("after its time: %d %q, want expired", status, st)
	}
	if p := ada.get("/console/devices/state"); p.status != http.StatusOK || strings.Contains(p.body, `"pairing"`) {
		t.Errorf("without a code: %d %s, want no pairing state", p.status, p.body)
	}
	// The page itself, opened from a link kept from before (history, a
	// bookmark), says the code no longer works and offers a new one: it
	// was a 404 page. Another company's code reads the same, its QR and
	// link shown to no one.
	for _, b := range []*browser{ada, bo} {
		p := b.get("/console/devices?pairing=" + url.QueryEscape(code))
		if p.status != http.StatusOK || !strings.Contains(p.body, "This pairing code no longer works") ||
			!strings.Contains(p.body, `data-expired="true"`) || !strings.Contains(p.body, `action="/console/pairing"`) ||
			strings.Contains(p.body, `svg class="qr"`) || strings.Contains(p.body, "simrelay://") {
			t.Errorf("the devices page with a code that no longer works: %d\n%s", p.status, p.body)
		}
	}
}

// TestBrowserPairingPanelStopsWhenTheCodeExpires: a pairing panel left
// open past its code's time says the code expired, offers a new one, and
// stops polling (it polled, and kept the session alive, for as long as the
// tab stayed open).
func TestBrowserPairingPanelStopsWhenTheCodeExpires(t *testing.T) {
	t.Parallel()
	var polls atomic.Int32
	// The panel asks every 250 ms here (1.5 s by default).
	const every = 250 * time.Millisecond
	e := newEnv(t, func(o *envOptions) {
		o.timers.PairingPoll = every
		o.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/console/devices/state" {
					polls.Add(1)
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	if _, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: pageWork}); err != nil {
		t.Fatal(err)
	}
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "ask for a pairing code", chromedp.Navigate(e.url+"/console/devices"), chromedp.Click(chromedp.CSS(`main button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pairing-code`)))
	first := eval[string](t, ctx, `document.getElementById("pairing-code").textContent.trim()`)
	poll.Until(t, "the panel polls", func() bool { return polls.Load() > 0 })
	// While its code works the panel always has its next poll to run: a
	// timer, or a request under way (seen here, so that the look below,
	// which finds none, looks at what the page really has).
	waitFor(t, ctx, "the panel's next poll in the page's work", `pageWork() > 0`)
	e.clock.Advance(device.DefaultPairingTTL)
	waitText(t, ctx, "#banner", "This pairing code expired")
	waitFor(t, ctx, "the panel offering a new code", `document.getElementById("pairing").dataset.expired === "true" && !document.querySelector("svg.qr") && !!document.querySelector('#pairing form[action="/console/pairing"] button')`)
	// It stopped: the answer that said "expired" left the page nothing to
	// run, no timer and no request, so no poll can follow, however long
	// the tab stays open (seen at once, not by waiting out periods).
	n := polls.Load()
	if left := eval[int](t, ctx, `pageWork()`); left != 0 {
		t.Errorf("the panel's page still has %d timers or requests after its code expired", left)
	}
	if got := polls.Load(); got != n {
		t.Errorf("the panel polled %d more times after its code expired", got-n)
	}
	do(t, ctx, "ask again", chromedp.Click(chromedp.CSS(`#pairing form button`)))
	waitFor(t, ctx, "a new code", `!!document.getElementById("pairing-code") && document.getElementById("pairing-code").textContent.trim() !== `+jsString(first)+` && !!document.querySelector("svg.qr")`)
}

// pageWork, run in each page before its own scripts, counts what the page
// has left to run by itself: its timers (setTimeout, setInterval) not yet
// fired or cleared and its requests (fetch) not yet answered; pageWork()
// in the page tells how many.
const pageWork = `(function () {
  var timers = new Set(), fetches = 0;
  var setT = window.setTimeout, clearT = window.clearTimeout, setI = window.setInterval, clearI = window.clearInterval, f = window.fetch;
  window.setTimeout = function (fn, ms) {
    var args = Array.prototype.slice.call(arguments, 2);
    var id = setT.call(window, function () {
      timers.delete(id);
      if (typeof fn === "function") { fn.apply(window, args); }
    }, ms);
    timers.add(id);
    return id;
  };
  window.clearTimeout = function (id) { timers.delete(id); clearT.call(window, id); };
  window.setInterval = function () { var id = setI.apply(window, arguments); timers.add(id); return id; };
  window.clearInterval = function (id) { timers.delete(id); clearI.call(window, id); };
  window.fetch = function () {
    fetches++;
    return f.apply(window, arguments).finally(function () { fetches--; });
  };
  window.pageWork = function () { return timers.size + fetches; };
})();`

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }
