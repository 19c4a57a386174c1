package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// postForm sends body as a plain form post (no JSON asked for, as a
// browser without the script), with the Content-Type lines given.
func (b *browser) postForm(path, body string, contentTypes ...string) page {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.e.url+path, strings.NewReader(body))
	for _, ct := range contentTypes {
		req.Header.Add("Content-Type", ct)
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return read(b.e.t, res)
}

// TestConsoleFormRefusesRepeatedFields: a console form post that gives a
// field twice with different values is the console's 400 page naming it,
// as an address that repeats a parameter is, before the session's token
// is checked: of two csrf fields the first alone was read, and of two
// phones the first was added. The lists of ticked boxes are lists, and
// the same value twice is one value.
func TestConsoleFormRefusesRepeatedFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	csrf := url.QueryEscape(b.csrf)
	for _, c := range []struct{ path, body, field string }{
		{"/console/opt-outs", "csrf=" + csrf + "&phone=%2B15550100001&phone=%2B15550100002", "phone"},
		{"/console/opt-outs", "csrf=" + csrf + "&csrf=forged&phone=%2B15550100001", "csrf"},
		{"/console/opt-outs", "csrf=forged&csrf=" + csrf + "&phone=%2B15550100001", "csrf"},
		{"/console/signin", "email=ada%40acme.test&email=bo%40acme.test&password=Correct1horse", "email"},
	} {
		p := b.postForm(c.path, c.body, "application/x-www-form-urlencoded")
		if !p.errorPage(http.StatusBadRequest, "more than once, with different values; give it once.", "&#34;"+c.field+"&#34;") {
			t.Errorf("POST %s %s: %d %s, want the console's 400 page naming %q:\n%s", c.path, c.body, p.status, p.header.Get("Content-Type"), c.field, p.body)
		}
	}
	// The script, asking for JSON, gets the API's body.
	p := b.post("/console/opt-outs", url.Values{"phone": {"+15550100001", "+15550100002"}})
	if p.status != http.StatusBadRequest || errField(t, p) != "phone" {
		t.Errorf("the script's post with two phones: %d %s, want 400 naming phone", p.status, p.body)
	}
	if list, err := e.sms.OptOuts(t.Context(), 1, "", 10); err != nil || len(list) != 0 {
		t.Fatalf("the refused posts listed %+v (%v)", list, err)
	}
	// The same value twice is one; ticked boxes are a list.
	if p := b.post("/console/opt-outs", url.Values{"csrf": {b.csrf, b.csrf}, "phone": {"+15550100001", "+15550100001"}}); p.status != http.StatusOK {
		t.Errorf("the same csrf and phone twice: %d %s", p.status, p.body)
	}
	if p := b.post("/console/pools", url.Values{"name": {"sales"}, "members": {"fp-1/SIM1", "fp-1/SIM2"}}); p.status != http.StatusOK {
		t.Errorf("a pool of two ticked members: %d %s", p.status, p.body)
	}
	if list, err := e.sms.OptOuts(t.Context(), 1, "", 10); err != nil || len(list) != 1 {
		t.Errorf("listed %+v (%v), want the one number", list, err)
	}
}

// TestConsoleFormRefusesRepeatedContentType: a console form post with two
// Content-Type lines that differ is the console's 400 page naming the
// header, as the API refuses it, and changes nothing: the form was read
// by the first line alone.
func TestConsoleFormRefusesRepeatedContentType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	body := "csrf=" + url.QueryEscape(b.csrf) + "&phone=%2B15550100001"
	p := b.postForm("/console/opt-outs", body, "application/x-www-form-urlencoded", "text/plain")
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "more than one Content-Type header") {
		t.Errorf("two Content-Type lines: %d %s, want the console's 400 page naming the header", p.status, p.body)
	}
	if list, err := e.sms.OptOuts(t.Context(), 1, "", 10); err != nil || len(list) != 0 {
		t.Fatalf("the refused post listed %+v (%v)", list, err)
	}
	p = b.postForm("/console/opt-outs", body, "application/x-www-form-urlencoded", "application/x-www-form-urlencoded")
	if p.status != http.StatusSeeOther {
		t.Errorf("the same Content-Type twice: %d %s, want the form's redirect", p.status, p.body)
	}
	if list, err := e.sms.OptOuts(t.Context(), 1, "", 10); err != nil || len(list) != 1 {
		t.Errorf("listed %+v (%v), want the one number", list, err)
	}
}
