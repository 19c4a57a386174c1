package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// A plain post the server refuses comes back to its form with what was
// typed in it, escaped: the form came back empty, the message to write
// again. What comes back is shown once, in this browser, on the page of
// that very error.
func TestPlainPostRefusalKeepsWhatWasTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	text := `Tomorrow at <b>9</b> & "bring" the keys`
	p, to := b.plainPost("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"},
		"message": {text}, "sim_slot": {"SIM2"}, "send_at": {"2031-05-04T10:30"}})
	if banner(p) == "" { // Send at, 30 days ahead at most
		t.Fatalf("refused to %s: %d, banner %q", to, p.status, banner(p))
	}
	for _, want := range []string{
		">\nTomorrow at &lt;b&gt;9&lt;/b&gt; &amp; &#34;bring&#34; the keys</textarea>",
		`name="phone" type="tel" value="&#43;15550100000"`,
		`<option selected>SIM2</option>`,
		`name="send_at" type="datetime-local" value="2031-05-04T10:30"`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the send form came back without %s", want)
		}
	}
	if strings.Contains(to.RawQuery, "Tomorrow") {
		t.Errorf("the text rode in the address: %s", to)
	}
	// Once: the same page again has an empty box.
	if again := b.get(to.RequestURI()); regexp.MustCompile(`(?s)id="message"[^>]*>\n[^<]+</textarea>`).MatchString(again.body) {
		t.Errorf("the text is still in the box on the page's next load")
	}

	p, _ = b.plainPost("/console/opt-outs", url.Values{"phone": {"12ab<"}})
	if banner(p) == "" || !strings.Contains(p.body, `name="phone" type="tel" value="12ab&lt;"`) {
		t.Errorf("the opt-out form came back without the number typed (banner %q)", banner(p))
	}

	inv := url.Values{"email": {"ada@acme.test"}, "firstName": {"Ada"}, "lastName": {"Again"}, "role": {"admin"}}
	p, _ = b.plainPost("/console/team/invite", inv)
	if banner(p) == "" {
		t.Fatalf("inviting a member already there was not refused: %d", p.status)
	}
	for _, want := range []string{`name="email" type="email" value="ada@acme.test"`, `name="firstName" value="Ada"`,
		`name="lastName" value="Again"`, `<option selected>admin</option></select>`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the invite form came back without %s", want)
		}
	}

	// Another browser of the same user, handed the address, shows nothing typed.
	other := e.browser()
	other.signIn("ada@acme.test", "Correct1horse")
	if q := other.get(to.RequestURI()); strings.Contains(q.body, "bring") {
		t.Errorf("another browser's page shows the text typed")
	}
}

// What comes back rides in a cookie of a minute, HttpOnly, under a
// browser's 4 KB: a text too long for it is left out, and the number, the
// SIM and the time typed still come back.
func TestPlainPostRefusalKeepsTheRestOfALongText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	form := url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {strings.Repeat("é", 1600)},
		"sim_slot": {"SIM2"}, "send_at": {"2031-05-04T10:30"}, "csrf": {b.csrf}}
	p := b.postForm("/console/messages/send", form.Encode(), "application/x-www-form-urlencoded")
	res := http.Response{Header: p.header}
	var typed *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "simrelay_typed" {
			typed = ck
		}
	}
	if typed == nil || !typed.HttpOnly || typed.MaxAge != 60 || len(typed.Value) > 3500 || typed.Path != "/" {
		t.Fatalf("the refusal's cookie: %+v", typed)
	}
	back := b.get(p.location)
	if !strings.Contains(back.body, `value="2031-05-04T10:30"`) || !strings.Contains(back.body, `<option selected>SIM2</option>`) ||
		strings.Contains(back.body, "éé") {
		t.Errorf("the form came back without the time and the SIM, or with the text too long to keep")
	}
}
