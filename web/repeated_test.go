package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsolePagesRefuseRepeatedParameters: a console address that gives
// a query parameter twice with different values (which the console's own
// links and forms never write) is the console's own 400 page naming it,
// on every page, signed in or not, instead of a page showing the first
// value alone; the console's script asking for JSON gets the API's body.
// The same value given twice is taken.
func TestConsolePagesRefuseRepeatedParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	for _, c := range []struct{ path, param string }{
		{"/console/messages?device=a&phone=%2B15551234567&device=b", "device"},
		{"/console/opt-outs?after=%2B15550000001&after=%2B15550000002", "after"},
		{"/console/devices?pairing=a&pairing=b", "pairing"},
		{"/console/settings?ok=Saved&ok=Other", "ok"},
		{"/verify-email?token=a&token=b", "token"},
		{"/console/signin?next=/console/devices&next=/console/team", "next"},
	} {
		p := b.get(c.path)
		if !p.errorPage(http.StatusBadRequest, "more than once, with different values; give it once.", "&#34;"+c.param+"&#34;") {
			t.Errorf("GET %s: %d %s, want the console's 400 page naming %q:\n%s", c.path, p.status, p.header.Get("Content-Type"), c.param, p.body)
		}
	}
	for _, path := range []string{"/console/messages?phone=%2B15551234567&phone=%2B15551234567", "/console/opt-outs?after=%2B15550000001&after=%2B15550000001"} {
		if p := b.get(path); p.status != http.StatusOK {
			t.Errorf("GET %s: %d, want the page: the same value given twice means one thing", path, p.status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/console/messages?phone=1&phone=2", nil)
	req.Header.Set("Accept", "application/json")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := read(t, res); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"error":"validation_failed"`) || !strings.Contains(p.body, `"field":"phone"`) {
		t.Errorf("GET /console/messages?phone=1&phone=2 asking for JSON: %d %s, want 400 naming phone", p.status, p.body)
	}
}

// TestConsolePagesRefuseMalformedParameters: a query pair the parser would
// drop (a % without two hex digits, or a ;) is the console's 400 page
// naming it, as the API refuses it; it was read as absent, so
// /console/devices?pairing=%zz showed the list without a word.
func TestConsolePagesRefuseMalformedParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	for _, c := range []struct{ path, param string }{
		{"/console/devices?pairing=%zz", "pairing"},
		{"/console/messages?phone=%2B1555123456%7", "phone"},
		{"/console/devices?a=1;b=2", "a"},
		{"/console/devices?a=%00&b=%zz", "b"}, // before a NUL in another, as the API
	} {
		p := b.get(c.path)
		if !p.errorPage(http.StatusBadRequest, "is not well formed", "&#34;"+c.param+"&#34;") {
			t.Errorf("GET %s: %d, want the console's 400 page naming %q:\n%s", c.path, p.status, c.param, p.body)
		}
	}
	if p := b.get("/console/messages?phone=%2B15551234567"); p.status != http.StatusOK {
		t.Errorf("a well-formed escape: %d, want the page", p.status)
	}
}
