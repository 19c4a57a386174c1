package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserDeviceChoiceByKeyboardStaysUntilOpened: the messages page's
// device list opens the device chosen with the pointer at once, but a
// keyboard user going through the list with the arrow keys stays on the
// page until they press "Open" (WCAG 3.2.2, on input): each arrow key
// loaded the next device's page, so the third device could not be reached
// from the keyboard without opening the second's first.
func TestBrowserDeviceChoiceByKeyboardStaysUntilOpened(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	for _, fp := range []string{"fp-1", "fp-2", "fp-3"} {
		e.pairPhone(e.pairingCode(key), fp, false)
	}
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the first device", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#chat`)))
	waitFor(t, ctx, "the page's script", `document.readyState === "complete"`)
	eval[bool](t, ctx, `window.sameLoad = true`)
	do(t, ctx, "arrow down twice", chromedp.Focus(chromedp.CSS(`#device`)), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown))
	waitFor(t, ctx, "the third device chosen", `document.getElementById("device").value === "fp-3"`)
	if !eval[bool](t, ctx, `window.sameLoad === true && document.getElementById("chat").dataset.device === "fp-1"`) {
		t.Fatal("an arrow key loaded another device's page")
	}
	do(t, ctx, "open it", chromedp.Click(chromedp.CSS(`form[action="/console/messages"] button[type=submit]`)))
	// The page's script (deferred) has run once the document is complete:
	// a change made before it listens opens nothing.
	waitFor(t, ctx, "the third device's page", `document.readyState === "complete" && !!document.getElementById("chat") && document.getElementById("chat").dataset.device === "fp-3"`)

	// A change without keys (the pointer's; SetValue sends the change
	// event) opens the choice at once.
	do(t, ctx, "choose with the pointer", chromedp.SetValue(chromedp.CSS(`#device`), "fp-2"))
	waitFor(t, ctx, "the second device's page", `!!document.getElementById("chat") && document.getElementById("chat").dataset.device === "fp-2"`)
}
