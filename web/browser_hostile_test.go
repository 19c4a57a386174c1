package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
)

// hostile is markup that runs script if any page or the JavaScript ever
// puts a user's string into the document as HTML: it sets window.pwned.
const hostile = `"><img src=x onerror="window.pwned=1"><svg onload="window.pwned=1">`

// TestBrowserHostileStringsStayText fills every user-controlled string the
// console shows (company, user, device name, message text, webhook URL,
// WhatsApp text and media URL) with markup, opens every page at 360 px and
// at 1280 px, and checks that nothing ran, that no page scrolls sideways
// and that every input has a label. SIMRELAY_TOUR=dir keeps a screenshot of
// every page there.
func TestBrowserHostileStringsStayText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme"+hostile, "ada@acme.test", "Correct1horse")
	ph := e.pairPhone(e.pairingCode(key), "fp-1", true)
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, true)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")

	admin := e.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{"/console/devices/fp-1", url.Values{"device_name": {"Pixel" + hostile}, "selected_sim": {"BOTH"}, "status": {"active"}}},
		{"/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100999"}, "sim_slot": {"SIM1"}, "message": {"Hi" + hostile}}},
		{"/console/numbers/whatsapp/" + wa + "/send", url.Values{"to": {"+15550100999"}, "type": {"text"}, "content": {"Wa" + hostile}}},
		{"/console/pools", url.Values{"name": {`P"><svg onload="window.pwned=1">`}, "members": {"fp-1/SIM1"}}}, // a name holds 64 characters
		{"/console/team/invite", url.Values{"email": {"mo@acme.test"}, "firstName": {"Mo" + hostile}, "lastName": {"</script><script>window.pwned=1</script>"}, "role": {"member"}}},
	} {
		if p := admin.post(c.path, c.form); p.status != http.StatusOK {
			t.Fatalf("POST %s: %d %s", c.path, p.status, p.body)
		}
	}
	<-ph.Receive(proto.Inbound{ClientID: "in-1", From: "+15550100999", Message: "In" + hostile, SIMSlot: "SIM1"})

	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	tour := os.Getenv("SIMRELAY_TOUR")
	pages := []string{"/console/", "/console/devices", "/console/messages?device=fp-1&phone=%2B15550100999",
		"/console/numbers", "/console/numbers/whatsapp/" + wa, "/console/pools", "/console/opt-outs", "/console/webhooks", "/console/team",
		"/console/settings", "/console/billing", "/console/nowhere?err=" + url.QueryEscape(hostile)}
	type visit struct {
		width int64
		i     int
		path  string
	}
	var visits []visit
	for _, width := range []int64{360, 1280} {
		for i, p := range pages {
			visits = append(visits, visit{width, i, p})
		}
	}
	// The pages load in a few tabs of the signed-in browser context at once,
	// each page's checks its own: one after another the 24 loads were most of
	// the test's time, the browser and the server waiting on each other.
	const tabs = 4
	found := make([][]string, len(visits)) // what each visit found wrong, in visits' order
	next := make(chan int)
	var wg sync.WaitGroup
	for range tabs {
		tab, cancel := chromedp.NewContext(ctx) // a new tab of the same browser context
		defer cancel()
		wg.Go(func() {
			for n := range next {
				v := visits[n]
				shotTo := ""
				if tour != "" {
					shotTo = filepath.Join(tour, fmt.Sprintf("%d-%02d.png", v.width, v.i))
				}
				found[n] = hostilePage(t, tab, e.url, v.path, v.width, shotTo)
			}
		})
	}
	for n := range visits {
		next <- n
	}
	close(next)
	wg.Wait()
	for _, f := range found {
		for _, msg := range f {
			t.Error(msg)
		}
	}
}

// hostilePage opens one page of TestBrowserHostileStringsStayText in tab at
// width and says what it finds wrong; it runs in a goroutine of the test,
// so it reports rather than fails. A screenshot goes to shotTo, if given.
func hostilePage(t *testing.T, tab context.Context, base, p string, width int64, shotTo string) []string {
	var found []string
	open := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(width, 800), chromedp.Navigate(base + p), chromedp.WaitReady(chromedp.CSS(`main`))}
	for _, step := range open {
		if _, err := again(tab, step); err != nil {
			return append(found, fmt.Sprintf("open %s at %d px: %v", p, width, err))
		}
	}
	// A page with a stream opens it: wait, so that live events are drawn too.
	if err := waitUntil(tab, `!document.querySelector("[data-live]") || document.querySelector("[data-live]").dataset.live === "true" || !document.getElementById("chat") && !document.getElementById("agent-msgs")`); err != nil {
		return append(found, fmt.Sprintf("%s at %d px: wait for the page to settle: %v", p, width, err))
	}
	if shotTo != "" {
		shot(t, tab, shotTo)
	}
	pwned, err := chromedp.Run(tab, chromedp.Evaluate[bool](`window.pwned === 1`))
	if err != nil {
		return append(found, fmt.Sprintf("%s at %d px: %v", p, width, err))
	}
	if pwned {
		found = append(found, fmt.Sprintf("%s at %d px ran injected markup", p, width))
	}
	n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("main img:not(.qr), main svg:not(.chart):not(.qr)").length`))
	if err != nil {
		return append(found, fmt.Sprintf("%s at %d px: %v", p, width, err))
	}
	if n > 0 {
		found = append(found, fmt.Sprintf("%s at %d px holds %d injected elements", p, width, n))
	}
	w, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil {
		return append(found, fmt.Sprintf("%s at %d px: %v", p, width, err))
	}
	if w > int(width) {
		found = append(found, fmt.Sprintf("%s is %d px wide at %d px", p, w, width))
	}
	bad, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("input:not([type=hidden]),select,textarea")).filter(function(el){return !(el.labels && el.labels.length) && !el.getAttribute("aria-label")}).map(function(el){return el.name||el.id})`))
	if err != nil {
		return append(found, fmt.Sprintf("%s at %d px: %v", p, width, err))
	}
	if len(bad) > 0 {
		found = append(found, fmt.Sprintf("%s has inputs without a label: %v", p, bad))
	}
	return found
}
