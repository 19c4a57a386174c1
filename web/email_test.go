package web_test

import (
	"strings"
	"testing"

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

	off := newEnv(t)
	off.company("Acme", "ada@acme.test", "Correct1horse")
	admin = off.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	if strings.Contains(admin.get("/console/settings").body, "E-mail to SMS") {
		t.Error("with the listener off, the settings page tells of e-mail to SMS")
	}
}
