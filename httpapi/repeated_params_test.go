package httpapi_test

import (
	"net/http"
	"testing"
)

// TestRepeatedQueryParameter: a query parameter given twice with different
// values is the client's 400 naming it. The routes read the first value
// only, so ?devices=a&devices=b (the way many HTTP clients write a list)
// counted device a alone, and a second device_fingerprint was dropped
// without a word. The same value twice means one thing and is taken; an
// unknown path stays 404 and a method a route does not take 405.
func TestRepeatedQueryParameter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	e.pairPhone(a.apiKey, "b-phone")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", "hello", "")}), http.StatusOK, "")
	wantRefused(t, e, a.apiKey, []refused{
		{"GET", "/analytics?devices=a-phone&devices=b-phone", "devices", nil},
		{"GET", "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&device_fingerprint=b-phone", "device_fingerprint", nil},
		{"GET", "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&limit=5&limit=", "limit", nil},
		{"DELETE", "/opt-outs?phone=%2B15551230000&phone=%2B15551230001", "phone", nil},
		{"GET", "/chat/devices?x=1&x=2", "x", nil}, // read by no route, as a NUL in one is refused
		{"GET", "/chat/devices?b=1&b=2&a=1&a=2", "a", nil},
		{"GET", "/nope?a=1&a=2", "", nil},
	})
	r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&device_fingerprint=a-phone&phone=%2B15551230000", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.Body["total"] != float64(1) {
		t.Errorf("the same device_fingerprint twice: %s, want the one message", r.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/analytics?devices=a-phone,b-phone", token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "PUT", path: "/chat/queue/x?a=1&a=2", token: a.apiKey}), http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestRepeatedIdempotencyKey: a send with two Idempotency-Key header lines
// of different values is 400 naming the header and queues nothing. The
// first line alone was read, so which key a retry matched depended on the
// order of the lines, and a proxy that joins them ("k1, k2", as HTTP
// allows) made a third key of the same request: the send went twice. The
// same key twice is one key.
func TestRepeatedIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	for _, path := range []string{"/chat/send", "/automation/send-sms"} {
		r := e.do(call{method: "POST", path: path, token: a.apiKey, body: sendBody("a-phone", "+15551230000", "hello", ""),
			multi: map[string][]string{"Idempotency-Key": {"k1", "k2"}}})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != "Idempotency-Key" {
			t.Errorf("POST %s: field %q, want Idempotency-Key; body %s", path, got, r.Raw)
		}
	}
	r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 2),
		multi: map[string][]string{"Idempotency-Key": {"k1", "k2"}}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	r = e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.Body["total"] != float64(0) {
		t.Fatalf("the refused sends queued: %s", r.Raw)
	}
	// The key k1 was not spent: a send under it is new, not a replay.
	first := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", "hello", ""),
		multi: map[string][]string{"Idempotency-Key": {"k1", "k1"}}})
	e.want(first, http.StatusOK, "")
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a send under an unspent key was answered as a replay: %v", first.Header)
	}
	again := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", "hello", ""),
		header: map[string]string{"Idempotency-Key": "k1"}})
	e.want(again, http.StatusOK, "")
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Raw) != string(first.Raw) {
		t.Errorf("the retry under k1: %v %s, want the first answer replayed: %s", again.Header, again.Raw, first.Raw)
	}
}

// TestRepeatedContentType: a request with two Content-Type lines that
// differ is 400 naming the header, and changes nothing. The first line
// alone was read: it said what the body was (the media type an upload is
// stored and served with, the charset a body is checked against, whether
// /mcp takes it) while a proxy or filter in front may have gone by the
// other. The same media type twice is one.
func TestRepeatedContentType(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.pairPhone(a.apiKey, "a-phone")
	second := map[string][]string{"Content-Type": {"text/plain"}} // after the harness's application/json
	for _, c := range []call{
		{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"name": "Globex"}, multi: second},
		{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", "hello", ""), multi: second},
		{method: "POST", path: "/mcp", token: a.apiKey, body: `{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`, multi: second},
		{method: "POST", path: "/device/media?key=k1&filename=a.png", token: phone.DeviceToken, body: "\x89PNG",
			multi: map[string][]string{"Content-Type": {"image/png", "text/html"}}},
	} {
		r := e.do(c)
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != "Content-Type" {
			t.Errorf("%s %s: field %q, want Content-Type; body %s", c.method, c.path, got, r.Raw)
		}
	}
	r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.Body["total"] != float64(0) {
		t.Errorf("the refused send queued: %s", r.Raw)
	}
	r = e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"name": "Globex"},
		multi: map[string][]string{"Content-Type": {"application/json"}}})
	e.want(r, http.StatusOK, "")
	if r.str("name") != "Globex" {
		t.Errorf("PATCH /company with the same Content-Type twice: %s", r.Raw)
	}
}

// TestRepeatedAuthorization: Authorization header lines that differ are 401
// on the API, the phone link and the agents' upload, whichever comes first.
// The first line alone was read, so a request carrying company A's key
// then company B's acted as A, while a proxy in front that checks or logs
// the last line saw B. The same credential twice is one credential.
func TestRepeatedAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Globex", "owner@globex.test")
	phone := e.pairPhone(a.apiKey, "a-phone")
	for _, lines := range [][]string{
		{"Bearer " + a.apiKey, "Bearer " + b.apiKey},
		{"Bearer " + b.apiKey, "Bearer " + a.apiKey},
		{"Bearer " + a.apiKey, "Bearer sk_wrong"},
	} {
		r := e.do(call{method: "GET", path: "/company", multi: map[string][]string{"Authorization": lines}})
		e.want(r, http.StatusUnauthorized, "unauthorized")
	}
	e.want(e.do(call{method: "GET", path: "/company", multi: map[string][]string{"Authorization": {"Bearer " + a.apiKey, "Bearer " + a.apiKey}}}), http.StatusOK, "")
	two := map[string][]string{"Authorization": {"Bearer " + phone.DeviceToken, "Bearer dt_other"}}
	e.want(e.do(call{method: "GET", path: "/device/ws", multi: two}), http.StatusUnauthorized, "unauthorized")
	e.want(e.do(call{method: "POST", path: "/device/media", multi: two}), http.StatusUnauthorized, "unauthorized")
	// One line of the same token gets past the credential (and is then no upgrade).
	if r := e.do(call{method: "GET", path: "/device/ws", token: phone.DeviceToken}); r.Status == http.StatusUnauthorized {
		t.Errorf("GET /device/ws with the phone's token alone: %d %s", r.Status, r.Raw)
	}
	if r := e.do(call{method: "POST", path: "/device/media", token: phone.DeviceToken}); r.Status == http.StatusUnauthorized {
		t.Errorf("POST /device/media with the phone's token alone: %d %s", r.Status, r.Raw)
	}
}

// TestMalformedQueryParameter: a query pair that the parser would drop (a %
// not followed by two hex digits, or a ;) is 400 naming its parameter. It
// was dropped without a word: ?phone=%2B1555%zz answered "phone is
// required" for a phone the client gave, and ?limit=5;x=1 read no limit.
// Well-formed escapes (%2B, %25) are taken as before.
func TestMalformedQueryParameter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", "hello", "")}), http.StatusOK, "")
	wantRefused(t, e, a.apiKey, []refused{
		{"GET", "/chat/messages?device_fingerprint=a-phone&phone=%2B1555123%zz0000", "phone", nil},
		{"GET", "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&limit=5;x=1", "limit", nil},
		{"GET", "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&x=%", "x", nil},
		{"GET", "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&x=%4", "x", nil},
		{"GET", "/chat/devices?%zz=1", "%zz", nil},
		{"GET", "/chat/devices?a=%00&b=%zz", "b", nil}, // before a NUL in another, as the console
	})
	r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&x=%25%3B", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.Body["total"] != float64(1) {
		t.Errorf("a well-formed query: %s, want the one message", r.Raw)
	}
}
