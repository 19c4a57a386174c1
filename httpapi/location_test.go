package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestCreatedLocation: POST /pools answers 201 with the new pool's URL in
// Location, the server's public URL and /pools/{id}, and GET there answers
// that pool. The 201 carried no Location.
func TestCreatedLocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "loc-1")

	p := e.createPool(a.apiKey, map[string]any{"name": "sales", "members": members("loc-1", "SIM1")})
	id := strconv.FormatFloat(p.Body["id"].(float64), 'f', -1, 64)
	loc := p.Header.Get("Location")
	if want := e.url + "/pools/" + id; loc != want {
		t.Fatalf("POST /pools: Location %q, want %q", loc, want)
	}
	r := e.do(call{method: "GET", path: strings.TrimPrefix(loc, e.url), token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.str("name") != "sales" || r.Body["id"] != p.Body["id"] {
		t.Fatalf("GET of the pool's Location answered %s, want the pool created %s", r.Raw, p.Raw)
	}
}
