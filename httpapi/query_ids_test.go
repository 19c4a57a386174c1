package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// An id in a query string is written as the API writes ids, as one in a
// path: decimal digits without leading zeros. A path's /pools/01 is no
// pool (404); a filter's webhook_id=01 or users=01 is a bad value of the
// parameter, 400 naming it, as webhook_id=abc is. They read as 1, so one
// entry or user had many spellings, unlike a path's id.
func TestQueryIDsWithLeadingZerosAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "zeros@acme.test")
	admin := fmt.Sprintf("%d", int(a.adminID))
	for _, q := range []struct{ path, field string }{
		{"/webhooks/deliveries?webhook_id=01", "webhook_id"},
		{"/webhooks/deliveries?webhook_id=007", "webhook_id"},
		{"/webhooks/deliveries?webhook_id=00", "webhook_id"},
		{"/analytics?users=0" + admin, "users"},
		{"/analytics?users=" + admin + ",01", "users"},
		{"/analytics?users=" + admin + ",%2001", "users"}, // an item's spaces are trimmed, not its zeros
	} {
		r := e.do(call{method: "GET", path: q.path, token: a.apiKey})
		if r.Status != http.StatusBadRequest || r.str("error") != "validation_failed" || r.str("field") != q.field || !strings.Contains(r.str("message"), "leading zeros") {
			t.Errorf("GET %s: got %d %s, want 400 validation_failed on %s saying leading zeros", q.path, r.Status, r.Raw, q.field)
		}
	}
	// Written as the API writes them, they are taken.
	e.want(e.do(call{method: "GET", path: "/analytics?users=" + admin, token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "GET", path: "/webhooks/deliveries?webhook_id=10", token: a.apiKey}), http.StatusOK, "")
}
