package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"
)

var nextField = regexp.MustCompile(`name="next" value="([^"]*)"`)

// TestSignInNextStaysUnderTheConsole: signing in goes back to `next` only
// when it is a page under /console/ as a browser reads the address. A
// dot segment, written plainly or percent-encoded (%2e, which browsers
// read as a dot), or a tab or newline, which browsers drop from an
// address before reading it, took the person out of the console
// (/console/../x opened /x), and the sign-in page kept such a `next` in
// its form. Each goes to /console/ instead, from the form post (the
// redirect), from the script's post (the JSON `redirect`) and in the
// sign-in page's own field.
func TestSignInNextStaysUnderTheConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	for _, next := range []string{
		"/console/../evil",
		"/console/../../openapi.json",
		"/console/./../x",
		"/console/%2e%2e/%2e%2e/evil.com",
		"/console/%2E%2e/x",
		"/console/.%2e/x",
		"/console/devices/../../x",
		"/console/..\t/\t/evil.com",
		"/console/.\n./x",
		"/console/%2e./x?next=/console/",
		"/console/..",
		"/console/.",
		"//evil.com",
		"/console/\\evil.com",
		"https://evil.com/console/",
	} {
		b := e.browser()
		p := b.get("/console/signin?next=" + url.QueryEscape(next))
		if m := nextField.FindStringSubmatch(p.body); m == nil || html.UnescapeString(m[1]) != "/console/" {
			t.Errorf("sign-in page with next %q: its form's next is %v, want /console/", next, m)
		}
		anon := tokenOf(t, p)
		form := url.Values{"csrf": {anon}, "email": {"ada@acme.test"}, "password": {"Correct1horse"}, "next": {next}}
		if got := b.postForm("/console/signin", form.Encode(), "application/x-www-form-urlencoded"); got.status != http.StatusSeeOther || got.location != "/console/" {
			t.Errorf("form sign-in with next %q: %d to %q, want 303 to /console/", next, got.status, got.location)
		}
		b = e.browser()
		form.Set("csrf", tokenOf(t, b.get("/console/signin")))
		got := b.post("/console/signin", form)
		var out struct {
			Redirect string `json:"redirect"`
		}
		if err := json.Unmarshal([]byte(got.body), &out); err != nil || got.status != http.StatusOK || out.Redirect != "/console/" {
			t.Errorf("script sign-in with next %q: %d redirect %q (%v), want /console/", next, got.status, out.Redirect, err)
		}
	}
	// A page under the console, with its query, is kept.
	for _, next := range []string{"/console/devices", "/console/messages?device=fp-1&phone=%2B15550100001", "/console/team"} {
		b := e.browser()
		form := url.Values{"csrf": {tokenOf(t, b.get("/console/signin"))}, "email": {"ada@acme.test"}, "password": {"Correct1horse"}, "next": {next}}
		if got := b.postForm("/console/signin", form.Encode(), "application/x-www-form-urlencoded"); got.status != http.StatusSeeOther || got.location != next {
			t.Errorf("form sign-in with next %q: %d to %q, want 303 there", next, got.status, got.location)
		}
	}
}
