package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/web"
)

// TestSettingsTellsOfEmailToSMS: with the SMTP listener on, an admin's
// settings page says how to mail an SMS; with it off, nothing of it shows.
func TestSettingsTellsOfEmailToSMS(t *testing.T) {
	t.Parallel()
	on := newEnv(t, func(o *envOptions) { o.email = web.EmailToSMS{Domain: "sms.acme.test", Port: "2525", STARTTLS: true} })
	on.company("Acme", "ada@acme.test", "Correct1horse")
	admin := on.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	page := admin.get("/console/settings").body
	for _, want := range []string{"E-mail to SMS", "+15551234567@sms.acme.test", "+15551234567+dev-FINGERPRINT@sms.acme.test", "+15551234567+pool-NAME@sms.acme.test", "port <code>2525</code>, STARTTLS"} {
		if !strings.Contains(page, want) {
			t.Errorf("settings page lacks %q", want)
		}
	}

	// With the company's e-mail device set, the page names it: the mail
	// without a device in its address goes from that phone.
	if strings.Contains(page, "The company's e-mail device is") {
		t.Error("with no e-mail device set, the settings page names one")
	}
	key := on.company("Beta", "bo@beta.test", "Correct1horse")
	on.registerPhone(on.pairingCode(key), "fp-mail")
	req, _ := http.NewRequest(http.MethodPatch, on.url+"/company", strings.NewReader(`{"emailDevice": "fp-mail"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PATCH /company emailDevice: %d", res.StatusCode)
	}
	bo := on.browser()
	bo.signIn("bo@beta.test", "Correct1horse")
	if page := bo.get("/console/settings").body; !strings.Contains(page, "The company's e-mail device is <code>fp-mail</code>") {
		t.Errorf("with an e-mail device set, the settings page does not name it:\n%s", page)
	}

	off := newEnv(t)
	off.company("Acme", "ada@acme.test", "Correct1horse")
	admin = off.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	if strings.Contains(admin.get("/console/settings").body, "E-mail to SMS") {
		t.Error("with the listener off, the settings page tells of e-mail to SMS")
	}
}
