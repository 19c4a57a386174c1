package httpapi_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/store"
)

// DELETE /company: only a signed-in admin closes the company (a member
// 403 forbidden, the API key 403 user_token_required), naming it exactly
// in confirm (400 naming the field otherwise); a live Stripe subscription,
// a checkout that can still be paid and one being opened refuse it (409
// conflict). Accepted (202), every credential of the company is dead
// before the answer (API key, access and refresh tokens, a reset link, a
// pairing code, the device token, the phone's link), the rest goes in the
// background, and the other company is as it was.
func TestOwnerClosesTheCompany(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme Closing", "owner@closing.test")
	m := usersJoin(t, e, a.access, "Mia", "mia@closing.test", "member")
	other := e.newCompany("Other Co", "who@other.test")
	reg := e.pairPhone(a.access, "close-phone")
	vp := e.runPhone(reg, "SIM1", false)
	e.pairPhone(other.access, "other-phone")
	// More messages than one step of the removal takes.
	for range 2 {
		e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("close-phone", 1000)}), http.StatusOK, "")
	}
	otherSent := e.do(call{method: "POST", path: "/chat/send-bulk", token: other.apiKey, body: bulkBody("other-phone", 3)})
	e.want(otherSent, http.StatusOK, "")
	pairing := e.do(call{method: "POST", path: "/device/pairing", token: a.access})
	e.want(pairing, http.StatusCreated, "")
	e.want(e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": a.email}}), http.StatusOK, "")
	resetToken := mailtest.LinkToken(waitForNth(t, e, a.email, 2).Text, "/reset-password")
	if resetToken == "" {
		t.Fatal("no reset link")
	}
	closeWith := func(token string, body any) resp {
		return e.do(call{method: "DELETE", path: "/company", token: token, body: body})
	}
	confirm := map[string]any{"confirm": "Acme Closing"}
	e.want(closeWith(m.access, confirm), http.StatusForbidden, "forbidden")
	e.want(closeWith(a.apiKey, confirm), http.StatusForbidden, "user_token_required")
	for _, body := range []any{map[string]any{}, map[string]any{"confirm": ""}, map[string]any{"confirm": "acme closing"}, map[string]any{"confirm": "Acme Closing "}, map[string]any{"confirm": "Other Co"}} {
		r := closeWith(a.access, body)
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "confirm" {
			t.Errorf("DELETE /company %v: field %q, want confirm", body, r.str("field"))
		}
	}
	e.want(closeWith(a.access, "{"), http.StatusBadRequest, "invalid_json")

	id := uint64(a.id)
	setSub := func(fn func(*store.Subscription)) {
		t.Helper()
		if _, err := e.store.UpdateSubscription(id, func(sub *store.Subscription) error { fn(sub); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	now := e.clock.Now()
	for _, c := range []struct {
		name string
		set  func(*store.Subscription)
	}{
		{"a live subscription", func(sub *store.Subscription) {
			sub.ProviderSubID, sub.Status, sub.CustomerID = "sub_live_1", "active", "cus_closing_1"
		}},
		{"a past_due subscription", func(sub *store.Subscription) { sub.Status = "past_due" }},
		{"a payable checkout", func(sub *store.Subscription) {
			sub.Status = "canceled"
			sub.Checkout = &store.Checkout{SessionID: "cs_open_1", URL: "https://checkout.stripe.com/c/pay/cs_open_1", PlanID: "pro", ExpiresAt: now.Add(20 * time.Hour)}
		}},
		{"a checkout being opened", func(sub *store.Subscription) {
			sub.Checkout = &store.Checkout{Claim: "claim-1", ClaimedAt: now}
		}},
	} {
		setSub(c.set)
		r := closeWith(a.access, confirm)
		if r.Status != http.StatusConflict || r.str("error") != "conflict" || r.str("message") == "" {
			t.Fatalf("DELETE /company with %s: %d %s, want 409 conflict", c.name, r.Status, r.Raw)
		}
		e.want(e.do(call{method: "GET", path: "/company", token: a.apiKey}), http.StatusOK, "")
	}
	// The claim lapsed (its request stopped midway): nothing refuses.
	setSub(func(sub *store.Subscription) {
		sub.Checkout = &store.Checkout{Claim: "claim-1", ClaimedAt: now.Add(-store.CheckoutClaimTTL - time.Second)}
	})

	r := closeWith(a.access, confirm)
	e.want(r, http.StatusAccepted, "")
	if r.Body["companyId"] != a.id || r.Body["closing"] != true || r.str("closingAt") == "" {
		t.Fatalf("DELETE /company answered %s", r.Raw)
	}
	// Dead before the answer.
	for name, token := range map[string]string{"API key": a.apiKey, "admin's access token": a.access, "member's access token": m.access} {
		if r := e.do(call{method: "GET", path: "/company", token: token}); r.Status != http.StatusUnauthorized || r.str("error") != "unauthorized" {
			t.Errorf("GET /company with the closed company's %s: %d %s, want 401", name, r.Status, r.Raw)
		}
	}
	if r := e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": a.refresh}}); r.Status != http.StatusUnauthorized {
		t.Errorf("refresh after the closing: %d %s, want 401", r.Status, r.Raw)
	}
	if r := e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": resetToken, "password": "Another-Horse-9"}}); r.Status != http.StatusBadRequest || r.str("error") != "invalid_token" {
		t.Errorf("a reset link after the closing: %d %s, want 400 invalid_token", r.Status, r.Raw)
	}
	if r := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": a.email, "password": a.password}}); r.Status != http.StatusUnauthorized {
		t.Errorf("login after the closing: %d %s, want 401", r.Status, r.Raw)
	}
	if r := e.do(call{method: "POST", path: "/device/register", body: phonesRegisterBody(pairing.str("pairing_code"), "close-phone-2")}); r.Status < 400 || r.Status >= 500 {
		t.Errorf("a pairing code after the closing: %d %s, want a 4xx", r.Status, r.Raw)
	}
	if r := e.do(call{method: "GET", path: "/device/ws", token: reg.DeviceToken}); r.Status != http.StatusUnauthorized {
		t.Errorf("the device token after the closing: %d %s, want 401", r.Status, r.Raw)
	}
	e.eventually("the closed company's phone is unlinked", func() bool { return !vp.Connected() && !linked(e.hub, "close-phone") })

	// The rest goes in the background.
	e.eventually("the closed company is removed", func() bool {
		_, err := e.store.Company(id)
		return errors.Is(err, store.ErrNotFound)
	})
	if ids, err := e.store.ClosingCompanies(); err != nil || len(ids) != 0 {
		t.Errorf("closing companies once removed: %v (%v)", ids, err)
	}
	if _, err := e.store.UserByEmail(a.email); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the owner once removed: %v, want ErrNotFound", err)
	}

	// The other company is as it was.
	e.want(e.do(call{method: "GET", path: "/company", token: other.access}), http.StatusOK, "")
	e.want(e.do(call{method: "GET", path: "/company", token: other.apiKey}), http.StatusOK, "")
	for _, q := range otherSent.Body["queueIds"].([]any) {
		e.want(e.do(call{method: "GET", path: "/chat/queue/" + q.(string), token: other.apiKey}), http.StatusOK, "")
	}
}
