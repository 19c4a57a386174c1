package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/channel"
)

// TestBrowserSendWithoutTheScriptComesBackToItsPage: a send posted before
// the page's script ran (here, with scripts off) that the number's pause
// refuses comes back to the number's page with the refusal in its banner:
// it was the console's 403 error page, the number and its form gone. The
// form holds what was typed.
func TestBrowserSendWithoutTheScriptComesBackToItsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, false)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	paused := "paused"
	if _, err := e.agents.Update(context.Background(), 1, channel.WhatsApp, wa, channel.Patch{Status: &paused}); err != nil {
		t.Fatal(err)
	}
	ctx := chrome(t)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the number", chromedp.Navigate(e.url+"/console/numbers/whatsapp/"+wa), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	do(t, ctx, "send", chromedp.SendKeys(field("to"), "+15550100999"), chromedp.SendKeys(field("content"), "Are you there?"),
		chromedp.Click(chromedp.CSS(`#agent-send button[type=submit]`)))
	waitFor(t, ctx, "the next page", `document.readyState === "complete" && location.search.indexOf("err=") >= 0`)
	u, err := url.Parse(eval[string](t, ctx, `location.href`))
	if err != nil {
		t.Fatal(err)
	}
	bannerText := eval[string](t, ctx, `(document.getElementById("banner")||{}).textContent||""`)
	title := eval[string](t, ctx, `document.title`)
	if u.Path != "/console/numbers/whatsapp/"+wa || !strings.Contains(bannerText, "is paused") {
		t.Fatalf("the refused send led to %s titled %q, banner %q; want the number's page saying it is paused", u.Path, title, bannerText)
	}
	form := eval[int](t, ctx, `document.querySelectorAll("#agent-send").length`)
	if form != 1 {
		t.Errorf("the page it came back to has %d send forms", form)
	}
	// What was typed is in the form again, to send once the number is
	// resumed: it came back empty.
	to := eval[string](t, ctx, `document.querySelector("#agent-send [name=to]").value`)
	content := eval[string](t, ctx, `document.querySelector("#agent-send [name=content]").value`)
	if to != "+15550100999" || content != "Are you there?" {
		t.Errorf("the form came back with to %q and text %q, want what was typed", to, content)
	}
}

// A plain post of the send box to a number on the opt-out list comes back
// to the device's thread with the refusal: it was the 403 error page.
func TestPlainPostOfASendToAnOptedOutNumberComesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	if p := b.post("/console/opt-outs", url.Values{"phone": {"+15550100000"}}); p.status != http.StatusOK {
		t.Fatalf("opt out: %d %s", p.status, p.body)
	}
	p, to := b.plainPost("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {"hi"}, "sim_slot": {"SIM1"}})
	if to.Path != "/console/messages" || to.Query().Get("device") != "fp-1" || p.status != http.StatusOK || !strings.Contains(banner(p), "opted out") {
		t.Fatalf("refused to %s: %d, banner %q", to, p.status, banner(p))
	}
}

// TestBrowserSendAtSaysWhichTimeItReads: the send box's Send at is read in
// the person's own time by the page's script and as UTC without it; its
// label says which. Without the script it said "in your local time" above
// a hint that times are in UTC, and the time typed was read as UTC.
func TestBrowserSendAtSaysWhichTimeItReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.acmeWithPhone()
	label := `document.querySelector('label[for="send_at"]').textContent`
	for _, c := range []struct {
		script bool
		want   string
	}{{true, "Send at, in your local time (optional: empty sends now)"}, {false, "Send at, in UTC (optional: empty sends now)"}} {
		ctx := chrome(t)
		if !c.script {
			if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
				t.Fatal(err)
			}
		}
		signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
		do(t, ctx, "open the thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
		if c.script {
			waitFor(t, ctx, "the script", `document.readyState === "complete" && document.getElementById("send_at-zone").textContent.indexOf("Your time zone") === 0`)
		}
		if got := eval[string](t, ctx, label); got != c.want {
			t.Errorf("with the script %v the label reads %q, want %q", c.script, got, c.want)
		}
	}
}

// TestBrowserPairingPanelWithoutTheScriptSaysToReload: the pairing panel
// turns into the new device by its script's asking; where the script does
// not run, the panel says to reload the page (a link that keeps the code),
// not that it will turn into the device, which it never did.
func TestBrowserPairingPanelWithoutTheScriptSaysToReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	for _, c := range []struct {
		script bool
		want   string
	}{{true, "This panel turns into the device when it does."}, {false, "Reload this page once it has: it then lists the new device."}} {
		ctx := chrome(t)
		if !c.script {
			if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
				t.Fatal(err)
			}
		}
		signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
		do(t, ctx, "ask for a code", chromedp.Navigate(e.url+"/console/devices"), chromedp.Click(chromedp.CSS(`main form[action="/console/pairing"] button`)))
		waitFor(t, ctx, "the panel", `document.readyState === "complete" && !!document.getElementById("pairing-status")`)
		if got := eval[string](t, ctx, `document.getElementById("pairing-status").textContent`); !strings.Contains(got, c.want) {
			t.Errorf("with the script %v the panel says %q, want %q", c.script, got, c.want)
		}
		if !c.script {
			if got := eval[string](t, ctx, `((document.querySelector("#pairing-status a")||{}).search||"")`); !strings.HasPrefix(got, "?pairing=") {
				t.Errorf("the reload link's query is %q, want the code's", got)
			}
		}
	}
}
