package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/device"
)

// authRoute is a route FuzzAuthorization sends its header to.
type authRoute struct {
	method, path, op string
	body             []byte
	// device: the route takes a device token (POST /device/media, GET
	// /device/ws), not an API key or access token.
	device bool
	// upgrade: the phones' WebSocket upgrade, which the test does not
	// ask for: a token it takes is answered by the WebSocket library
	// (plain text), so only refusals of the token are checked.
	upgrade bool
}

var authRoutes = []authRoute{
	{method: "GET", path: "/company", op: "/company"},
	{method: "GET", path: "/account/api-key", op: "/account/api-key"},
	{method: "GET", path: "/users/me", op: "/users/me"},
	{method: "POST", path: "/device/media?key=fz-auth&filename=a.txt", op: "/device/media", body: []byte("hello"), device: true},
	{method: "GET", path: "/device/ws", device: true, upgrade: true},
}

// FuzzAuthorization sends fuzzed Authorization headers to routes of each
// kind of credential: a member's, an admin's, a user's alone, a device's
// (a media upload, and the phones' WebSocket upgrade).
// In the header, {key}, {jwt} and {dev} stand for the company's API key,
// its admin's access token and its phone's device token, so that the
// fuzzer works on real credentials too (garbage around them, a case
// changed, a segment cut). Beyond fuzzEnv.send's checks (no 5xx, the
// contract's error body), a refused Bearer credential gets the very answer
// an unknown one gets, status and body: a malformed key, a key with
// garbage after it and a forged or cut token tell nothing of which keys
// exist.
func FuzzAuthorization(f *testing.F) {
	fe := newFuzzEnv(f)
	reg := fe.pairPhone(fe.key, "fz-auth-phone")
	creds := strings.NewReplacer("{key}", fe.key, "{jwt}", fe.access, "{dev}", reg.DeviceToken)
	// The answers to an unknown credential of each kind, well formed.
	unknownKey := fe.refusal(f, authRoutes[0], "Bearer sk_"+strings.Repeat("A", 40))
	unknownDevice := fe.refusal(f, authRoutes[3], "Bearer "+device.TokenPrefix+strings.Repeat("A", 43))
	unknownLink := fe.refusal(f, authRoutes[4], "Bearer "+device.TokenPrefix+strings.Repeat("A", 43))

	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, h := range []string{
		"Bearer {key}", "bearer {key}", "BEARER {key}", "Bearer    {key}", "Bearer {key}   ", "Bearer\t{key}", "Bearer{key}",
		"Bearer {key}x", "Bearer x{key}", "Bearer {key} {key}", "Bearer {key}\xff", "Bearer {key}\u00a0", "Bearer \u00a0{key}",
		"Bearer {jwt}", "Bearer {jwt}x", "Bearer {jwt}.", "Bearer {jwt}.{jwt}", "Bearer eyJ{jwt}",
		"Bearer {dev}", "Bearer {dev}x", "Bearer {dev} ", "bearer {dev}",
		"Basic {key}", basic("{key}:"), basic(":{key}"), basic("user:pass"), "Token {key}", "ApiKey {key}", "Negotiate YII=",
		"", "Bearer", "Bearer ", "Bearer  ", "Bearer sk_", "Bearer sk_\x80\xff", "Bearer dt_", "Bearer dt_\xc3\x28",
		"Bearer " + strings.Repeat("sk_", 3000), "Bearer " + strings.Repeat(" ", 500) + "{key}", strings.Repeat("Bearer ", 200),
		// Tokens with no signature, another algorithm, no expiry, claims
		// of the wrong type.
		"Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiIxIiwiY2lkIjoxLCJyb2xlIjoiYWRtaW4iLCJleHAiOjQxMDI0NDQ4MDB9.",
		"Bearer eyJhbGciOiJIUzUxMiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.c2ln",
		"Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOjEsImNpZCI6IngiLCJleHAiOiJ0b21vcnJvdyJ9.c2ln",
		"Bearer e30.e30.", "Bearer ...", "Bearer a.b.c.d", "Bearer \x00",
	} {
		for i := range authRoutes {
			f.Add(h, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, header string, route uint8) {
		rt := authRoutes[int(route)%len(authRoutes)]
		h := creds.Replace(header)
		req := fuzzReq{method: rt.method, path: rt.path, op: rt.op, body: rt.body, header: map[string]string{"Authorization": h}, page: rt.upgrade}
		status, _, raw := fe.exchange(t, req)
		if status/100 == 2 {
			return
		}
		token, bearer := bearerToken(h)
		want := unknownKey
		switch {
		case rt.upgrade:
			// The upgrade reads no scheme but Bearer: anything else is no
			// token, refused as an unknown one is.
			if status == http.StatusUnauthorized || !bearer || !strings.HasPrefix(token, device.TokenPrefix) {
				if status != unknownLink.status || !bytes.Equal(raw, unknownLink.body) {
					t.Fatalf("GET /device/ws with Authorization %q: got %d %s, want the answer to an unknown token: %d %s", h, status, raw, unknownLink.status, unknownLink.body)
				}
			}
			return
		case rt.device:
			want = unknownDevice
		}
		switch {
		case !bearer || token == "":
			return // no credential to judge: the answer says what the header lacks
		case rt.device != strings.HasPrefix(token, device.TokenPrefix):
			return // a credential of the other kind: this route does not look it up
		case rt.path == "/users/me" && status == http.StatusForbidden:
			return // the API key itself: user_token_required
		}
		if status != want.status || !bytes.Equal(raw, want.body) {
			t.Fatalf("%s %s with Authorization %q: got %d %s, want the answer to an unknown credential: %d %s",
				rt.method, rt.path, h, status, raw, want.status, want.body)
		}
	})
}

// answer is a status and its body.
type answer struct {
	status int
	body   []byte
}

// refusal is the answer of rt to the Authorization header h, which must
// be a 401 in the contract's error body (exchange checks the body).
func (fe *fuzzEnv) refusal(f *testing.F, rt authRoute, h string) answer {
	f.Helper()
	status, _, raw := fe.exchange(f, fuzzReq{method: rt.method, path: rt.path, body: rt.body, header: map[string]string{"Authorization": h}})

	if status != http.StatusUnauthorized {
		f.Fatalf("%s %s with Authorization %q: got %d %s, want 401", rt.method, rt.path, h, status, raw)
	}
	return answer{status, raw}
}

// bearerToken is the credential of a Bearer Authorization header as the
// server receives it (net/http trims the value's ends), and whether the
// header has that scheme.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.Trim(h, " \t"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}
