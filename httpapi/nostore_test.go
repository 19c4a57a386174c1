package httpapi_test

import "testing"

// Every answer that holds a secret says no-store, so that no cache in
// between keeps it (RFC 6749 5.1 asks it of token answers): the tokens of
// login and refresh and a new pairing code went without it, while the
// pairing code's QR image, the API key and the signing secret had it.
func TestSecretAnswersAreNotStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	login := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": a.email, "password": a.password}})
	pairing := e.do(call{method: "POST", path: "/device/pairing", token: a.apiKey})
	answers := map[string]resp{
		"POST /auth/login":                     login,
		"POST /auth/refresh":                   e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": login.str("refreshToken")}}),
		"POST /device/pairing":                 pairing,
		"GET /device/pairing/{code}/qr.png":    e.do(call{method: "GET", path: "/device/pairing/" + pairing.str("pairing_code") + "/qr.png", token: a.apiKey}),
		"POST /device/register":                e.do(call{method: "POST", path: "/device/register", body: phonesRegisterBody(pairing.str("pairing_code"), "ns-1")}),
		"GET /account/api-key":                 e.do(call{method: "GET", path: "/account/api-key", token: a.access}),
		"GET /webhooks/inbound-sms":            e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: a.apiKey}),
		"POST /webhooks/signing-secret/rotate": e.do(call{method: "POST", path: "/webhooks/signing-secret/rotate", token: a.apiKey}),
		"POST /account/api-key/rotate":         e.do(call{method: "POST", path: "/account/api-key/rotate", token: a.access}),
	}
	for what, r := range answers {
		if r.Status/100 != 2 {
			t.Errorf("%s: %d %s", what, r.Status, r.Raw)
			continue
		}
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s answered Cache-Control %q, want no-store", what, got)
		}
	}
}
