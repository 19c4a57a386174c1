package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleFormsRefuseLineBreaksInNames: the console's forms that set a
// name answer a name holding a line break or another control character as
// the API does, 400 naming the field, which the page shows beside it
// (TestFormErrorsNameTheField); a name with a joiner is taken.
func TestConsoleFormsRefuseLineBreaksInNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", true)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")

	forms := []struct {
		path, field string
		form        func(name string) url.Values
	}{
		{"/console/settings/company", "name", func(n string) url.Values { return url.Values{"name": {n}} }},
		{"/console/team/invite", "lastName", func(n string) url.Values {
			return url.Values{"email": {"mo@acme.test"}, "firstName": {"Mo"}, "lastName": {n}, "role": {"member"}}
		}},
		{"/console/devices/fp-1", "device_name", func(n string) url.Values {
			return url.Values{"device_name": {n}, "selected_sim": {"BOTH"}, "status": {"active"}}
		}},
		{"/console/pools", "name", func(n string) url.Values { return url.Values{"name": {n}, "members": {"fp-1/SIM1"}} }},
	}
	for _, f := range forms {
		for _, name := range []string{"Evil\nline", "a\r\nb", "tab\there", "esc\x1b[2J", "nel\u0085x", "ls\u2028x", "ps\u2029x"} {
			p := b.post(f.path, f.form(name))
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"`+f.field+`"`) {
				t.Errorf("POST %s with %s %q: got %d %s, want 400 naming %s", f.path, f.field, name, p.status, p.body, f.field)
			}
		}
	}
	for _, f := range forms[:3] {
		if p := b.post(f.path, f.form("Mo\u200cj\U0001F469\u200d\U0001F4BB")); p.status != http.StatusOK {
			t.Errorf("POST %s with joiners in %s: got %d %s, want 200", f.path, f.field, p.status, p.body)
		}
	}

	// Signing up, without a session.
	stranger := e.browser()
	anon := tokenOf(t, stranger.get("/console/signup"))
	form := url.Values{"csrf": {anon}, "company.name": {"Acme\nInc"}, "company.phone": {"+15550100000"}, "owner.firstName": {"Ada"},
		"owner.lastName": {"L"}, "owner.email": {"eve@acme.test"}, "owner.password": {"Correct1horse"}, "password2": {"Correct1horse"}}
	if p := stranger.post("/console/signup", form); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"company.name"`) {
		t.Errorf("signup with a line break in company.name: got %d %s, want 400 naming company.name", p.status, p.body)
	}
}

// TestConsoleErrorsNameFieldsForPeople: the console says what is wrong with
// a field by the name a person reads ("Selected SIM must be ..."), not by
// the API's path ("selected_sim must be ..."), and still names the field
// for the page to place the message beside it.
func TestConsoleErrorsNameFieldsForPeople(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", true)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	p := b.post("/console/devices/fp-1", url.Values{"device_name": {"Pixel"}, "selected_sim": {"SIM9"}, "status": {"active"}})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, `"message":"Selected SIM must be SIM1, SIM2 or BOTH."`) || !strings.Contains(p.body, `"field":"selected_sim"`) {
		t.Errorf("a bad selected_sim: got %d %s, want 400 saying \"Selected SIM must be ...\" on field selected_sim", p.status, p.body)
	}

	stranger := e.browser()
	anon := tokenOf(t, stranger.get("/console/signup"))
	form := url.Values{"csrf": {anon}, "company.name": {"Acme"}, "company.phone": {"+15550100000"}, "owner.firstName": {"Ada"},
		"owner.lastName": {"L"}, "owner.email": {"eve@acme.test"}, "owner.password": {"short"}, "password2": {"short"}}
	p = stranger.post("/console/signup", form)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, `"message":"Password `) || strings.Contains(p.body, "owner.password must") {
		t.Errorf("a short password at signup: got %d %s, want 400 whose message begins \"Password \"", p.status, p.body)
	}
}
