package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
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
		// Bytes that are not UTF-8 (%FF) are as unstorable on PostgreSQL.
		{"/console/settings/company", url.Values{"name": {"Acme\xff"}}, "name"},
		{"/console/messages/send", url.Values{"device_fingerprint": {"fp-1\xff"}, "phone": {"+15551234567"}, "message": {"hi"}, "sim_slot": {"SIM1"}}, "device_fingerprint"},
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

// TestConsolePagesRefuseNULAsPages: a NUL (%00) in a console page's query
// or path is the console's own error page, 400 or 404, for a person in a
// browser (the JSON error body the console's script gets when it asks for
// JSON), before any lookup; the API's routes keep their JSON answers.
func TestConsolePagesRefuseNULAsPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	for _, c := range []struct {
		path   string
		status int
		says   string
	}{
		{"/console/messages?phone=%2B1555%00", http.StatusBadRequest, "phone"},
		{"/console/opt-outs?after=%00", http.StatusBadRequest, "after"},
		{"/verify-email?token=a%00", http.StatusBadRequest, "token"},
		{"/console/devices/a%00", http.StatusNotFound, "There is no such page."},
		{"/console/messages?phone=%2B1555%FF", http.StatusBadRequest, "phone"},
		{"/console/messages?device=%FF", http.StatusBadRequest, "device"},
		{"/console/devices/a%FF", http.StatusNotFound, "There is no such page."},
	} {
		p := b.get(c.path)
		if !p.errorPage(c.status, c.says) {
			t.Errorf("GET %s: %d %s, want the console's %d error page naming %q:\n%s", c.path, p.status, p.header.Get("Content-Type"), c.status, c.says, p.body)
		}
	}
	// The console's script asks for JSON and gets the API's error body.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/console/messages?phone=%00", nil)
	req.Header.Set("Accept", "application/json")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := read(t, res); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"phone"`) {
		t.Errorf("GET /console/messages?phone=%%00 asking for JSON: %d %s, want 400 naming phone", p.status, p.body)
	}
	// The API's route still answers its JSON 400.
	req, _ = http.NewRequest(http.MethodGet, e.url+"/opt-outs?after=%00", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err = testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := read(t, res); p.status != http.StatusBadRequest || !strings.HasPrefix(p.header.Get("Content-Type"), "application/json") ||
		!strings.Contains(p.body, `"error":"validation_failed"`) || !strings.Contains(p.body, `"field":"after"`) {
		t.Errorf("GET /opt-outs?after=%%00: %d %s %s, want the API's JSON 400 naming after", p.status, p.header.Get("Content-Type"), p.body)
	}
}
