package httpapi_test

import (
	"strings"
	"testing"
)

func TestErrorBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	c := e.newCompany("Acme", "owner@acme.test")
	big := `{"name":"` + strings.Repeat("a", 1<<20) + `"}`
	cases := []struct {
		name   string
		call   call
		status int
		code   string
	}{
		{"unknown route", call{method: "GET", path: "/v2/nothing"}, 404, "not_found"},
		{"unknown route with a key", call{method: "GET", path: "/v2/nothing", token: c.apiKey}, 404, "not_found"},
		{"wrong method", call{method: "PUT", path: "/company", token: c.apiKey}, 405, "method_not_allowed"},
		{"body over 1 MiB", call{method: "PATCH", path: "/company", token: c.apiKey, body: big}, 413, "payload_too_large"},
		{"malformed JSON", call{method: "PATCH", path: "/company", token: c.apiKey, body: `{"name":`}, 400, "invalid_json"},
		{"array instead of object", call{method: "PATCH", path: "/company", token: c.apiKey, body: `[1,2]`}, 400, "invalid_json"},
		{"null instead of object", call{method: "PATCH", path: "/company", token: c.apiKey, body: ` null `}, 400, "invalid_json"},
		{"null send", call{method: "POST", path: "/chat/send", token: c.apiKey, body: `null`}, 400, "invalid_json"},
		{"wrong type", call{method: "PATCH", path: "/company", token: c.apiKey, body: `{"name": 5}`}, 400, "validation_failed"},
		{"no credential", call{method: "GET", path: "/company"}, 401, "unauthorized"},
		{"bad user id", call{method: "PATCH", path: "/users/abc", token: c.apiKey, body: `{}`}, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.call)
			e.want(r, tc.status, tc.code)
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("got Content-Type %q, want JSON", ct)
			}
		})
	}
	r := e.do(call{method: "PATCH", path: "/company", token: c.apiKey, body: `{"name": 5}`})
	if r.str("field") != "name" {
		t.Errorf("wrong type: got field %q, want name", r.str("field"))
	}
}
