package httpapi_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
)

// An empty strategy is no strategy: 400 naming the field, on a definition
// and on a change, as null there is (the pool's strategy has no empty
// state). An empty fallback is the fallback's empty state, the same as
// null: no fallback of the pool's own, so a sticky pool's is round_robin;
// the OpenAPI document lists it beside null.
func TestPoolEmptyStrategyAndFallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-1")

	e.nullRefused(e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "p", "strategy": "", "members": members("a-1", "SIM1")}}), "strategy")
	list := e.do(call{method: "GET", path: "/pools", token: a.apiKey})
	e.want(list, http.StatusOK, "")
	if ps := list.Body["pools"].([]any); len(ps) != 0 {
		t.Fatalf("after a refused definition: got %s, want no pool", list.Raw)
	}

	p := e.createPool(a.apiKey, map[string]any{"name": "sales", "strategy": "sticky", "fallback": "", "members": members("a-1", "SIM1")})
	if p.str("strategy") != "sticky" || p.str("fallback") != "round_robin" {
		t.Fatalf(`created with fallback "": got %s, want sticky with the default round_robin`, p.Raw)
	}
	path := "/pools/" + strconv.Itoa(int(p.Body["id"].(float64)))
	patch := func(body map[string]any) resp {
		return e.do(call{method: "PATCH", path: path, token: a.apiKey, body: body})
	}
	e.want(patch(map[string]any{"fallback": "least_loaded"}), http.StatusOK, "")
	e.nullRefused(patch(map[string]any{"strategy": ""}), "strategy")
	e.nullRefused(patch(map[string]any{"strategy": "", "fallback": "round_robin"}), "strategy")
	r := e.do(call{method: "GET", path: path, token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.str("strategy") != "sticky" || r.str("fallback") != "least_loaded" {
		t.Fatalf(`after refused strategy "": got %s, want sticky least_loaded as it was`, r.Raw)
	}
	r = patch(map[string]any{"fallback": ""})
	e.want(r, http.StatusOK, "")
	if r.str("fallback") != "round_robin" {
		t.Fatalf(`fallback "": got %s, want the sticky default round_robin, as null gives`, r.Raw)
	}

	doc := e.do(call{method: "GET", path: "/openapi.json"})
	e.want(doc, http.StatusOK, "")
	schemas := doc.Body["components"].(map[string]any)["schemas"].(map[string]any)
	if enum := schemas["PoolStrategy"].(map[string]any)["enum"].([]any); slices.Contains(enum, any("")) {
		t.Errorf(`PoolStrategy lists "" (%v), which is refused`, enum)
	}
	for _, s := range []string{"PoolInput", "PoolPatch"} {
		fallback := schemas[s].(map[string]any)["properties"].(map[string]any)["fallback"].(map[string]any)
		if enum, _ := fallback["enum"].([]any); !slices.Contains(enum, any("")) || !slices.Contains(enum, nil) {
			t.Errorf(`%s.fallback lists %v; "" and null are both taken`, s, enum)
		}
	}
}
