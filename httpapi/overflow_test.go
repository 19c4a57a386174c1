package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestIntegerOverflowIsOutOfRange: a number too big (or too small) for an
// integer field, whether in digits (99999999999999999999) or with an
// exponent (1e20), is refused as any other value out of the field's range
// is, with the same field and the same sentence ("priority must be 0 (the
// default) to 9; higher goes first."), not for the Go type the server
// reads it into. In a query string, digits past the largest integer, and
// a number with an exponent, are out of range alike. A page, which takes any number up to the largest
// integer, is refused past it with that range; an id past the largest is
// no object's.
func TestIntegerOverflowIsOutOfRange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "of-a")
	huge := []string{"99999999999999999999", "-99999999999999999999", "1e20", "-1e20", "1.5e300", "1e400", "9223372036854775808"}
	for _, c := range []struct {
		method, path, body string // body (or path) with %s for the value
		inRange, field     string // a value out of the domain's range, in the field's type's
	}{
		{"POST", "/chat/send", `{"device_fingerprint": "of-a", "phone": "+15550100001", "message": "x", "priority": %s}`, "10", "priority"},
		{"POST", "/chat/send", `{"device_fingerprint": "of-a", "phone": "+15550100001", "message": "x", "validity": %s}`, "0", "validity"},
		{"POST", "/chat/send-bulk", `{"device_fingerprint": "of-a", "priority": %s, "messages": [{"phone": "+15550100001", "message": "x"}]}`, "-1", "priority"},
		{"POST", "/chat/send-bulk", `{"device_fingerprint": "of-a", "validity": %s, "messages": [{"phone": "+15550100001", "message": "x"}]}`, "2592001", "validity"},
		{"PATCH", "/device/of-a", `{"sms_per_minute": %s}`, "601", "sms_per_minute"},
		{"POST", "/pools", `{"name": "p", "failover_after": %s, "members": [{"device_fingerprint": "of-a", "sim_slot": "SIM1"}]}`, "30", "failover_after"},
		{"PUT", "/device/of-a/caps", `{"sims": [{"slot": "SIM1", "per_day": %s}]}`, "0", "sims[0].per_day"},
		{"PUT", "/webhooks/inbound-sms", `{"webhooks": [{"url": "https://hooks.example.com/a", "sims": [0, %s]}]}`, "2", "webhooks[0].sims[1]"},
		{"GET", "/opt-outs?limit=%s", "", "0", "limit"},
		{"GET", "/chat/messages?device_fingerprint=of-a&phone=%%2B15550100001&limit=%s", "", "101", "limit"},
		{"GET", "/webhooks/deliveries?limit=%s", "", "0", "limit"},
	} {
		do := func(v string) resp {
			cl := call{method: c.method, path: c.path, token: a.apiKey}
			if c.body != "" {
				cl.body = fmt.Sprintf(c.body, v)
			} else {
				cl.path = fmt.Sprintf(c.path, v)
			}
			return e.do(cl)
		}
		ref := do(c.inRange)
		e.want(ref, http.StatusBadRequest, "validation_failed")
		if got := ref.str("field"); got != c.field {
			t.Fatalf("%s %s with %s: field %q, want %q; body %s", c.method, c.path, c.inRange, got, c.field, ref.Raw)
		}
		for _, v := range huge {
			r := do(v)
			if r.Status != http.StatusBadRequest || r.str("field") != c.field || r.str("message") != ref.str("message") {
				t.Errorf("%s %s with %s: %d %s\nwant the answer to %s: %s", c.method, c.path, v, r.Status, r.Raw, c.inRange, ref.Raw)
			}
		}
	}
	// A fraction in range is still told how to write a whole number.
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: `{"device_fingerprint": "of-a", "phone": "+15550100001", "message": "x", "priority": 2.5}`})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if got := r.str("message"); got != "priority must be a whole number, written in digits without a fraction or an exponent." {
		t.Errorf("priority 2.5: %q", got)
	}
	// A page takes any number from 1 up to the largest integer (past the
	// last page, an empty one): a number past that is refused with that
	// range, not read as another page; a number too small is out of range
	// as 0 is.
	cs := e.mcpClient(a.apiKey)
	for _, v := range []string{"99999999999999999999", "1e20"} {
		body, isErr := callTool(t, cs, "read_conversation", map[string]any{"device_fingerprint": "of-a", "phone": "+15550100001", "page": json.Number(v)})
		wantToolError(t, body, isErr, http.StatusBadRequest, "validation_failed", "page")
		if body["message"] != "page must be from 1 to 9223372036854775807." {
			t.Errorf("read_conversation with page %s: %v", v, body)
		}
	}
	r = e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=of-a&phone=%2B15550100001&page=99999999999999999999", token: a.apiKey})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "page" || r.str("message") != "page must be from 1 to 9223372036854775807." {
		t.Errorf("page past the largest integer: %s", r.Raw)
	}
	low := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=of-a&phone=%2B15550100001&page=0", token: a.apiKey})
	r = e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=of-a&phone=%2B15550100001&page=-99999999999999999999", token: a.apiKey})
	if r.Status != http.StatusBadRequest || r.str("message") != low.str("message") {
		t.Errorf("page below the smallest integer: %s, want the answer to page=0: %s", r.Raw, low.Raw)
	}
	// Ids past the largest find nothing, as any unknown id.
	for _, path := range []string{
		"/webhooks/deliveries?webhook_id=99999999999999999999",
		"/analytics?users=99999999999999999999",
	} {
		e.want(e.do(call{method: "GET", path: path, token: a.apiKey}), http.StatusOK, "")
	}
}
