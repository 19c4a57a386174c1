package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/store"
)

// breakingNames are names that break a line or a record: each is refused
// wherever a person or an integrator sets a name (internal/linebreak).
var breakingNames = map[string]string{
	"LF":        "Acme\nEvil line",
	"CR":        "Acme\rEvil",
	"tab":       "Acme\tCorp",
	"ESC":       "Acme\x1b[31m",
	"DEL":       "Acme\x7f",
	"NEL":       "Acme\u0085Evil",
	"C1":        "Acme\u009bEvil",
	"LS U+2028": "Acme\u2028Evil",
	"PS U+2029": "Acme\u2029Evil",
}

// TestNamesRefuseLineBreaks: every REST route that sets a name answers 400
// validation_failed naming the field for a name holding a line break or
// another control character, and keeps the name it had; names with the
// joiners scripts and emoji need (ZWJ, ZWNJ) and a bidi mark are taken.
func TestNamesRefuseLineBreaks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@names.test")
	e.pairPhone(a.apiKey, "n-1")
	pool := e.createPool(a.apiKey, map[string]any{"name": "sales", "members": members("n-1", "SIM1")})
	e.want(pool, http.StatusCreated, "")
	poolPath := "/pools/" + strconv.Itoa(int(pool.Body["id"].(float64)))

	type route struct {
		method, path, token, field string
		body                       func(name string) map[string]any
		// read answers the name stored (for PATCH routes), to see a refusal kept it.
		read func() string
	}
	field := func(path, token, key string) func() string {
		return func() string {
			r := e.do(call{method: "GET", path: path, token: token})
			e.want(r, http.StatusOK, "")
			return r.str(key)
		}
	}
	deviceName := func() string {
		r := e.do(call{method: "GET", path: "/device/list", token: a.apiKey})
		e.want(r, http.StatusOK, "")
		return r.Body["devices"].([]any)[0].(map[string]any)["device_name"].(string)
	}
	signup := func(company, first string) map[string]any {
		return map[string]any{
			"company": map[string]any{"name": company, "phone": "+1 555 010 0001", "country": "us"},
			"owner":   map[string]any{"firstName": first, "lastName": "Admin", "email": "new@names.test", "password": goodPassword},
		}
	}
	routes := []route{
		{"POST", "/auth/signup", "", "company.name", func(n string) map[string]any { return signup(n, "Ana") }, nil},
		{"POST", "/auth/signup", "", "owner.firstName", func(n string) map[string]any { return signup("Beta", n) }, nil},
		{"PATCH", "/company", a.access, "name", func(n string) map[string]any { return map[string]any{"name": n} }, field("/company", a.access, "name")},
		{"PATCH", "/company", a.access, "city", func(n string) map[string]any { return map[string]any{"city": n} }, field("/company", a.access, "city")},
		{"PATCH", "/users/me", a.access, "lastName", func(n string) map[string]any { return map[string]any{"lastName": n} }, field("/users/me", a.access, "lastName")},
		{"POST", "/users", a.access, "firstName", func(n string) map[string]any {
			return map[string]any{"firstName": n, "lastName": "Ng", "email": "ivy@names.test", "role": "member"}
		}, nil},
		{"PATCH", "/device/n-1", a.apiKey, "device_name", func(n string) map[string]any { return map[string]any{"device_name": n} }, deviceName},
		{"PATCH", poolPath, a.apiKey, "name", func(n string) map[string]any { return map[string]any{"name": n} }, field(poolPath, a.apiKey, "name")},
	}
	for _, rt := range routes {
		var before string
		if rt.read != nil {
			before = rt.read()
		}
		for what, name := range breakingNames {
			r := e.do(call{method: rt.method, path: rt.path, token: rt.token, body: rt.body(name)})
			if r.Status != http.StatusBadRequest || r.str("error") != "validation_failed" || r.str("field") != rt.field || r.str("message") == "" {
				t.Errorf("%s %s with a %s in %s: got %d %s, want 400 validation_failed on %s", rt.method, rt.path, what, rt.field, r.Status, r.Raw, rt.field)
			}
		}
		if rt.read != nil {
			if got := rt.read(); got != before {
				t.Errorf("%s %s: the refusals changed %s to %q, want %q kept", rt.method, rt.path, rt.field, got, before)
			}
		}
	}

	// What scripts, emoji and text direction need is not a line break.
	for _, name := range []string{"\u0645\u06cc\u200c\u0631\u0648\u0645", "Team \U0001F469\u200d\U0001F4BB", "Ana Sales 2"} {
		for _, rt := range routes[2:] {
			if rt.method != "PATCH" {
				continue
			}
			r := e.do(call{method: rt.method, path: rt.path, token: rt.token, body: rt.body(name)})
			e.want(r, http.StatusOK, "")
			if got := rt.read(); got != name {
				t.Errorf("%s %s %s = %q, want %q stored as given", rt.method, rt.path, rt.field, got, name)
			}
		}
	}
	// A bidi mark is the display's business (docs/security.md), except in a
	// pool's name, an identifier (docs/api.md "Sender pools").
	r := e.do(call{method: "PATCH", path: "/company", token: a.access, body: map[string]any{"name": "\u05d0\u05e7\u05de\u05d4 \u200f2"}})
	e.want(r, http.StatusOK, "")
	// A pool's name refuses the marks (RLM, ALM) as well as the overrides
	// and isolates package bidi strips: every Bidi_Control (sms.badInPoolName).
	for _, name := range []string{"\u05d0\u05e7\u05de\u05d4 \u200f2", "sales\u061c2", "sales\u202e2", "sales\u20662"} {
		r := e.do(call{method: "PATCH", path: poolPath, token: a.apiKey, body: map[string]any{"name": name}})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != "name" {
			t.Errorf("PATCH %s name %q: field %q, want name", poolPath, name, got)
		}
	}
}

// TestPhoneReportedNamesAreMended: a phone's own name, SIM carriers and
// operators reach the server from the phone, which cannot retype them: a
// line break or control character in them is replaced by a space and the
// pairing and the link go on (PROTOCOL.md).
func TestPhoneReportedNamesAreMended(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@mend.test")
	r := e.do(call{method: "POST", path: "/device/pairing", token: a.apiKey})
	e.want(r, http.StatusCreated, "")
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: r.str("pairing_code"), DeviceFingerprint: "m-1", DeviceName: "Pixel\r\n7\u2028Pro\t",
		SIMs: []proto.SIM{{Slot: "SIM1", Carrier: "Acme\nMobile"}}, AppVersion: "1.2\n",
	})
	if err != nil {
		t.Fatalf("register with control characters in its names: %v, want it paired", err)
	}
	dev := func() map[string]any {
		r := e.do(call{method: "GET", path: "/device/list", token: a.apiKey})
		e.want(r, http.StatusOK, "")
		return r.Body["devices"].([]any)[0].(map[string]any)
	}
	carrier := func(d map[string]any) string {
		return d["sims"].([]any)[0].(map[string]any)["carrier"].(string)
	}
	if d := dev(); d["device_name"] != "Pixel  7 Pro" || carrier(d) != "Acme Mobile" {
		t.Errorf("registered as %q with carrier %q, want %q and %q", d["device_name"], carrier(d), "Pixel  7 Pro", "Acme Mobile")
	}

	op := "Op\u0085Two"
	p := client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello: proto.Hello{AppVersion: "test", SIMs: []proto.SIM{{Slot: "SIM1", Carrier: "Other\u2029Net"}},
			Health: &proto.Health{SIMs: []proto.SIMHealth{{Slot: "SIM1", Operator: op}}}},
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.eventually("the phone links with control characters in its hello", p.Connected)
	e.eventually("the hello's carrier is stored mended", func() bool { return carrier(dev()) == "Other Net" })
	raw, err := json.Marshal(dev()["health"])
	if want := `"operator":"Op Two"`; err != nil || !strings.Contains(string(raw), want) {
		t.Errorf("health %s, want %s", raw, want)
	}
}

// TestNamesStoredBeforeTheRuleKeepFormsWorking: the console's forms send
// every field, so a name stored before line breaks were refused (here
// written into the store as an older server would have, spaces around it)
// must not refuse a change of another field: the same name sent back, as
// stored or with the spaces around it trimmed (linebreak.SentBack), is
// kept, not checked. Changing the name itself is checked in full. Each of
// the three places that keep the rule (account, device, pools) is here.
func TestNamesStoredBeforeTheRuleKeepFormsWorking(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@oldnames.test")
	e.pairPhone(a.apiKey, "o-1")
	pool := e.createPool(a.apiKey, map[string]any{"name": "sales", "members": members("o-1", "SIM1")})
	e.want(pool, http.StatusCreated, "")
	poolID := uint64(pool.Body["id"].(float64))

	const old, oldPool = " Old\tname ", "sales\u2028old "
	if _, err := e.store.UpdateCompany(uint64(a.id), func(c *store.Company) error { c.Name, c.City = old, old; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateUser(uint64(a.adminID), func(u *store.User) error { u.FirstName = old; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateDevice(uint64(a.id), "o-1", func(d *store.Device) error { d.Name = old; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutPool(uint64(a.id), poolID, time.Now(), func(cur store.Pool) (store.PoolInput, error) {
		in := cur.Input()
		in.Name = oldPool
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		path, token, field, stored string
		other                      map[string]any // a change of another field
	}{
		{"/company", a.access, "name", old, map[string]any{"city": old, "state": "CA"}},
		{"/users/me", a.access, "firstName", old, map[string]any{"lastName": "Ng"}},
		{"/device/o-1", a.apiKey, "device_name", old, map[string]any{"sms_per_minute": 20}},
		{"/pools/" + strconv.FormatUint(poolID, 10), a.apiKey, "name", oldPool, map[string]any{"strategy": "least_loaded"}},
	} {
		for _, sent := range []string{c.stored, strings.TrimSpace(c.stored)} {
			body := map[string]any{c.field: sent}
			for k, v := range c.other {
				body[k] = v
			}
			r := e.do(call{method: "PATCH", path: c.path, token: c.token, body: body})
			if r.Status != http.StatusOK || r.str(c.field) != c.stored {
				t.Errorf("PATCH %s sending back the stored %s as %q with another change: %d %s, want 200 and the name kept", c.path, c.field, sent, r.Status, r.Raw)
				continue
			}
			for k, v := range c.other {
				if got := fmt.Sprint(r.Body[k]); got != fmt.Sprint(v) {
					t.Errorf("PATCH %s: %s is %s after the save, want %v", c.path, k, got, v)
				}
			}
		}
		// A new name with a line break is still refused.
		r := e.do(call{method: "PATCH", path: c.path, token: c.token, body: map[string]any{c.field: "New\nname"}})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != c.field {
			t.Errorf("PATCH %s with a new name holding a line break: field %q, want %s", c.path, got, c.field)
		}
	}
}
