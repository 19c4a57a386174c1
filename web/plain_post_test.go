package web_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/channel"
)

// plainPost sends a form as a browser without the script does, and answers
// the page its redirect leads to with the address it led to.
func (b *browser) plainPost(path string, form url.Values) (page, *url.URL) {
	b.e.t.Helper()
	form.Set("csrf", b.csrf)
	p := b.postForm(path, form.Encode(), "application/x-www-form-urlencoded")
	if p.status != http.StatusSeeOther {
		b.e.t.Fatalf("plain post %s: %d %s, want a redirect", path, p.status, p.body)
	}
	to, err := url.Parse(p.location)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return b.get(p.location), to
}

// A plain post refused on a number's page comes back to that page, with
// the error beside the field it names: it went to the list of numbers,
// which has none of the caps' or the send's fields.
func TestPlainPostOnANumberComesBackToItsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	base := "/console/numbers/whatsapp/" + wa
	for _, tc := range []struct {
		path, field string
		form        url.Values
	}{
		{base + "/pacing", "caps.per_minute", url.Values{"caps.per_minute": {"two"}}},
		{base + "/send", "media_url", url.Values{"to": {"+15550100999"}, "type": {"image"}, "media_url": {"http://example.com/a.jpg"}}},
		{base + "/status", "status", url.Values{"status": {"gone"}}},
	} {
		p, to := b.plainPost(tc.path, tc.form)
		if to.Path != base || to.Query().Get("field") != tc.field {
			t.Errorf("%s: refused to %s, want %s naming %s", tc.path, to, base, tc.field)
			continue
		}
		msg := to.Query().Get("err")
		if p.status != http.StatusOK || !strings.Contains(html.UnescapeString(p.body), `id="err-`+tc.field+`">`+msg+`</span>`) && tc.field != "status" {
			t.Errorf("%s: the number's page shows %q beside %s nowhere: %d %.1500s", tc.path, msg, tc.field, p.status, p.body)
		}
		if got := html.UnescapeString(banner(p)); got != msg {
			t.Errorf("%s: banner %q, want %q", tc.path, got, msg)
		}
	}
}

// A plain post of the send box refused comes back to the thread of the
// device it was sent from, with the error beside its field: it went to the
// page's first device, whose send box sends from another phone.
func TestPlainPostOfTheSendBoxComesBackToItsDevice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	e.pairPhone(e.pairingCode(key), "fp-2", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	p, to := b.plainPost("/console/messages/send", url.Values{"device_fingerprint": {"fp-2"}, "phone": {"not a number"}, "message": {"hi"}, "sim_slot": {"SIM1"}})
	if to.Path != "/console/messages" || to.Query().Get("device") != "fp-2" || to.Query().Get("field") != "phone" {
		t.Fatalf("refused to %s, want the thread of fp-2 naming phone", to)
	}
	if !strings.Contains(p.body, `name="device_fingerprint" value="fp-2"`) || !strings.Contains(p.body, `<option value="fp-2" selected>`) {
		t.Errorf("the page it came back to sends from another device: %.3000s", p.body)
	}
	if msg := to.Query().Get("err"); !strings.Contains(html.UnescapeString(p.body), `id="err-phone">`+msg+`</span>`) {
		t.Errorf("the error %q is not beside the phone: %.3000s", msg, p.body)
	}
}
