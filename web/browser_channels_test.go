package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/channel"
)

// Browser tests of the WhatsApp and iMessage page and of scheduled SMS.

func TestBrowserWhatsAppSendReachesDeliveredAndPauseRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, []string{"ana@example.com"}, true)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	// The agent is online on the page, its number listed with its caps.
	do(t, ctx, "open the numbers", chromedp.Navigate(e.url+"/console/numbers"))
	waitText(t, ctx, "#number-"+wa+" [data-online]", "online")
	waitText(t, ctx, "#number-"+wa, "4 / 100 / 500")
	do(t, ctx, "open the number", chromedp.Click(chromedp.CSS("#number-"+wa+" a")), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	waitFor(t, ctx, "the live stream", `document.getElementById("agent-msgs").dataset.live === "true"`)
	eval[bool](t, ctx, `window.sameLoad = true`)

	// A send from the page reaches delivered without a reload.
	do(t, ctx, "send", chromedp.SendKeys(field("to"), "+15550100999"), chromedp.SendKeys(field("content"), "Hello from the console"),
		chromedp.Click(chromedp.CSS(`#agent-send button[type=submit]`)))
	waitFor(t, ctx, "delivered", `Array.from(document.querySelectorAll("#agent-msgs tr")).some(function(r){return r.textContent.indexOf("Hello from the console")>=0 && r.querySelector('.status[data-status="delivered"]')})`)
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded to show the status")
	}

	// Paused, the number refuses the next send and the page says why,
	// keeping what was typed.
	do(t, ctx, "pause", chromedp.Click(chromedp.CSS(`#pause button[type=submit]`)))
	waitText(t, ctx, "#banner", "paused")
	// The paused page's own script posts the form and says the refusal:
	// typed and sent before it ran (its file fetched anew with each page,
	// slow under load), the form went as a plain post, answered with the
	// error page instead of the banner, and keys typed as it moved focus
	// to the banner were lost. Deferred, it has run once the page is
	// complete.
	waitFor(t, ctx, "the paused page and its script", `document.querySelector("#number-state [data-state]").textContent === "paused" && document.readyState === "complete"`)
	do(t, ctx, "send while paused", chromedp.SendKeys(field("to"), "+15550100999"), chromedp.SendKeys(field("content"), "Are you there?"),
		chromedp.Click(chromedp.CSS(`#agent-send button[type=submit]`)))
	waitText(t, ctx, "#banner", "is paused; set its status to active")
	if got := eval[string](t, ctx, `document.querySelector('[name=content]').value`); got != "Are you there?" {
		t.Errorf("after the refusal the text field holds %q", got)
	}
	if rows := eval[int](t, ctx, `document.querySelectorAll("#agent-msgs tr").length`); rows != 1 {
		t.Errorf("the refused send is listed: %d rows", rows)
	}

	// At 360 px the number's page does not scroll sideways, and every input has a label.
	do(t, ctx, "360 px wide", chromedp.EmulateViewport(360, 740), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("the number's page is %d px wide at 360 px", w)
	}
	if unlabelled := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("input:not([type=hidden]),select,textarea")).filter(function(el){return !(el.labels && el.labels.length)}).map(function(el){return el.name||el.id})`); len(unlabelled) > 0 {
		t.Errorf("the number's page has inputs without a label: %v", unlabelled)
	}
}

func TestBrowserScheduledSMSCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	// The person types their own local time (here India's, +05:30 all year).
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
		t.Fatal(err)
	}
	kolkata := time.FixedZone("IST", 5*3600+1800)
	local := e.clock.Now().Add(2 * time.Hour).In(kolkata).Truncate(time.Minute)
	do(t, ctx, "open messages", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	do(t, ctx, "schedule", chromedp.SendKeys(field("phone"), "+15550100000"), chromedp.SendKeys(field("message"), "See you tomorrow"),
		chromedp.SetValue(field("send_at"), local.Format("2006-01-02T15:04")), chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	// A first message to the number opens its conversation, scheduled.
	waitFor(t, ctx, "the conversation", `document.getElementById("chat").dataset.phone === "+15550100000"`)
	waitFor(t, ctx, "scheduled", `!!document.querySelector('#thread .status[data-status="scheduled"]')`)
	qid := eval[string](t, ctx, `document.querySelector('#thread form.cancel input[name="queue_id"]').value`)
	if m, err := e.sms.Queued(t.Context(), 1, qid); err != nil || !m.SendAt.Equal(local) {
		t.Fatalf("send_at: got %v (%v), want the local time typed, %v", m.SendAt, err, local.UTC())
	}
	waitFor(t, ctx, "the live stream", `document.getElementById("chat").dataset.live === "true"`)
	eval[bool](t, ctx, `window.sameLoad = true`)
	do(t, ctx, "cancel", chromedp.Click(chromedp.CSS(`#thread form.cancel button`)))
	waitFor(t, ctx, "canceled", `!!document.querySelector('#thread .status[data-status="canceled"]') && !document.querySelector('#thread form.cancel')`)
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded to show the cancellation")
	}
	// Focus goes to the message cancelled, whose Cancel button is gone with
	// it: it fell to the page's top, and the keyboard started over.
	waitFor(t, ctx, "focus on the cancelled message", `document.activeElement === document.querySelector('#thread .msg[data-id] .status[data-status="canceled"]').closest(".msg")`)
}
