package httpapi_test

import (
	"net/http"
	"testing"
)

// TestDotFingerprintsAreRefused: a phone cannot register the fingerprint
// "." or "..". Both match the fingerprint's pattern, but as path segments
// they are cleaned out of every URL before routing (a 308 to the path
// without them), so PATCH /device/.., its caps and DELETE
// /device/delete/.. never reached the device: it could not be renamed,
// disabled or deleted, and held a place of the plan's device limit for
// good. Dots within a fingerprint, three of them alone included, are
// ordinary segments and stay allowed.
func TestDotFingerprintsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	for _, fp := range []string{".", ".."} {
		code := e.do(call{method: "POST", path: "/device/pairing", token: a.apiKey})
		e.want(code, http.StatusCreated, "")
		r := e.do(call{method: "POST", path: "/device/register", body: map[string]any{"pairing_code": code.str("pairing_code"), "device_fingerprint": fp}})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != "device_fingerprint" {
			t.Errorf("register %q: field %q, want device_fingerprint; body %s", fp, got, r.Raw)
		}
	}
	r := e.do(call{method: "GET", path: "/device/list", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if devices := r.Body["devices"].([]any); len(devices) != 0 {
		t.Fatalf("refused registrations left devices: %s", r.Raw)
	}
	for _, fp := range []string{"...", "pixel.7", ".hidden"} {
		e.pairPhone(a.apiKey, fp)
		e.want(e.do(call{method: "PATCH", path: "/device/" + fp, token: a.apiKey, body: map[string]any{"device_name": "Renamed"}}), http.StatusOK, "")
		e.want(e.do(call{method: "DELETE", path: "/device/delete/" + fp, token: a.apiKey}), http.StatusOK, "")
	}
}
