package httpapi_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// The export carries the company's sender pools as GET /pools lists them,
// and the per-SIM caps set with PUT /device/{fp}/caps (their settings, not
// their live use), only the company's own and none of a deleted device's;
// a company that has neither has neither key.
func TestCompanyExportOfPoolsAndSIMCaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	e.pairPhone(a.apiKey, "acme-1")
	e.pairPhone(a.apiKey, "acme-2")
	e.pairPhone(a.apiKey, "acme-gone")
	e.pairPhone(b.apiKey, "beta-1")
	e.createPool(a.apiKey, map[string]any{"name": "acme-main", "strategy": "round_robin", "failover_after": 300,
		"window":  map[string]any{"days": []string{"mon", "tue"}, "from": "09:00", "to": "17:00", "time_zone": "Europe/Paris"},
		"members": members("acme-1", "SIM1", "acme-2", "SIM2", "acme-gone", "SIM1")})
	e.createPool(a.apiKey, map[string]any{"name": "acme-spare", "members": members("acme-2", "SIM1")})
	e.createPool(b.apiKey, map[string]any{"name": "beta-pool", "members": members("beta-1", "SIM1")})
	e.setCaps(a.apiKey, "acme-1", map[string]any{"slot": "SIM1", "per_day": 100, "recipients_per_day": 20})
	e.setCaps(a.apiKey, "acme-gone", map[string]any{"slot": "SIM2", "per_month": 4321})
	// Caps set and taken off again are no setting.
	e.setCaps(a.apiKey, "acme-2", map[string]any{"slot": "SIM2", "per_day": 5})
	e.setCaps(a.apiKey, "acme-2", map[string]any{"slot": "SIM2", "per_day": nil})
	e.setCaps(b.apiKey, "beta-1", map[string]any{"slot": "SIM1", "per_month": 7777})
	e.want(e.do(call{method: "DELETE", path: "/device/delete/acme-gone", token: a.apiKey}), http.StatusOK, "")
	// Live use is not a setting: a send counts on acme-1's SIM1.
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("acme-1", "+15557001111", "hi", "SIM1")}), http.StatusOK, "")

	var doc struct {
		Pools   []map[string]any `json:"pools"`
		SIMCaps []map[string]any `json:"sim_caps"`
	}
	r := e.do(call{method: "GET", path: "/company/export", token: a.access})
	e.want(r, http.StatusOK, "")
	mustJSON(t, r.Raw, &doc)
	var list struct {
		Pools []map[string]any `json:"pools"`
	}
	l := e.do(call{method: "GET", path: "/pools", token: a.apiKey})
	e.want(l, http.StatusOK, "")
	mustJSON(t, l.Raw, &list)
	if len(list.Pools) != 2 || !reflect.DeepEqual(doc.Pools, list.Pools) {
		t.Errorf("export's pools:\n%v\nwant GET /pools's:\n%v", doc.Pools, list.Pools)
	}
	want := []map[string]any{{"device_fingerprint": "acme-1", "sims": []any{
		map[string]any{"slot": "SIM1", "per_day": float64(100), "per_month": nil, "recipients_per_day": float64(20)}}}}
	if !reflect.DeepEqual(doc.SIMCaps, want) {
		t.Errorf("export's sim_caps:\n%v\nwant:\n%v", doc.SIMCaps, want)
	}
	text := string(r.Raw)
	for what, s := range map[string]string{"B's pool": "beta-pool", "B's device": "beta-1", "B's cap": "7777",
		"a deleted device": "acme-gone", "a deleted device's cap": "4321", "live use": "sent_today", "live use this month": "sent_this_month",
		"live recipients": "recipients_today"} {
		if strings.Contains(text, s) {
			t.Errorf("the export holds %s (%q)", what, s)
		}
	}
	// B's export is B's.
	rb := e.do(call{method: "GET", path: "/company/export", token: b.apiKey})
	e.want(rb, http.StatusOK, "")
	mustJSON(t, rb.Raw, &doc)
	if len(doc.Pools) != 1 || doc.Pools[0]["name"] != "beta-pool" || len(doc.SIMCaps) != 1 || doc.SIMCaps[0]["device_fingerprint"] != "beta-1" {
		t.Errorf("B's export: pools %v, sim_caps %v; want B's own", doc.Pools, doc.SIMCaps)
	}
	if strings.Contains(string(rb.Raw), "acme-") {
		t.Error("B's export holds A's pools or caps")
	}

	// A company that has neither, or had them and took them off, has neither key.
	c := e.newCompany("Plain", "owner@plain.test")
	d := e.newCompany("Undone", "owner@undone.test")
	e.pairPhone(d.apiKey, "undone-1")
	p := e.createPool(d.apiKey, map[string]any{"name": "brief", "members": members("undone-1", "SIM1")})
	e.want(e.do(call{method: "DELETE", path: fmt.Sprintf("/pools/%v", p.Body["id"]), token: d.apiKey}), http.StatusOK, "")
	e.setCaps(d.apiKey, "undone-1", map[string]any{"slot": "SIM1", "per_day": 3})
	e.setCaps(d.apiKey, "undone-1", map[string]any{"slot": "SIM1"})
	for _, co := range []company{c, d} {
		r := e.do(call{method: "GET", path: "/company/export", token: co.apiKey})
		e.want(r, http.StatusOK, "")
		for _, key := range []string{"pools", "sim_caps"} {
			if strings.Contains(string(r.Raw), `"`+key+`"`) {
				t.Errorf("%s: %q in %s", co.email, key, r.Raw)
			}
		}
	}
}
