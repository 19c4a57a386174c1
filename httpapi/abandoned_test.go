package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail/mailtest"
)

// A stranger's sign-up holds the address (another sign-up with it is 409)
// until the prune removes it, the owner never having verified it; then the
// address signs up again (201) under a new company. A verified sign-up of
// the same age stays and signs in.
func TestAbandonedSignupFreesTheAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	const victim, owner = "victim@acme.test", "owner@acme.test"
	first := e.do(call{method: "POST", path: "/auth/signup", body: signupBody(victim, goodPassword)})
	e.want(first, http.StatusCreated, "")
	e.want(e.do(call{method: "POST", path: "/auth/signup", body: signupBody(victim, goodPassword)}), http.StatusConflict, "conflict")
	e.want(e.do(call{method: "POST", path: "/auth/signup", body: signupBody(owner, goodPassword)}), http.StatusCreated, "")
	tok := mailtest.LinkToken(e.inbox.WaitFor(t, owner, 10*time.Second).Text, "/verify-email")
	e.want(e.do(call{method: "POST", path: "/auth/verify-email", body: map[string]any{"token": tok}}), http.StatusOK, "")

	// Seven days after the verification link expired, and an hour.
	e.clock.Advance(8*24*time.Hour + time.Hour)
	now := e.clock.Now()
	n, _, err := e.store.PruneAbandonedSignups(now.Add(-8*24*time.Hour), now, 0, 100)
	if err != nil || n != 1 {
		t.Fatalf("PruneAbandonedSignups: removed %d (%v), want 1", n, err)
	}
	e.want(e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": victim, "password": goodPassword}}), http.StatusUnauthorized, "invalid_credentials")
	again := e.do(call{method: "POST", path: "/auth/signup", body: signupBody(victim, goodPassword)})
	e.want(again, http.StatusCreated, "")
	if again.Body["companyId"] == first.Body["companyId"] || again.Body["userId"] == first.Body["userId"] {
		t.Fatalf("the new sign-up got the removed ids: %s after %s", again.Raw, first.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": owner, "password": goodPassword}}), http.StatusOK, "")
}
