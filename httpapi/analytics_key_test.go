package httpapi_test

import (
	"net/http"
	"testing"
)

// The analytics answers kept for reuse were keyed by the filters joined
// with "|", which a filter may hold: asked with users=1|x and no devices
// (not user ids: 400), the server answered the 200 it had kept for
// users=1 and devices=x|, without reading the filter.
func TestAnalyticsKeptAnswerIsItsOwnRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	uid := numberString(a.adminID)
	e.want(e.do(call{method: "GET", path: "/analytics?users=" + uid + "&devices=x%7C", token: a.apiKey}), http.StatusOK, "")
	r := e.do(call{method: "GET", path: "/analytics?users=" + uid + "%7Cx", token: a.apiKey})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "users" {
		t.Fatalf("field %q, want users", r.str("field"))
	}
}
