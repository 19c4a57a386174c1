package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// replacingPage is a page whose button is replaced by a copy of itself
// the moment it is found: chromedp reads the button's width to see that
// it is visible, then clicks it, and the page replaces it in between, as
// a console page's script or its next page did under load. The copy is a
// plain button.
const replacingPage = `<!doctype html><html lang="en"><title>Replaced</title>
<button id="b" type="button">Go</button> <output id="clicks">0</output>
<script>
var clicks = 0, replaced = 0;
document.addEventListener("click", function (ev) {
  if (ev.target.id === "b") { clicks++; document.getElementById("clicks").textContent = clicks; }
});
var b = document.getElementById("b");
var width = Object.getOwnPropertyDescriptor(HTMLElement.prototype, "offsetWidth").get;
Object.defineProperty(b, "offsetWidth", {get: function () {
  var w = width.call(this);
  if (this.isConnected) { this.replaceWith(this.cloneNode(true)); replaced++; }
  return w;
}});
</script></html>`

// TestBrowserClickOnAReplacedElementIsRetried: a click whose button the
// page replaced between finding it and clicking it failed the test with
// chromedp's "Could not find node with given id (-32000)"
// (TestBrowserMemberSeesNoAdminActions's sign-out and
// TestBrowserWhatsAppSendReachesDeliveredAndPauseRefuses's typing, on a
// loaded machine). do finds the element again, and the click lands once.
func TestBrowserClickOnAReplacedElementIsRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(replacingPage))
	}))
	t.Cleanup(srv.Close)
	ctx := chrome(t)
	do(t, ctx, "open the page", chromedp.Navigate(srv.URL), chromedp.WaitReady(chromedp.CSS(`#b`)))
	do(t, ctx, "click the button being replaced", chromedp.Click(chromedp.CSS(`#b`)))
	if got := eval[[]int](t, ctx, `[replaced, clicks]`); got[0] != 1 || got[1] != 1 {
		t.Fatalf("the button was replaced %d times and clicked %d times, want 1 and 1", got[0], got[1])
	}
}
