package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleFormsRefuseNUL: a form field holding U+0000 is the user's 400
// naming the field, on either store, before the action runs. PostgreSQL
// cannot hold U+0000, so saving it was a 500 there (and stored as typed on
// bbolt); the API refuses it the same way.
func TestConsoleFormsRefuseNUL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", true)
	for _, c := range []struct {
		path  string
		form  url.Values
		field string
	}{
		{"/console/settings/company", url.Values{"name": {"Acme\x00"}}, "name"},
		{"/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15551234567"}, "message": {"a\x00b"}, "sim_slot": {"SIM1"}}, "message"},
	} {
		p := b.post(c.path, c.form)
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", c.path, p.status, p.body, c.field)
		}
	}
	if p := b.get("/console/settings"); !strings.Contains(p.body, `name="name" value="Acme"`) {
		t.Errorf("the company's name changed: %s", p.body)
	}
}
