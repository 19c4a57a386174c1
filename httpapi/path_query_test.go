package httpapi_test

import (
	"net/http"
	"testing"
)

// TestParameterInPathAndQuery: a parameter a route names in its path and
// that the query gives again with another value is 400 validation_failed
// naming it, as a query parameter given twice with different values is:
// DELETE /opt-outs/{phone}?phone=X took the path's number off the list and
// dropped X without a word, so a client that meant X (the query form of
// the same route) removed another entry. The same value in both means one
// thing and is taken; nothing is removed by a refused request.
func TestParameterInPathAndQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	for _, p := range []string{"+15550000001", "+15550000002"} {
		e.want(e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": p}}), http.StatusCreated, "")
	}
	r := e.do(call{method: "DELETE", path: "/opt-outs/%2B15550000001?phone=%2B15550000002", token: a.apiKey})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "phone" {
		t.Errorf("got field %q, want phone: %s", r.str("field"), r.Raw)
	}
	if l := e.optOuts(a.apiKey); len(l) != 2 {
		t.Fatalf("a refused delete changed the list: %v", l)
	}
	// The same number both ways (an unencoded + in the query reads as a
	// space, as the route itself reads it) is one entry, taken.
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%2B15550000001?phone=+15550000001", token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%2B15550000002?phone=%2B15550000002", token: a.apiKey}), http.StatusOK, "")
	if l := e.optOuts(a.apiKey); len(l) != 0 {
		t.Fatalf("after the deletes: %v", l)
	}
	// The same rule on the other routes with a parameter in the path.
	e.pairPhone(a.apiKey, "a-1")
	r = e.do(call{method: "PATCH", path: "/device/a-1?device_fingerprint=a-2", token: a.apiKey, body: map[string]any{"name": "x"}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "device_fingerprint" {
		t.Errorf("got field %q, want device_fingerprint: %s", r.str("field"), r.Raw)
	}
	// A query parameter the route does not take is still ignored.
	e.want(e.do(call{method: "GET", path: "/device/a-1/caps?phone=x", token: a.apiKey}), http.StatusOK, "")
}

// TestBlankQueryPhoneIsRequired: spaces alone in a query's phone name no
// number, on every route that reads one from the query, as on DELETE
// /opt-outs: "phone is required", not the number rule's refusal of a "+"
// that GET /chat/messages made of a lone space (an unencoded + reads as
// one, and was given its + back however little followed it).
func TestBlankQueryPhoneIsRequired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-1")
	for _, path := range []string{"/chat/messages?device_fingerprint=a-1&phone=%20", "/chat/messages?device_fingerprint=a-1&phone=+", "/opt-outs?phone=+"} {
		method := "GET"
		if path[:9] == "/opt-outs" {
			method = "DELETE"
		}
		r := e.do(call{method: method, path: path, token: a.apiKey})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "phone" || r.str("message") != "phone is required." {
			t.Errorf("%s %s: got %s, want phone is required.", method, path, r.Raw)
		}
	}
}
