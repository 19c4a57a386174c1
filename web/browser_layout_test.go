package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/internal/poll"
)

// At 1280 px the header is one row, and on the overview's chart the sent
// line still shows around the delivered one when they are equal: what the
// page's HTML cannot say, the browser's layout and computed styles do.
func TestBrowserHeaderOneRowAndChartLinesVisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme Logistics International", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", true)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	for _, to := range []string{"+15550100001", "+15550100002"} {
		if p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {to}, "message": {"hi"}, "sim_slot": {"SIM1"}}); p.status != http.StatusOK {
			t.Fatalf("send: %d %s", p.status, p.body)
		}
	}
	poll.Until(t, "both are delivered", func() bool {
		var stats struct {
			Totals struct{ Sent, Delivered int } `json:"totals"`
		}
		e.apiJSON(key, "/analytics", &stats)
		return stats.Totals.Sent == 2 && stats.Totals.Delivered == 2
	})

	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "1280 px wide", chromedp.EmulateViewport(1280, 900))
	for _, p := range signedInPages {
		do(t, ctx, "open "+p, chromedp.Navigate(e.url+p), chromedp.WaitVisible(chromedp.CSS(`h1`)))
		// One row: every part of the header starts on the same line.
		spread := eval[float64](t, ctx, `(function(){var tops=Array.from(document.querySelectorAll("header.top > *")).map(function(el){return el.getBoundingClientRect().top});return Math.max.apply(null,tops)-Math.min.apply(null,tops)})()`)
		if spread > 12 {
			t.Errorf("%s: the header wraps at 1280 px (its parts start %.0f px apart)", p, spread)
		}
	}
	do(t, ctx, "open the overview", chromedp.Navigate(e.url+"/console/"), chromedp.WaitVisible(chromedp.CSS(`svg.chart`)))
	width := func(series string) float64 {
		return eval[float64](t, ctx, `parseFloat(getComputedStyle(document.querySelector('polyline[data-series="`+series+`"]')).strokeWidth)`)
	}
	if s, d := width("sent"), width("delivered"); !(s > d && d > 0) {
		t.Errorf("drawn stroke widths: sent %.1f, delivered %.1f; the later line must be narrower so the sent one shows", s, d)
	}
}
