package web_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/channel"
)

// refusedPlainPost submits the form sel with scripts off, with the values
// the script set, and waits for the page the refusal came back to.
func refusedPlainPost(t *testing.T, ctx context.Context, sel, set string) {
	t.Helper()
	eval[bool](t, ctx, `(function(){`+set+`;window.before=true;document.querySelector(`+jsString(sel)+`).submit();return true})()`)
	waitFor(t, ctx, "the page of the refusal", `!window.before && document.readyState === "complete" && location.search.indexOf("err=") >= 0`)
}

// TestBrowserPlainRefusalKeepsALeadingLineBreak: a refused plain post of
// the send box and of a number's send form comes back with its text as
// typed, a line break it starts with included: the HTML parser drops the
// first line break after <textarea>, and the page wrote the text right
// after it, so the text came back without it.
func TestBrowserPlainRefusalKeepsALeadingLineBreak(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, false)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	ctx := chrome(t)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	const text = "\n\nAfter two line breaks\nand one more\n"

	do(t, ctx, "open the messages", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	// Send at more than 30 days ahead: refused.
	refusedPlainPost(t, ctx, "#send", `document.getElementById("phone").value="+15550100000";document.getElementById("message").value=`+jsString(text)+
		`;document.getElementById("send_at").value="2031-05-04T10:30"`)
	if got := eval[string](t, ctx, `document.getElementById("message").value`); got != text {
		t.Errorf("the send box came back holding %q, want %q", got, text)
	}

	do(t, ctx, "open the number", chromedp.Navigate(e.url+"/console/numbers/whatsapp/"+wa), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	// Media over http: refused.
	refusedPlainPost(t, ctx, "#agent-send", `document.getElementById("to").value="+15550100999";document.getElementById("type").value="image";`+
		`document.getElementById("media_url").value="http://example.com/a.jpg";document.getElementById("content").value=`+jsString(text))
	if got := eval[string](t, ctx, `document.getElementById("content").value`); got != text {
		t.Errorf("the number's send form came back holding %q, want %q", got, text)
	}
	// Nothing typed, the box is empty: the line break written after the
	// tag is no part of its value.
	do(t, ctx, "open the number again", chromedp.Navigate(e.url+"/console/numbers/whatsapp/"+wa), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	if got := eval[string](t, ctx, `document.getElementById("content").value`); got != "" {
		t.Errorf("an empty send form holds %q", got)
	}
}

// TestBrowserPlainRefusalKeepsTheWebhookRows: a refused plain post of the
// webhooks form comes back with its rows as they were typed, the stored
// entry's changes and the new row alike: the rows came back as the store
// has them, what was typed lost. A URL's user name and password, which
// the service refuses, are not kept.
func TestBrowserPlainRefusalKeepsTheWebhookRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	if p := b.post("/console/webhooks", url.Values{"rows": {"1"}, "webhooks[0].url": {"https://hooks.example.com/one"}}); p.status != http.StatusOK {
		t.Fatalf("save an entry: %d %s", p.status, p.body)
	}
	ctx := chrome(t)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the webhooks", chromedp.Navigate(e.url+"/console/webhooks"), chromedp.WaitVisible(field("webhooks[1].url")))
	box := func(row, name, value string) string {
		return `document.querySelector('[name="webhooks[` + row + `].` + name + `"][value="` + value + `"]')`
	}
	refusedPlainPost(t, ctx, "main form", `var f=function(n){return document.querySelector('[name="'+n+'"]')};`+
		`f("webhooks[0].url").value="https://hooks.example.com/changed";f("webhooks[0].devices").value="fp-1,fp-9";`+
		`f("webhooks[0].active").value="false";`+box("0", "sims", "1")+`.checked=true;`+box("0", "events", "message.failed")+`.checked=true;`+
		`f("webhooks[1].url").value="https://ada:hunter2@hooks.example.com/new";f("webhooks[1].wa_numbers").value="+15550100001";`+
		box("1", "channels", "whatsapp")+`.checked=true;`+box("1", "events", "sms.received")+`.checked=false`)
	if banner := eval[string](t, ctx, `document.getElementById("banner").textContent`); !strings.Contains(banner, "user name or password") {
		t.Fatalf("refused with %q, want the URL's password", banner)
	}
	val := func(n string) string { return eval[string](t, ctx, `document.querySelector('[name="`+n+`"]').value`) }
	ticked := func(row, name, value string) bool { return eval[bool](t, ctx, box(row, name, value)+`.checked`) }
	for _, c := range []struct{ got, want string }{
		{val("webhooks[0].url"), "https://hooks.example.com/changed"}, {val("webhooks[0].devices"), "fp-1,fp-9"},
		{val("webhooks[0].active"), "false"}, {val("webhooks[1].url"), "https://hooks.example.com/new"},
		{val("webhooks[1].wa_numbers"), "+15550100001"},
	} {
		if c.got != c.want {
			t.Errorf("a field came back holding %q, want %q", c.got, c.want)
		}
	}
	if !ticked("0", "sims", "1") || ticked("0", "sims", "0") || !ticked("0", "events", "message.failed") || !ticked("0", "events", "sms.received") ||
		!ticked("1", "channels", "whatsapp") || ticked("1", "channels", "sms") || ticked("1", "events", "sms.received") || !ticked("1", "events", "whatsapp.received") {
		t.Error("the boxes came back otherwise than ticked")
	}
	if got := eval[string](t, ctx, `document.querySelector('[name="webhooks[0].id"]').value`); got == "" {
		t.Error("the stored entry's row came back without its id")
	}
	// Once: the page's next load draws the rows as stored.
	do(t, ctx, "open the webhooks again", chromedp.Navigate(e.url+"/console/webhooks"), chromedp.WaitVisible(field("webhooks[1].url")))
	if got, got1 := val("webhooks[0].url"), val("webhooks[1].url"); got != "https://hooks.example.com/one" || got1 != "" {
		t.Errorf("the next load shows %q and %q, want the stored entry and an empty row", got, got1)
	}
}

// typedPayload is what a response's typed cookie holds, decoded ("" when
// none was set).
func typedPayload(t *testing.T, h http.Header) string {
	t.Helper()
	res := http.Response{Header: h}
	for _, ck := range res.Cookies() {
		if ck.Name == "simrelay_typed" && ck.Value != "" {
			payload, _, _ := strings.Cut(ck.Value, ".")
			js, err := base64.RawURLEncoding.DecodeString(payload)
			if err != nil {
				t.Fatal(err)
			}
			return string(js)
		}
	}
	return ""
}

// The webhooks form's cookie keeps its rows whole, the row the error names
// first: a form too long for the cookie comes back with that row and those
// that fit after it, the others as stored. It never holds the signing secret (no field of the
// form), nor a password typed in a URL.
func TestPlainPostRefusalKeepsTheWebhookRowOfTheError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	long := func(s string) string { return "https://hooks.example.com/" + s + "/" + strings.Repeat("x", 1900) }
	if p := b.post("/console/webhooks", url.Values{"rows": {"2"}, "webhooks[0].url": {long("a")}, "webhooks[1].url": {long("b")}}); p.status != http.StatusOK {
		t.Fatalf("save two entries: %d %s", p.status, p.body)
	}
	page := b.get("/console/webhooks").body
	ids := regexp.MustCompile(`name="webhooks\[\d\]\.id" value="(\d+)"`).FindAllStringSubmatch(page, -1)
	secret := regexp.MustCompile(`<code id="signing-secret">([^<]+)</code>`).FindStringSubmatch(page)
	if len(ids) != 2 || secret == nil {
		t.Fatalf("the page lists %d entries and secret %v", len(ids), secret)
	}
	form := url.Values{"rows": {"3"}, "csrf": {b.csrf},
		"webhooks[0].id": {ids[0][1]}, "webhooks[0].url": {long("a2")}, "webhooks[0].active": {"true"},
		"webhooks[1].id": {ids[1][1]}, "webhooks[1].url": {long("b2")}, "webhooks[1].active": {"true"},
		"webhooks[2].url": {"https://ada:hunter2@hooks.example.com/c"}, "webhooks[2].devices": {"fp-1"}, "webhooks[2].active": {"true"}}
	p := b.postForm("/console/webhooks", form.Encode(), "application/x-www-form-urlencoded")
	kept := typedPayload(t, p.header)
	if p.status != http.StatusSeeOther || kept == "" {
		t.Fatalf("refused %d with a cookie %q", p.status, kept)
	}
	if strings.Contains(kept, "hunter2") || strings.Contains(kept, secret[1]) || strings.Contains(kept, "/b2/") {
		t.Errorf("the cookie holds a password, the secret or a row that did not fit: %.300s", kept)
	}
	// Each row's id once, its mark: the cookie's room is for what was typed.
	if n := strings.Count(kept, `:["`+ids[0][1]+`"]`); n != 1 {
		t.Errorf("the cookie holds the first row's id %d times: %.300s", n, kept)
	}
	// The row of the error and the first fit; the second does not, and
	// comes back as stored, whole.
	back := b.get(p.location).body
	if !strings.Contains(back, `name="webhooks[2].url" type="url" value="https://hooks.example.com/c"`) || !strings.Contains(back, `name="webhooks[2].devices" value="fp-1"`) ||
		!strings.Contains(back, `name="webhooks[0].url" type="url" value="`+long("a2")+`"`) || !strings.Contains(back, `name="webhooks[1].url" type="url" value="`+long("b")+`"`) {
		t.Errorf("the page came back without the row of the error, or without the others as typed and stored")
	}
}
