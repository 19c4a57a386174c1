package httpapi_test

import (
	"net/http"
	"testing"
)

// A validation error's message is one whole sentence that names the field
// (contract section 1), whatever refused the value: the domain's checks,
// the query string's reading or the JSON decoder. The code and field stay
// those of the contract.
func TestValidationMessagesAreSentences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.test")
	for _, c := range []struct {
		call        call
		field, want string
	}{
		{call{method: "GET", path: "/opt-outs?limit=0"}, "limit", "limit must be from 1 to 1000."},
		{call{method: "GET", path: "/opt-outs?limit=x"}, "limit", "limit must be from 1 to 1000."},
		{call{method: "POST", path: "/chat/send", body: `{"device_fingerprint": "p", "phone": "+15550100001", "message": "x", "priority": 2.5}`},
			"priority", "priority must be a whole number, written in digits without a fraction or an exponent."},
		{call{method: "POST", path: "/chat/send", body: `{"device_fingerprint": "p", "phone": "+15550100001", "message": "x", "priority": 99999999999999999999}`},
			"priority", "priority must be 0 (the default) to 9; higher goes first."},
		{call{method: "POST", path: "/chat/send", body: `{"device_fingerprint": "p", "phone": "+15550100001", "message": "x", "priority": 1e20}`},
			"priority", "priority must be 0 (the default) to 9; higher goes first."},
		{call{method: "GET", path: "/opt-outs?limit=99999999999999999999"}, "limit", "limit must be from 1 to 1000."},
		{call{method: "POST", path: "/chat/send", body: `{"device_fingerprint": "p", "phone": "+15550100001", "message": "x", "priority": "high"}`},
			"priority", "priority must be a whole number."},
		{call{method: "POST", path: "/chat/send", body: map[string]any{"device_fingerprint": "p", "phone": "+15550100001", "message": ""}},
			"message", "message is required."},
		{call{method: "POST", path: "/chat/send", body: map[string]any{"pool": "p", "device_fingerprint": "p", "phone": "+15550100001", "message": "x"}},
			"pool", "pool must not be given with device_fingerprint: give one or the other."},
	} {
		c.call.token = a.apiKey
		r := e.do(c.call)
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != c.field {
			t.Errorf("%s %s: field %q, want %q", c.call.method, c.call.path, got, c.field)
		}
		if got := r.str("message"); got != c.want {
			t.Errorf("%s %s %v: message %q, want %q", c.call.method, c.call.path, c.call.body, got, c.want)
		}
	}
}
