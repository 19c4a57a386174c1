package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserLiveViewSaysTheServerIsGone: a live view whose server went
// away (the network down, the server stopped) says so, not just stops:
// the browser's EventSource retries by itself, and the page showed the
// statuses as they stood, as if live, without a word. The page says so
// after its LiveLost, 6 s by default, here 1 s.
func TestBrowserLiveViewSaysTheServerIsGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.timers.LiveLost = time.Second })
	e.acmeWithPhone()
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"))
	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	if !eval[bool](t, ctx, `document.getElementById("banner").hidden`) {
		t.Fatal("a banner shows before the server went away")
	}
	e.stop()
	waitFor(t, ctx, "the banner", `!document.getElementById("banner").hidden && document.getElementById("banner").textContent.indexOf("could not be reached; live updates resume") >= 0`)
}
