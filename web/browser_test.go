package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/mail/mailtest"
)

// Browser tests: the flows in headless Chromium, driven from Go.

func TestBrowserSignUpVerifyAndSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := chrome(t)
	signup := map[string]string{"company.name": "Acme", "company.phone": "12345", "owner.firstName": "Ada",
		"owner.lastName": "Lovelace", "owner.email": "ada@acme.test", "owner.password": "Correct1horse", "password2": "Correct1horse"}
	do(t, ctx, "fill the sign-up form", append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.url + "/console/signup")},
		append(fill(signup), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))...)...)
	// The server's message shows beside the field it names, and nothing typed is lost.
	waitFor(t, ctx, "the phone error", `document.querySelector('[data-error-for="company.phone"]').textContent.length > 0`)
	if got := eval[string](t, ctx, `document.querySelector('[name="owner.email"]').value`); got != "ada@acme.test" {
		t.Errorf("after the error the e-mail field holds %q", got)
	}
	do(t, ctx, "fix the phone", chromedp.SetValue(field("company.phone"), "+14155550100"), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	waitText(t, ctx, "#banner", "Account created")

	tok := mailtest.LinkToken(e.inbox.WaitFor(t, "ada@acme.test", 20*time.Second).Text, "/verify-email")
	do(t, ctx, "verify", chromedp.Navigate(e.url+"/verify-email?token="+tok), chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	waitText(t, ctx, "#banner", "verified")
	// The page's script moves focus to the banner of an ok= page: typing
	// before it ran lost the keys after focus moved (the form was sent
	// with an e-mail address of one letter).
	waitFor(t, ctx, "the sign-in page's script", `document.readyState === "complete" && document.activeElement && document.activeElement.id === "banner"`)

	do(t, ctx, "sign in", append(fill(map[string]string{"email": "ada@acme.test", "password": "Correct1horse"}),
		chromedp.Click(chromedp.CSS(`main button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`svg.chart`)))...)
	waitText(t, ctx, "h1", "Overview")
}

func TestBrowserPairSendAndReceiveLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.timers.PairingPoll = 250 * time.Millisecond }) // the panel sees the phone sooner than its 1.5 s
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	// Pair a phone by the code the page shows; the panel turns into the device.
	do(t, ctx, "ask for a pairing code", chromedp.Navigate(e.url+"/console/devices"), chromedp.Click(chromedp.CSS(`main button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#pairing-code`)), chromedp.WaitVisible(chromedp.CSS(`svg.qr`)))
	code, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#pairing-code`)))
	if err != nil {
		t.Fatal(err)
	}
	ph := e.pairPhone(strings.TrimSpace(code), "fp-1", true)
	waitText(t, ctx, "#device-fp-1 [data-online]", "online")
	waitText(t, ctx, "#device-fp-1", "1.2.3")
	waitText(t, ctx, "#banner", "Phone fp-1 is paired.")

	// Send an SMS and watch it reach delivered without a reload.
	do(t, ctx, "open messages", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	waitFor(t, ctx, "the live stream", `document.getElementById("chat").dataset.live === "true"`)
	eval[bool](t, ctx, `window.sameLoad = true`)
	do(t, ctx, "send", chromedp.SendKeys(field("phone"), "+15550100000"), chromedp.SendKeys(field("message"), "Your code is 1234"),
		chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	// A first message to a number opens its conversation; the page stays live there.
	waitFor(t, ctx, "the conversation", `document.getElementById("chat").dataset.phone === "+15550100000"`)
	waitFor(t, ctx, "the live stream", `document.getElementById("chat").dataset.live === "true"`)
	eval[bool](t, ctx, `window.sameLoad = true`)
	do(t, ctx, "send again", chromedp.SendKeys(field("message"), "And again"), chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	waitFor(t, ctx, "delivered", `Array.from(document.querySelectorAll("#thread .msg.outbound")).some(function(m){return m.textContent.indexOf("And again")>=0 && m.querySelector('.status[data-status="delivered"]')})`)
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded to show the status")
	}

	// An inbound message appears without a reload.
	<-ph.Receive(proto.Inbound{ClientID: "in-1", Channel: proto.ChannelSMS, From: "+15550100000", Message: "Thanks, got it", SIMSlot: "SIM1"})
	waitText(t, ctx, "#thread .msg.inbound", "Thanks, got it")
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded to show the inbound message")
	}
	if os.Getenv("SIMRELAY_SCREENSHOTS") != "" {
		shot(t, ctx, filepath.Join("..", "docs", "console-messages.png"))
	}
}

func TestBrowserWebhookDeliveryInTheLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	var hits atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "add a webhook", chromedp.Navigate(e.url+"/console/webhooks"),
		chromedp.SendKeys(field("webhooks[0].url"), "ftp://nowhere"), chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
	waitFor(t, ctx, "the URL error", `document.querySelector('[data-error-for="webhooks[0].url"]').textContent.length > 0`)
	do(t, ctx, "fix the URL", chromedp.SetValue(field("webhooks[0].url"), receiver.URL+"/hook"), chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
	waitText(t, ctx, "#banner", "Webhooks saved")

	ph := e.pairPhone(e.pairingCode(key), "fp-1", false)
	<-ph.Receive(proto.Inbound{ClientID: "in-1", Channel: proto.ChannelSMS, From: "+15550100000", Message: "hello", SIMSlot: "SIM1"})
	poll.Until(t, "the receiver gets the event", func() bool { return hits.Load() > 0 })
	// The attempt is logged after the receiver answered: open the log once it is there.
	dev, err := e.store.Device("fp-1")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the attempt in the deliveries log", func() bool {
		logged, err := e.store.WebhookAttempts(dev.CompanyID, 0, 1)
		return err == nil && len(logged) > 0
	})
	do(t, ctx, "open the log", chromedp.Navigate(e.url+"/console/webhooks"))
	waitText(t, ctx, "#deliveries", "sms.received")
	waitText(t, ctx, "#deliveries .http-status", "204")
}

func TestBrowserMemberSeesNoAdminActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "invite", append(append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(e.url + "/console/team")},
		fill(map[string]string{"email": "mo@acme.test", "firstName": "Mo", "lastName": "Member"})...),
		chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))...)
	waitText(t, ctx, "#banner", "Invitation sent")
	waitText(t, ctx, "#users", "mo@acme.test")
	do(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`.signout button`)))
	// Not just any e-mail field: the team page's invite form has one too.
	waitFor(t, ctx, "the sign-in page", `location.pathname === "/console/signin" && document.readyState === "complete" && !!document.querySelector("[name=email]")`)

	tok := mailtest.LinkToken(e.inbox.WaitFor(t, "mo@acme.test", 20*time.Second).Text, "/reset-password")
	do(t, ctx, "set the password", chromedp.Navigate(e.url+"/reset-password?token="+tok),
		chromedp.SendKeys(field("password"), "Member1pass"), chromedp.SendKeys(field("password2"), "Member1pass"),
		chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	waitText(t, ctx, "#banner", "Password set")
	signInUI(t, ctx, e.url, "mo@acme.test", "Member1pass")
	for path, hidden := range map[string][]string{
		"/console/team":     {`#invite`, `form[action$="/remove"]`, `form[action$="/role"]`},
		"/console/settings": {`#api-key`, `form[action="/console/settings/api-key/rotate"]`, `form[action="/console/settings/close"]`},
		"/console/webhooks": {`form[action="/console/webhooks/secret/rotate"]`, `main form button[type=submit]`},
		"/console/billing":  {`form[action="/console/billing/subscribe"]`},
		"/console/opt-outs": {`#keywords`},
	} {
		do(t, ctx, "open "+path, chromedp.Navigate(e.url+path), chromedp.WaitVisible(chromedp.CSS(`h1`)))
		for _, sel := range hidden {
			if eval[bool](t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, sel)) {
				t.Errorf("%s shows %s to a member", path, sel)
			}
		}
	}
	do(t, ctx, "open the team", chromedp.Navigate(e.url+"/console/team"))
	waitText(t, ctx, "#users", "ada@acme.test") // the member sees the team, read only
}

func TestBrowserKeepsWhatWasTypedWhenTheSessionEndsOrTheServerIsGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "type an invitation", chromedp.Navigate(e.url+"/console/team"), chromedp.SendKeys(field("email"), "late@acme.test"),
		chromedp.SendKeys(field("firstName"), "Late"), chromedp.SendKeys(field("lastName"), "Comer"))
	if err := e.store.RevokeUserSessions(1); err != nil { // signed out elsewhere
		t.Fatal(err)
	}
	do(t, ctx, "submit", chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	waitText(t, ctx, "#banner", "session has expired")
	if got := eval[string](t, ctx, `document.querySelector('[name=email]').value`); got != "late@acme.test" {
		t.Errorf("after the session ended the field holds %q", got)
	}
	e.stop()
	do(t, ctx, "submit again", chromedp.Click(chromedp.CSS(`#invite button[type=submit]`)))
	waitText(t, ctx, "#banner", "could not be reached")
	if got := eval[string](t, ctx, `document.querySelector('[name=firstName]').value`); got != "Late" {
		t.Errorf("with the server gone the field holds %q", got)
	}
}

func TestBrowserNarrowScreenAndKeyboard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	ctx := chrome(t)
	do(t, ctx, "360 px wide", chromedp.EmulateViewport(360, 740))
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	for _, p := range signedInPages {
		do(t, ctx, "open "+p, chromedp.Navigate(e.url+p), chromedp.WaitVisible(chromedp.CSS(`h1`)))
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 360 {
			t.Errorf("%s is %d px wide at 360 px", p, w)
		}
		// Every input, select and textarea has a label.
		unlabelled := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("input:not([type=hidden]),select,textarea")).filter(function(el){return !(el.labels && el.labels.length)}).map(function(el){return el.name||el.id})`)
		if len(unlabelled) > 0 {
			t.Errorf("%s has inputs without a label: %v", p, unlabelled)
		}
	}
	// The first Tab lands on the skip link, which leads to the content.
	do(t, ctx, "tab", chromedp.Navigate(e.url+"/console/"), chromedp.WaitVisible(chromedp.CSS(`h1`)), chromedp.KeyEvent("\t"))
	if got := eval[string](t, ctx, `document.activeElement.className`); got != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", got)
	}
}
