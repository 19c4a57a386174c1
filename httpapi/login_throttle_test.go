package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// loginThrottleEnv is a server behind a trusted proxy on loopback, so that
// each request names its client address in X-Forwarded-For, as a proxy in
// front would: the per-address credential window (--rate-auth) never
// refuses here, and what refuses is the e-mail address's count.
func loginThrottleEnv(t *testing.T) *env {
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	return newEnv(t, func(c *httpapi.Config) { c.TrustedProxies = []*net.IPNet{loopback} })
}

// loginFrom is POST /auth/login from the nth client address.
func (e *env) loginFrom(n int, email, password string) resp {
	e.t.Helper()
	return e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": email, "password": password},
		header: map[string]string{"X-Forwarded-For": fmt.Sprintf("2001:db8:%x::1", n)}})
}

// wantThrottled fails unless r is the refusal of an e-mail address that had
// its failed logins: 429 rate_limited with a Retry-After of the window's
// rest (the clock stands still: the whole window).
func (e *env) wantThrottled(r resp, what string) {
	e.t.Helper()
	if r.Status != http.StatusTooManyRequests || r.str("error") != "rate_limited" || r.str("message") == "" {
		e.t.Fatalf("%s: got %d %s, want 429 rate_limited", what, r.Status, r.Raw)
	}
	if got, want := r.Header.Get("Retry-After"), fmt.Sprint(int(account.DefaultLoginRate.Window/time.Second)); got != want {
		e.t.Fatalf("%s: Retry-After %q, want %q", what, got, want)
	}
}

// Guesses at one account's password from many client addresses are bounded
// by the account's e-mail address: the 11th failure in 15 minutes, each
// from another address, is refused 429 without its password being checked,
// the right password too, however the address's case is spelled; an
// unknown address is answered the very same way, so the answers tell no
// account apart; and the count ends with its window.
func TestFailedLoginsBoundedPerEmail(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	limit := account.DefaultLoginRate.Limit
	bodies := map[string]string{}
	for _, email := range []string{acme.email, "nobody@acme.test"} {
		for i := range limit {
			spelled := email
			if i%2 == 1 {
				spelled = "  " + strings.ToUpper(email[:1]) + email[1:] // one account, one count
			}
			e.want(e.loginFrom(i, spelled, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
		}
		r := e.loginFrom(limit, email, "Wrong-Horse-9")
		e.wantThrottled(r, email+": failure "+fmt.Sprint(limit+1))
		bodies[email] = string(r.Raw)
	}
	if bodies[acme.email] != bodies["nobody@acme.test"] {
		t.Errorf("the refusals differ between an account and an unknown address:\n%s\n%s", bodies[acme.email], bodies["nobody@acme.test"])
	}
	e.wantThrottled(e.loginFrom(limit+1, acme.email, acme.password), "the right password once the failures are spent")
	// Another account is untouched.
	other := e.newCompany("Other", "bo@other.test")
	e.want(e.loginFrom(limit+2, other.email, other.password), http.StatusOK, "")

	e.clock.Advance(account.DefaultLoginRate.Window)
	e.want(e.loginFrom(limit+3, acme.email, acme.password), http.StatusOK, "")
	e.want(e.loginFrom(limit+4, "nobody@acme.test", "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
}

// One client counts at most its share (account.ClientShare) of an e-mail
// address's failures: past it its own tries are refused, and count no more,
// so that a script retrying a stale password, or one guesser, cannot keep
// the account's owner out; it takes the failures of Limit/ClientShare + 1
// clients to spend the address's limit.
func TestOneClientCannotSpendAnAccountsFailures(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	for range account.ClientShare {
		e.want(e.loginFrom(1, acme.email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	}
	for i := range 20 {
		e.wantThrottled(e.loginFrom(1, acme.email, "Wrong-Horse-9"), fmt.Sprintf("the client's failure %d past its share", i+1))
	}
	e.want(e.loginFrom(2, acme.email, acme.password), http.StatusOK, "")
	// Other clients spend the rest of the address's limit: then the owner
	// is refused too, as before.
	limit := account.DefaultLoginRate.Limit
	client := 10
	for spent := account.ClientShare; spent < limit; spent++ {
		e.want(e.loginFrom(client+(spent-account.ClientShare)/account.ClientShare, acme.email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	}
	e.wantThrottled(e.loginFrom(99, acme.email, "Wrong-Horse-9"), "a failure past the address's limit")
	e.wantThrottled(e.loginFrom(2, acme.email, acme.password), "the owner once the address's limit is spent")
}

// A right login neither counts as a failure nor wipes the failures before
// it: an owner who signs in between a guesser's tries gives the guesser no
// fresh allowance.
func TestRightLoginLeavesFailuresCounted(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	limit := account.DefaultLoginRate.Limit
	for i := range limit - 1 {
		e.want(e.loginFrom(i, acme.email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	}
	for i := range 3 {
		e.want(e.loginFrom(100+i, acme.email, acme.password), http.StatusOK, "")
	}
	e.want(e.loginFrom(limit, acme.email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
	e.wantThrottled(e.loginFrom(limit+1, acme.email, "Wrong-Horse-9"), "the failure after the owner's logins")
}

// The console's sign-in counts in the same window as the API's login: the
// failures of both add up, and a sign-in over them is refused with the
// contract's error body and Retry-After (to the console's script; a plain
// form post goes back to the sign-in page with the message).
func TestConsoleSignInSharesFailedLogins(t *testing.T) {
	t.Parallel()
	e := loginThrottleEnv(t)
	acme := e.newCompany("Acme", "ana@acme.test")
	limit := account.DefaultLoginRate.Limit
	signin := func(n int, password string) resp {
		h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
			"Cookie": "simrelay_csrf=form-token-of-this-test", "X-CSRF-Token": "form-token-of-this-test",
			"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", n)}
		return e.do(call{method: "POST", path: "/console/signin", header: h,
			body: url.Values{"email": {acme.email}, "password": {password}, "csrf": {"form-token-of-this-test"}}.Encode()})
	}
	for i := range limit {
		if i%2 == 0 {
			e.want(e.loginFrom(i, acme.email, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
		} else {
			e.want(signin(i, "Wrong-Horse-9"), http.StatusUnauthorized, "invalid_credentials")
		}
	}
	e.wantThrottled(signin(limit, acme.password), "the console's sign-in with the right password")
	// A plain form post goes back to the sign-in page with the message.
	req, err := http.NewRequest(http.MethodPost, e.url+"/console/signin", strings.NewReader(
		url.Values{"email": {acme.email}, "password": {acme.password}, "csrf": {"form-token-of-this-test"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", "simrelay_csrf=form-token-of-this-test")
	req.Header.Set("X-Forwarded-For", "198.51.100.99")
	noFollow := &http.Client{Transport: testhttp.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != http.StatusSeeOther || back.Path != "/console/signin" ||
		!strings.HasPrefix(back.Query().Get("err"), "Too many failed logins for this e-mail address") {
		t.Fatalf("a plain form post over the failures: %d to %q; want 303 back to the sign-in page with the refusal's message", res.StatusCode, res.Header.Get("Location"))
	}
	for _, c := range res.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "simrelay_session=") {
			t.Fatalf("a plain form post over the failures set a session cookie: %s", c)
		}
	}
}
