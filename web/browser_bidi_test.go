package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// rtlOverride (U+202E) makes everything after it, up to the end of its
// paragraph or isolate, read right to left.
const rtlOverride = "\u202e"

// readsLeftToRight is a JavaScript expression: whether the first occurrence
// of want inside the element sel is drawn with its first character left of
// its last, measured on the rendered glyphs (Range.getClientRects), not on
// the DOM's order.
func readsLeftToRight(sel, want string) string {
	return fmt.Sprintf(`(function(sel, want){
  var root = document.querySelector(sel);
  if (!root) { return "no " + sel; }
  var w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), n;
  while ((n = w.nextNode())) {
    var i = n.data.indexOf(want);
    if (i < 0) { continue; }
    var rect = function (at) { var r = document.createRange(); r.setStart(n, at); r.setEnd(n, at + 1); return r.getClientRects()[0]; };
    var first = rect(i), last = rect(i + want.length - 1);
    return first.left < last.left ? "ltr" : "reversed: first at " + first.left + ", last at " + last.left;
  }
  return want + " is not in " + sel;
})(%q, %q)`, sel, want)
}

// TestBrowserBidiControlsStayInTheirName gives a device a name, and its SIM
// a carrier, that end in a right-to-left override, and checks that the text
// the console draws beside them (the device's online badge, the SIM's
// phone number) still reads left to right: each user- or phone-controlled
// text is isolated where it is shown, server-rendered and live alike. An
// inbound SMS with an override must not turn its own sender's number, nor
// the conversation list, around either; the overview's activity line about
// the pairing isolates the name the phone registered with.
func TestBrowserBidiControlsStayInTheirName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	sims := []proto.SIM{{Slot: "SIM1", Carrier: "Evil" + rtlOverride, PhoneNumber: "+15550109001"}, {Slot: "SIM2"}}
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: e.pairingCode(key), DeviceFingerprint: "fp-1", DeviceName: "Phone" + rtlOverride, SIMs: sims, AppVersion: "1.2.3",
	})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	ph := e.runPhone(reg, proto.Hello{AppVersion: "1.2.3", SelectedSIM: "BOTH", SIMs: sims}, true)
	admin := e.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	if p := admin.post("/console/devices/fp-1", url.Values{"device_name": {"Pixel" + rtlOverride}, "selected_sim": {"BOTH"}, "status": {"active"}}); p.status != http.StatusOK {
		t.Fatalf("rename: %d %s", p.status, p.body)
	}
	// The activity line the store composed names the device isolated, so
	// that its override stops before " paired" wherever the line is read.
	if p := admin.get("/console/"); !strings.Contains(p.body, "Device \u2068Phone"+rtlOverride+"\u2069 paired") {
		t.Errorf("the overview's activity does not isolate the device's name:\n%s", p.body)
	}
	<-ph.Receive(proto.Inbound{ClientID: "in-1", From: "+15550100999", Message: "Hi" + rtlOverride, SIMSlot: "SIM1"})

	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the devices", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(e.url+"/console/devices"), chromedp.WaitReady(chromedp.CSS(`#device-fp-1`)))
	for _, c := range []struct{ sel, want string }{
		{"#device-fp-1 h2", "online"},
		{"#device-fp-1 .facts", "+1 555-010-9001"},
	} {
		if got := eval[string](t, ctx, readsLeftToRight(c.sel, c.want)); got != "ltr" {
			t.Errorf("devices page, %s %q: %s", c.sel, c.want, got)
		}
	}

	// The conversation, drawn by the server, then a second inbound one drawn
	// live by the JavaScript.
	do(t, ctx, "open the conversation", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100999"), chromedp.WaitReady(chromedp.CSS(`#thread`)))
	waitFor(t, ctx, "the stream opens", `document.getElementById("chat").dataset.live === "true"`)
	<-ph.Receive(proto.Inbound{ClientID: "in-2", From: "+15550100999", Message: "Again" + rtlOverride, SIMSlot: "SIM1"})
	<-ph.Receive(proto.Inbound{ClientID: "in-3", From: "+15550100999", Message: "مرحبا 42", SIMSlot: "SIM1"})
	waitFor(t, ctx, "the live messages", `document.querySelectorAll("#thread .msg").length === 3`)
	// Each body, server-drawn or live, is a paragraph of its own whose
	// direction comes from its first letter: the Arabic one reads right to
	// left (the conversation list's last text comes first in the page).
	if got := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#convs .last, #thread .text")).map(function (p) { var s = getComputedStyle(p); return s.unicodeBidi + " " + s.direction; })`); fmt.Sprint(got) != "[plaintext rtl plaintext ltr plaintext ltr plaintext rtl]" {
		t.Errorf("the message bodies and the conversation's last text are drawn as %v", got)
	}
	for _, c := range []struct{ sel, want string }{
		{"#thread .msg:first-child .meta", "SIM1"},
		{"#thread .msg:nth-child(2) .meta", "SIM1"},
		{"#thread-h", "+1 555"},
		{"#convs li", "+1 555"},
	} {
		if got := eval[string](t, ctx, readsLeftToRight(c.sel, c.want)); got != "ltr" {
			t.Errorf("messages page, %s %q: %s", c.sel, c.want, got)
		}
	}
	// The texts themselves are kept as written, override and all.
	if got := eval[string](t, ctx, `document.querySelector("#thread .msg:nth-child(2) .text").textContent`); got != "Again"+rtlOverride {
		t.Errorf("the live message reads %q", got)
	}
}
