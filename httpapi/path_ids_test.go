package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestPathIDsThatCannotNameARecord: an id in a path that cannot name a
// record (not digits, 0, past the largest id, leading zeros) is answered as a well-formed
// id that names nothing is, with the same status and body ("No such
// pool.", "No such member of the pool.", "No such user."), after the same
// checks of the body, on every route with a numeric id; it was "No such
// resource." before anything else was read, so /pools/1e20 and
// /pools/9223372036854775808 got different 404s.
func TestPathIDsThatCannotNameARecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-1")
	r := e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "p", "members": members("a-1", "SIM1")}})
	e.want(r, http.StatusCreated, "")
	pool := fmt.Sprint(int64(r.Body["id"].(float64)))
	member := fmt.Sprint(int64(r.Body["members"].([]any)[0].(map[string]any)["id"].(float64)))
	admin := fmt.Sprint(int64(a.adminID))
	// An id is written one way, in decimal without leading zeros: /pools/01
	// named pool 1 (strconv reads the zeros), so one record had many
	// addresses, and a client that built one by hand reached a record it
	// never named; each such spelling of a real id names nothing.
	cannot := []string{"0", "abc", "1e20", "-1", "+1", "1.0", "0x10", "99999999999999999999", "18446744073709551616", "%20",
		"01", "0" + pool, "00" + pool, "0" + member, "0" + admin, "00000000000000000000" + pool}
	for _, c := range []struct {
		method, path string // path with %s for the id
		body         any
	}{
		{"GET", "/pools/%s", nil},
		{"PATCH", "/pools/%s", map[string]any{"name": "q"}},
		{"PATCH", "/pools/%s", map[string]any{"strategy": "random"}}, // the body's refusal comes first, as for any id
		{"DELETE", "/pools/%s", nil},
		{"POST", "/pools/%s/members", map[string]any{"device_fingerprint": "a-1", "sim_slot": "SIM2"}},
		{"DELETE", "/pools/%s/members/1", nil},
		{"DELETE", "/pools/" + pool + "/members/%s", nil},
		{"PATCH", "/users/%s", map[string]any{"firstName": "X"}},
		{"PATCH", "/users/%s", map[string]any{"role": "boss"}},
		{"DELETE", "/users/%s", nil},
	} {
		do := func(id string) resp {
			return e.do(call{method: c.method, path: fmt.Sprintf(c.path, id), token: a.apiKey, body: c.body})
		}
		ref := do("9223372036854775807")
		if ref.Status != http.StatusNotFound && ref.Status != http.StatusBadRequest {
			t.Fatalf("%s %s with an id no record has: %d %s", c.method, c.path, ref.Status, ref.Raw)
		}
		for _, id := range append(cannot, "9223372036854775808", "18446744073709551615") {
			if r := do(id); r.Status != ref.Status || string(r.Raw) != string(ref.Raw) {
				t.Errorf("%s %s with %s: %d %s\nwant the answer to an id that names nothing: %d %s",
					c.method, strings.Replace(c.path, "%s", id, 1), id, r.Status, r.Raw, ref.Status, ref.Raw)
			}
		}
	}
	// The pool is still there, unchanged: no id above named it.
	r = e.do(call{method: "GET", path: "/pools/" + pool, token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.str("name") != "p" {
		t.Errorf("the pool after the calls: %s", r.Raw)
	}
}
