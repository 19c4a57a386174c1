package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleIDsThatCannotNameARecord: a console action whose path gives
// an id that cannot name a record (not digits, 0, past the largest id) is
// answered as one whose well-formed id names nothing, with the same status
// and body, after the same checks of the form, as the API answers it; a
// form's own refusal ("strategy must be ...") came second to "No such
// pool." there only.
func TestConsoleIDsThatCannotNameARecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	if p := b.post("/console/pools", url.Values{"name": {"sales"}, "members": {"fp-1/SIM1"}}); p.status != http.StatusOK {
		t.Fatalf("define a pool: %d %s", p.status, p.body)
	}
	pools, err := e.sms.Pools(t.Context(), 1)
	if err != nil || len(pools) != 1 {
		t.Fatalf("stored pools %+v (%v)", pools, err)
	}
	pool := fmt.Sprint(pools[0].ID)
	for _, c := range []struct {
		path string // with %s for the id
		form url.Values
	}{
		{"/console/pools/%s", url.Values{"strategy": {"round_robin"}}},
		{"/console/pools/%s", url.Values{"failover_after": {"soon"}}}, // the form's refusal first, as for any id
		{"/console/pools/%s/delete", nil},
		{"/console/pools/%s/members", url.Values{"member": {"fp-1/SIM2"}}},
		{"/console/pools/" + pool + "/members/%s/remove", nil},
		{"/console/team/%s/role", url.Values{"role": {"admin"}}},
		{"/console/team/%s/remove", nil},
	} {
		ref := b.post(fmt.Sprintf(c.path, "9223372036854775807"), c.form)
		if ref.status != http.StatusNotFound && ref.status != http.StatusBadRequest {
			t.Fatalf("%s with an id no record has: %d %s", c.path, ref.status, ref.body)
		}
		for _, id := range []string{"0", "abc", "1e20", "-1", "99999999999999999999", "9223372036854775808"} {
			if p := b.post(fmt.Sprintf(c.path, id), c.form); p.status != ref.status || p.body != ref.body {
				t.Errorf("POST %s: %d %s\nwant the answer to an id that names nothing: %d %s",
					strings.Replace(c.path, "%s", id, 1), p.status, p.body, ref.status, ref.body)
			}
		}
	}
	if pools, err := e.sms.Pools(t.Context(), 1); err != nil || len(pools) != 1 || len(pools[0].Members) != 1 || pools[0].Name != "sales" {
		t.Errorf("the pool after the calls: %+v (%v), want it unchanged", pools, err)
	}
}
