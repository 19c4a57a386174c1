package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser tests of the pairing panel and the phone's first link.

// openPairing signs the admin in and asks the devices page for a pairing
// code, which it answers.
func openPairing(t *testing.T, e *env, ctx context.Context) string {
	t.Helper()
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "ask for a pairing code", chromedp.Navigate(e.url+"/console/devices"), chromedp.Click(chromedp.CSS(`main button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pairing-code`)))
	code, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#pairing-code`)))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(code)
}

// TestBrowserPairingPanelWaitsForThePhonesLink: a phone links right after
// it registers. The panel saw it registered before it linked and turned
// at once into the device, drawn "offline", which it stayed until a
// reload; it now waits for the link, saying so, and the device it turns
// into is online.
func TestBrowserPairingPanelWaitsForThePhonesLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.timers.PairingPoll = 250 * time.Millisecond })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	reg := e.registerPhone(openPairing(t, e, ctx), "fp-1")
	waitText(t, ctx, "#pairing-status", "Phone fp-1 registered; waiting for it to connect")
	e.linkPhone(reg, false)
	waitText(t, ctx, "#banner", "Phone fp-1 is paired.")
	waitText(t, ctx, "#device-fp-1 [data-online]", "online")
}

// TestBrowserPairingPanelTurnsIntoAPhoneThatDoesNotLink: a phone that
// registered and does not link (its network refuses the WebSocket, say)
// is shown all the same once the panel's wait for its link
// (web.PageTimers.PairingLink) is over: offline, as it is.
func TestBrowserPairingPanelTurnsIntoAPhoneThatDoesNotLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.timers.PairingPoll, o.timers.PairingLink = 250*time.Millisecond, time.Second })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	e.registerPhone(openPairing(t, e, ctx), "fp-1")
	waitText(t, ctx, "#banner", "Phone fp-1 is paired.")
	waitText(t, ctx, "#device-fp-1 [data-online]", "offline")
}
