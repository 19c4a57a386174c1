package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail/mailtest"
)

// A pairing code is its maker's: once the user who made it is removed from
// the company, it pairs no phone, as their tokens and sessions stop working
// at once. A member made a code and was removed: the code still paired a
// device into the company for the rest of its ten minutes.
func TestPairingCodeOfARemovedUserPairsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	r := e.do(call{method: "POST", path: "/users", token: a.apiKey, body: map[string]any{"firstName": "Mo", "lastName": "Ng", "email": "mo@acme.test", "role": "member"}})
	e.want(r, http.StatusCreated, "")
	memberID := numberString(r.Body["id"].(float64))
	link := mailtest.LinkToken(e.inbox.WaitFor(t, "mo@acme.test", 10*time.Second).Text, "/reset-password")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": link, "password": goodPassword}}), http.StatusOK, "")
	mo, _ := e.login("mo@acme.test", goodPassword)

	code := func(token string) string {
		r := e.do(call{method: "POST", path: "/device/pairing", token: token})
		e.want(r, http.StatusCreated, "")
		return r.str("pairing_code")
	}
	register := func(code, fp string) error {
		_, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{PairingCode: code, DeviceFingerprint: fp, AppVersion: "test"})
		return err
	}
	kept, gone := code(mo), code(mo)
	if err := register(kept, "before"); err != nil {
		t.Fatalf("the member's code, the member still there: %v", err)
	}
	e.want(e.do(call{method: "DELETE", path: "/users/" + memberID, token: a.apiKey}), http.StatusOK, "")

	err := register(gone, "after")
	var ce *client.APIError
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Code != "invalid_token" || ce.Field != "pairing_code" {
		t.Fatalf("the removed member's code: got %v, want 400 invalid_token on pairing_code", err)
	}
	list := e.do(call{method: "GET", path: "/device/list", token: a.apiKey})
	e.want(list, http.StatusOK, "")
	for _, d := range list.Body["devices"].([]any) {
		if fp := d.(map[string]any)["device_fingerprint"]; fp == "after" {
			t.Fatalf("the removed member's code paired a device: %s", list.Raw)
		}
	}
	// The QR image of such a code is gone with it.
	e.want(e.do(call{method: "GET", path: "/device/pairing/" + gone + "/qr.png", token: a.apiKey}), http.StatusNotFound, "not_found")
	// The company's other codes work as before, the API key's included.
	if err := register(code(a.apiKey), "fresh"); err != nil {
		t.Fatalf("a code of the API key: %v", err)
	}
}

// A pairing code made with the API key is that key's: rotating the key
// ends the codes it made that no phone used yet, as it ends the key at
// once, so that whoever held a leaked key cannot pair a phone into the
// company after the rotation. Codes users made are theirs and stay.
func TestPairingCodeOfARotatedAPIKeyPairsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	code := func(token string) string {
		r := e.do(call{method: "POST", path: "/device/pairing", token: token})
		e.want(r, http.StatusCreated, "")
		return r.str("pairing_code")
	}
	register := func(code, fp string) error {
		_, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{PairingCode: code, DeviceFingerprint: fp, AppVersion: "test"})
		return err
	}
	leaked, users := code(a.apiKey), code(a.access)
	rot := e.do(call{method: "POST", path: "/account/api-key/rotate", token: a.access})
	e.want(rot, http.StatusOK, "")

	err := register(leaked, "leaked")
	var ce *client.APIError
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Code != "invalid_token" || ce.Field != "pairing_code" {
		t.Fatalf("a code of the rotated key: got %v, want 400 invalid_token on pairing_code", err)
	}
	e.want(e.do(call{method: "GET", path: "/device/pairing/" + leaked + "/qr.png", token: a.access}), http.StatusNotFound, "not_found")
	if err := register(users, "users"); err != nil {
		t.Fatalf("a user's code after the key's rotation: %v", err)
	}
	if err := register(code(rot.str("apiKey")), "new-key"); err != nil {
		t.Fatalf("a code of the new key: %v", err)
	}
}

// A password reset signs the user out everywhere, so that whoever took a
// session of theirs cannot keep it: it ends the pairing codes the user made
// that no phone used yet too, which such a session could have made to pair
// a phone of its own into the company after the reset.
func TestPairingCodeMadeBeforeAPasswordResetPairsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	r := e.do(call{method: "POST", path: "/device/pairing", token: a.access})
	e.want(r, http.StatusCreated, "")
	stolen := r.str("pairing_code")
	byKey := e.do(call{method: "POST", path: "/device/pairing", token: a.apiKey})
	e.want(byKey, http.StatusCreated, "")

	e.want(e.do(call{method: "POST", path: "/auth/forgot-password", body: map[string]any{"email": a.email}}), http.StatusOK, "")
	link := mailtest.LinkToken(waitForNth(t, e, a.email, 2).Text, "/reset-password")
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": link, "password": "Another-Horse-7"}}), http.StatusOK, "")

	_, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{PairingCode: stolen, DeviceFingerprint: "thief", AppVersion: "test"})
	var ce *client.APIError
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Code != "invalid_token" {
		t.Fatalf("a code made before the user's password reset: got %v, want 400 invalid_token", err)
	}
	// The API key's codes are the key's, not the user's.
	if _, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{PairingCode: byKey.str("pairing_code"), DeviceFingerprint: "kept", AppVersion: "test"}); err != nil {
		t.Fatalf("the API key's code after the first admin's reset: %v", err)
	}
}
