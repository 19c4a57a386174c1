package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// consoleForm posts a console form as the console's JavaScript does, with
// the pre-sign-in CSRF cookie and its token.
func (e *env) consoleForm(path string, form url.Values) resp {
	e.t.Helper()
	return e.do(call{method: "POST", path: path, body: form.Encode(), header: map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
		"Cookie": "simrelay_csrf=form-token-of-this-test", "X-CSRF-Token": "form-token-of-this-test"}})
}

// TestCredentialLimitFollowsTheServedPath: a path spelled another way
// (percent-encoded letters, dot segments, doubled slashes) is the route it
// names, so it spends and obeys the same credential window: once the window
// is spent no spelling signs in, creates an account or sends a reset e-mail.
func TestCredentialLimitFollowsTheServedPath(t *testing.T) {
	e := newEnv(t)
	c := e.newCompany("Acme", "owner@acme.test")

	// Each guess at another address, so that what refuses is the client's
	// credential window, not an address's failed logins.
	limited := false
	for i := 0; i < 20 && !limited; i++ {
		r := e.consoleForm("/console/signin", url.Values{"email": {fmt.Sprintf("guess-%d@acme.test", i)}, "password": {"Wrong-Horse-9"}})
		limited = r.Status == http.StatusTooManyRequests
	}
	if !limited {
		t.Fatal("20 wrong passwords on /console/signin: never 429")
	}
	mails, err := e.store.Mails(false)
	if err != nil {
		t.Fatal(err)
	}

	right := url.Values{"email": {c.email}, "password": {c.password}}
	forgot := url.Values{"email": {c.email}}
	signup := url.Values{"company.name": {"Other"}, "company.phone": {"+15550100001"}, "company.country": {"us"},
		"owner.firstName": {"Eve"}, "owner.lastName": {"Else"}, "owner.email": {"eve@other.test"},
		"owner.password": {goodPassword}, "password2": {goodPassword}}
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/console/%73ignin", right},
		{"/console/%73%69%67%6E%69%6E", right},
		{"/console/%66orgot-password", forgot},
		{"/console/%73ignup", signup},
		{"/console/./signin", right},         // redirected (308) to /console/signin
		{"/console//signin", right},          // likewise
		{"/console/static/../signin", right}, // not a static file: the sign-in
		{"/console/static/%2e%2e/signin", right},
		{"/%76erify-email", url.Values{"token": {"x"}}},
		{"/reset-%70assword", url.Values{"token": {"x"}, "password": {goodPassword}, "password2": {goodPassword}}},
	} {
		r := e.consoleForm(tc.path, tc.form)
		if r.Status != http.StatusTooManyRequests {
			t.Errorf("POST %s after the window was spent: got %d, want 429; body %s", tc.path, r.Status, r.Raw)
		}
	}
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/auth/%6Cogin", map[string]any{"email": c.email, "password": c.password}},
		{"/auth/%66orgot-password", map[string]any{"email": c.email}},
		{"/auth/./forgot-password", map[string]any{"email": c.email}},
		{"/%61uth/signup", map[string]any{}},
	} {
		r := e.do(call{method: "POST", path: tc.path, body: tc.body})
		if r.Status != http.StatusTooManyRequests {
			t.Errorf("POST %s after the window was spent: got %d, want 429; body %s", tc.path, r.Status, r.Raw)
		}
	}
	// Other spellings are other paths, which serve no form.
	for _, path := range []string{"/console/signin/", "/console/SIGNIN", "/Console/signin", "/console/signin%3F"} {
		if r := e.consoleForm(path, right); r.Status != http.StatusNotFound {
			t.Errorf("POST %s: got %d, want 404; body %.200s", path, r.Status, r.Raw)
		}
	}
	after, err := e.store.Mails(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(mails) {
		t.Errorf("the outbox went from %d to %d mails while the credential window was spent", len(mails), len(after))
	}
}

// TestEncodedSlashIsNoRoute: %2F would split a segment in two for one
// reader and not for another; no route takes one.
func TestEncodedSlashIsNoRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/console%2Fsignin", "/console/signin%2F", "/auth%2flogin", "/console/static%2F..%2Fsignin"} {
		e.want(e.do(call{method: "POST", path: path, body: map[string]any{}}), http.StatusNotFound, "not_found")
	}
}

// TestPathIsDecodedOnce: a path parameter is read decoded exactly once, so
// an encoded percent sign stays a percent sign: /opt-outs/%252B1555...
// names the number "%2B1555...", which is no number, not "+1555...".
func TestPathIsDecodedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.test")
	e.want(e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": "+15550000001"}}), http.StatusCreated, "")
	// "%2B15550000001" is no number, so it names an entry as the list shows
	// it, and there is none such.
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%252B15550000001", token: a.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%2B15550000001", token: a.apiKey}), http.StatusOK, "")
}

// The answers made before routing (an encoded slash, a path redirected to
// its clean form, a method on an operator route) are unknown routes'
// answers, and carry the RateLimit-* headers every counted answer carries:
// counted in the caller's window like /nowhere. An operator route's
// answer without them would tell it from an unknown route.
func TestPreRoutingAnswersAreCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAdminToken)
	c := e.newCompany("Acme", "owner@acme.test")
	noFollow := &http.Client{Transport: testhttp.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/nowhere", http.StatusNotFound},
		{"GET", "/device/a%2Fb", http.StatusNotFound},
		{"PATCH", "/admin/backup", http.StatusNotFound},
		{"OPTIONS", "/admin/backup", http.StatusNotFound},
		{"GET", "/device//list", http.StatusPermanentRedirect},
		// Redirected as before: the page it leads to refuses the NUL.
		{"GET", "/console//signin?x=%00", http.StatusPermanentRedirect},
	} {
		req, err := http.NewRequest(tc.method, e.url+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		remaining := res.Header.Get("RateLimit-Remaining")
		if res.StatusCode != tc.status || res.Header.Get("RateLimit-Limit") == "" || remaining != strconv.Itoa(99-i) {
			t.Errorf("%s %s: got %d with RateLimit-Limit %q, -Remaining %q; want %d, counted as the request %d of the window",
				tc.method, tc.path, res.StatusCode, res.Header.Get("RateLimit-Limit"), remaining, tc.status, i+1)
		}
	}
}
