package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// errField is the field of a JSON error answer.
func errField(t *testing.T, p page) string {
	t.Helper()
	var body struct {
		Error, Message, Field string
	}
	if err := json.Unmarshal([]byte(p.body), &body); err != nil || body.Message == "" {
		t.Fatalf("not the contract's error body: %d %s", p.status, p.body)
	}
	return body.Field
}

// The pools page defines pools, adds and removes members and sets SIM
// caps through the same services as the API: bad fields are named,
// another company's pool is not found.
func TestPoolsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Other", "bo@other.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	e.pairPhone(e.pairingCode(key), "fp-2", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")

	for _, c := range []struct {
		form  url.Values
		field string
	}{
		{url.Values{"name": {"sales"}, "strategy": {"random"}, "members": {"fp-1/SIM1"}}, "strategy"},
		{url.Values{"name": {"sales"}, "strategy": {"round_robin"}}, "members"},
		{url.Values{"name": {"sales"}, "failover_after": {"soon"}, "members": {"fp-1/SIM1"}}, "failover_after"},
		{url.Values{"name": {"sales"}, "failover_after": {"5"}, "members": {"fp-1/SIM1"}}, "failover_after"},
	} {
		p := b.post("/console/pools", c.form)
		if p.status != http.StatusBadRequest || errField(t, p) != c.field {
			t.Errorf("%v: got %d %s, want 400 on %s", c.form, p.status, p.body, c.field)
		}
	}
	p := b.post("/console/pools", url.Values{"name": {"sales"}, "strategy": {"sticky"}, "fallback": {"least_loaded"}, "failover_after": {"600"}, "members": {"fp-1/SIM1", "fp-2/SIM1"}})
	if p.status != http.StatusOK {
		t.Fatalf("define a pool: %d %s", p.status, p.body)
	}
	pools, err := e.sms.Pools(t.Context(), 1)
	if err != nil || len(pools) != 1 || pools[0].Strategy != "sticky" || pools[0].Fallback != "least_loaded" || len(pools[0].Members) != 2 {
		t.Fatalf("stored pools %+v (%v), want the sticky pool of two", pools, err)
	}
	// Ids as the store gave them: PostgreSQL's sequences are the
	// database's, and a refused form above may have taken one.
	id, firstMember := fmt.Sprint(pools[0].ID), ""
	for _, m := range pools[0].Members {
		if m.Device == "fp-1" && m.SIMSlot == "SIM1" {
			firstMember = fmt.Sprint(m.ID)
		}
	}
	if p := b.post("/console/pools/"+id+"/members", url.Values{"member": {"fp-2/SIM2"}}); p.status != http.StatusOK {
		t.Fatalf("add a member: %d %s", p.status, p.body)
	}
	if p := b.post("/console/pools/"+id, url.Values{"strategy": {"round_robin"}, "fallback": {"least_loaded"}, "failover_after": {"0"}}); p.status != http.StatusOK {
		t.Fatalf("change the pool: %d %s", p.status, p.body)
	}
	page := b.get("/console/pools").body
	for _, want := range []string{`data-pool="sales"`, `data-member="fp-1/SIM1"`, `data-member="fp-2/SIM2"`, `<option value="round_robin" selected>`, `value="0"`,
		// A member is named by its device's name, as the devices page
		// names it, the fingerprint beside it.
		`<td><bdi>Phone fp-2</bdi> <code class="small muted">fp-2</code></td><td>SIM2</td>`,
		`data-confirm="Take Phone fp-2 SIM2 out of sales?"`,
		// Both slots of each device, to add to a pool and to a new one.
		`err-sim_slot-` + id + `"><option value="fp-1/SIM1">Phone fp-1 SIM1 (fp-1)</option><option value="fp-1/SIM2">Phone fp-1 SIM2 (fp-1)</option><option value="fp-2/SIM1">Phone fp-2 SIM1 (fp-2)</option><option value="fp-2/SIM2">Phone fp-2 SIM2 (fp-2)</option></select>`,
		`<label><input type="checkbox" name="members" value="fp-2/SIM1"> <bdi>Phone fp-2</bdi> SIM1 <code class="small muted">fp-2</code></label><label><input type="checkbox" name="members" value="fp-2/SIM2"> <bdi>Phone fp-2</bdi> SIM2 <code class="small muted">fp-2</code></label>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if p := b.post("/console/pools/"+id+"/members/"+firstMember+"/remove", nil); p.status != http.StatusOK {
		t.Fatalf("remove a member: %d %s", p.status, p.body)
	}
	if strings.Contains(b.get("/console/pools").body, `data-member="fp-1/SIM1"`) {
		t.Error("the removed member is still listed")
	}

	// Caps: blank is none, 0 is refused on its field.
	if p := b.post("/console/pools/caps", url.Values{"sim": {"fp-1/SIM1"}, "per_day": {"0"}}); p.status != http.StatusBadRequest || errField(t, p) != "per_day" {
		t.Errorf("a cap of 0: got %d %s, want 400 on per_day", p.status, p.body)
	}
	for range 6 { // two fields that are not numbers: the form's first, every time
		if p := b.post("/console/pools/caps", url.Values{"sim": {"fp-1/SIM1"}, "per_day": {"x"}, "per_month": {"y"}, "recipients_per_day": {"z"}}); p.status != http.StatusBadRequest || errField(t, p) != "per_day" {
			t.Fatalf("three caps not numbers: got %d %s, want 400 on per_day", p.status, p.body)
		}
	}
	if p := b.post("/console/pools/caps", url.Values{"sim": {"fp-1/SIM1"}, "per_day": {"5"}, "per_month": {""}}); p.status != http.StatusOK {
		t.Fatalf("set caps: %d %s", p.status, p.body)
	}
	if !strings.Contains(b.get("/console/pools").body, `<tr data-sim="fp-1/SIM1"><td><bdi>Phone fp-1</bdi> SIM1 <code class="small muted">fp-1</code></td><td>0 / 5</td><td>0 / none</td>`) {
		t.Error("the caps table does not show fp-1 SIM1's cap of 5 a day")
	}

	// Another company's admin finds no such pool, device or member.
	o := e.browser()
	o.signIn("bo@other.test", "Correct1horse")
	for path, form := range map[string]url.Values{
		"/console/pools/" + id:                       {"strategy": {"sticky"}},
		"/console/pools/" + id + "/delete":           nil,
		"/console/pools/" + id + "/members":          {"member": {"fp-1/SIM2"}},
		"/console/pools/" + id + "/members/2/remove": nil,
		"/console/pools/caps":                        {"sim": {"fp-1/SIM1"}, "per_day": {"1"}},
	} {
		if p := o.post(path, form); p.status != http.StatusNotFound {
			t.Errorf("POST %s by another company: got %d %s, want 404", path, p.status, p.body)
		}
	}
	if p := b.post("/console/pools/"+id+"/delete", nil); p.status != http.StatusOK {
		t.Fatalf("delete the pool: %d %s", p.status, p.body)
	}
}

// TestPoolsPageWithoutDevicesLinksToPairing: a company with no phone yet
// reads on the pools page where to pair one, a link, as the overview's and
// the messages page's empty states give (it was a sentence to no page).
func TestPoolsPageWithoutDevicesLinksToPairing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	p := b.get("/console/pools")
	if p.status != http.StatusOK || !strings.Contains(p.body, `<a href="/console/devices">Pair a phone</a> first: a pool's members are its SIMs.`) {
		t.Errorf("the pools page without devices: %d, no link to pair a phone in\n%s", p.status, p.body)
	}
}
