package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/mail/mailtest"
)

// A reset is what a user does when someone else may hold their session:
// every access token issued before it stops, not only the refresh tokens,
// while the tokens of a login after it work.
func TestResetEndsEarlierAccessTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	r := e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": c.refresh}})
	e.want(r, http.StatusOK, "")
	refreshed := r.str("accessToken")
	e.want(e.do(call{method: "GET", path: "/users/me", token: c.access}), http.StatusOK, "")

	e.want(e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": c.email}}), http.StatusOK, "")
	tok := mailtest.LinkToken(waitForNth(t, e, c.email, 2).Text, "/reset-password")
	if tok == "" {
		t.Fatal("no reset link")
	}
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": "new password 2"}}), http.StatusOK, "")

	for name, old := range map[string]string{"login's": c.access, "refreshed": refreshed} {
		if r := e.do(call{method: "GET", path: "/users/me", token: old}); r.Status != http.StatusUnauthorized || r.str("error") != "unauthorized" {
			t.Errorf("%s access token after the reset: got %d %s, want 401 unauthorized", name, r.Status, r.Raw)
		}
	}
	access, refresh := e.login(c.email, "new password 2")
	e.want(e.do(call{method: "GET", path: "/users/me", token: access}), http.StatusOK, "")
	r = e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": refresh}})
	e.want(r, http.StatusOK, "")
	e.want(e.do(call{method: "GET", path: "/users/me", token: r.str("accessToken")}), http.StatusOK, "")
}

// A user who asked twice and set the password through one link leaves no
// other live link in the mailbox: the earlier links are spent with it, and
// a link asked for after the reset works.
func TestResetEndsEarlierResetLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	forgot := func(n int) string {
		t.Helper()
		e.want(e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": c.email}}), http.StatusOK, "")
		tok := mailtest.LinkToken(waitForNth(t, e, c.email, n).Text, "/reset-password")
		if tok == "" {
			t.Fatal("no reset link")
		}
		return tok
	}
	first, second := forgot(2), forgot(3)
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": second, "password": "new password 2"}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": first, "password": "new password 3"}}), http.StatusBadRequest, "invalid_token")
	e.login(c.email, "new password 2")

	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": forgot(4), "password": "new password 4"}}), http.StatusOK, "")
	e.login(c.email, "new password 4")
}

// The credential routes count per client address, and addresses are
// cheap: an account gets at most account.ResetMailsPerHour reset mails an
// hour, whoever asks (the test's limits are lifted, as if each request came
// from another address), and the answer over it is the same.
func TestResetMailsPerAccountAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test") // its verification mail is the first
	forgot := func() resp {
		t.Helper()
		r := e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": c.email}})
		e.want(r, http.StatusOK, "")
		return r
	}
	first := forgot()
	for i := 2; i <= account.ResetMailsPerHour; i++ {
		forgot()
	}
	waitForNth(t, e, c.email, 1+account.ResetMailsPerHour)
	if over := forgot(); over.str("message") != first.str("message") {
		t.Errorf("the answer over the bound: %s, want the same as %s", over.Raw, first.Raw)
	}

	// An hour later the account gets mail again. The links of the hour
	// before have expired by then, so the next mail's link working shows it
	// is the new one: the request over the bound sent nothing.
	e.clock.Advance(time.Hour + time.Second)
	forgot()
	tok := mailtest.LinkToken(waitForNth(t, e, c.email, 2+account.ResetMailsPerHour).Text, "/reset-password")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": "new password 2"}}), http.StatusOK, "")
}
