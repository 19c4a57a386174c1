package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestEveryCSRFTokenGivenMustBeTheSessions: a post may carry its token in
// the field csrf, the header X-CSRF-Token, or both (the script sends both),
// and every one it carries must be the session's. The header was read
// alone: a wrong field beside the right header was dropped without a word
// and the action done, while the right field beside a wrong header was
// refused; and of two header lines the first alone was read. Each such
// post is 403 now and changes nothing, before sign-in too.
func TestEveryCSRFTokenGivenMustBeTheSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	send := func(b *browser, path string, form url.Values, headers ...string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		for _, h := range headers {
			req.Header.Add("X-CSRF-Token", h)
		}
		res, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return read(t, res).status
	}
	good := b.csrf
	for i, c := range []struct {
		field   string
		headers []string
	}{
		{"forged", []string{good}},
		{good, []string{"forged"}},
		{"", []string{good, "forged"}},
		{"", []string{"forged", good}},
		{good, []string{good, "forged"}},
	} {
		form := url.Values{"phone": {"+1555010000" + string(rune('0'+i))}}
		if c.field != "" {
			form.Set("csrf", c.field)
		}
		if got := send(b, "/console/opt-outs", form, c.headers...); got != http.StatusForbidden {
			t.Errorf("field %q, headers %q: %d, want 403", c.field, c.headers, got)
		}
	}
	if p := b.get("/console/opt-outs"); strings.Contains(p.body, "1555010000") {
		t.Fatalf("a refused post added a number to the opt-out list")
	}
	// The right token in the field, the header or both, and an empty
	// field beside the right header, are taken.
	for i, c := range []struct {
		field   string
		headers []string
	}{
		{good, nil},
		{"", []string{good}},
		{good, []string{good}},
		{good, []string{good, good}},
	} {
		form := url.Values{"phone": {"+1555010100" + string(rune('0'+i))}}
		form.Set("csrf", c.field)
		if got := send(b, "/console/opt-outs", form, c.headers...); got != http.StatusOK {
			t.Errorf("field %q, headers %q: %d, want 200", c.field, c.headers, got)
		}
	}

	// Before sign-in: the pre-sign-in token, every one given.
	anonB := e.browser()
	anon := tokenOf(t, anonB.get("/console/signin"))
	creds := url.Values{"csrf": {"forged"}, "email": {"ada@acme.test"}, "password": {"Correct1horse"}}
	if got := send(anonB, "/console/signin", creds, anon); got != http.StatusForbidden {
		t.Errorf("sign-in with a wrong field beside the right header: %d, want 403", got)
	}
	creds.Set("csrf", anon)
	if got := send(anonB, "/console/signin", creds, anon); got != http.StatusOK {
		t.Errorf("sign-in with the right field and header: %d, want 200", got)
	}
}
