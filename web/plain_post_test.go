package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
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
	if !strings.Contains(p.body, `name="device_fingerprint" value="fp-2"`) || !strings.Contains(p.body, `<option value="fp-2" selected data-online=`) {
		t.Errorf("the page it came back to sends from another device: %.3000s", p.body)
	}
	if msg := to.Query().Get("err"); !strings.Contains(html.UnescapeString(p.body), `id="err-phone">`+msg+`</span>`) {
		t.Errorf("the error %q is not beside the phone: %.3000s", msg, p.body)
	}
}

// Each device has its own form with a name field: a plain post's error
// shows beside the name of the device it was posted for, not of every
// device, and each name input is described by its own form's message
// (one id each; every form's span had the one id err-device_name, so a
// screen reader read the first device's, empty, for any other).
func TestDeviceFormErrorIsThatDevicesOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	e.pairPhone(e.pairingCode(key), "fp-2", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	p, to := b.plainPost("/console/devices/fp-2", url.Values{"device_name": {strings.Repeat("n", 101)}, "selected_sim": {"BOTH"}, "status": {"active"}})
	msg := to.Query().Get("err")
	if to.Path != "/console/devices" || to.Query().Get("field") != "device_name" || msg == "" {
		t.Fatalf("refused to %s, want the devices page naming device_name", to)
	}
	body := html.UnescapeString(p.body)
	if n := strings.Count(body, msg); n != 2 { // the banner and the field
		t.Errorf("the error shows %d times, want in the banner and beside fp-2's name once", n)
	}
	for _, fp := range []string{"fp-1", "fp-2"} {
		if n := strings.Count(body, `id="err-device_name-`+fp+`"`); n != 1 || !strings.Contains(body, `id="name-`+fp+`" name="device_name" value="Phone `+fp+`" maxlength="100" aria-describedby="err-device_name-`+fp+`"`) {
			t.Errorf("%s's name is not described by its own message (%d spans)", fp, n)
		}
	}
	if !strings.Contains(body, `id="err-device_name-fp-2">`+msg+`</span>`) {
		t.Errorf("the error is not beside fp-2's name: %.3000s", p.body)
	}
	if strings.Contains(body, `id="err-device_name"`) {
		t.Error("a form's message still has the id every form shares")
	}
}

// The pools page repeats a pool's fields in each pool's forms and in the
// new pool's: a plain post's error shows beside the field of the form it
// was posted from alone, each field described by its own message. Every
// pool's failover went to one message outside all forms (where the script
// found no place for it), and the new pool's strategy had none.
func TestPoolFormErrorIsThatFormsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	for _, name := range []string{"sales", "support"} {
		if p := b.post("/console/pools", url.Values{"name": {name}, "strategy": {"round_robin"}, "members": {"fp-1/SIM1"}}); p.status != http.StatusOK {
			t.Fatalf("define %s: %d %s", name, p.status, p.body)
		}
	}
	ids := regexp.MustCompile(`action="/console/pools/(\d+)"`).FindAllStringSubmatch(b.get("/console/pools").body, -1)
	if len(ids) != 2 {
		t.Fatalf("pools on the page: %v", ids)
	}
	second := ids[1][1]
	for _, tc := range []struct {
		path, field, at string
		form            url.Values
	}{
		{"/console/pools/" + second, "failover_after", second, url.Values{"strategy": {"round_robin"}, "failover_after": {"5"}}},
		{"/console/pools/" + second, "strategy", second, url.Values{"strategy": {"random"}}},
		{"/console/pools", "failover_after", "new", url.Values{"name": {"ops"}, "strategy": {"round_robin"}, "failover_after": {"5"}, "members": {"fp-1/SIM1"}}},
		{"/console/pools", "strategy", "new", url.Values{"name": {"ops"}, "strategy": {"random"}, "members": {"fp-1/SIM1"}}},
	} {
		p, to := b.plainPost(tc.path, tc.form)
		msg := to.Query().Get("err")
		if to.Path != "/console/pools" || to.Query().Get("field") != tc.field || msg == "" {
			t.Errorf("%s %v: refused to %s, want the pools page naming %s", tc.path, tc.form, to, tc.field)
			continue
		}
		body := html.UnescapeString(p.body)
		if n := strings.Count(body, msg); n != 2 {
			t.Errorf("%s %v: the error shows %d times, want in the banner and beside its field once", tc.path, tc.form, n)
		}
		if !strings.Contains(body, `id="err-`+tc.field+`-`+tc.at+`">`+msg+`</span>`) {
			t.Errorf("%s %v: the error is not beside %s of form %s: %.4000s", tc.path, tc.form, tc.field, tc.at, p.body)
		}
		for _, at := range []string{ids[0][1], second, "new"} {
			if n := strings.Count(body, `id="err-`+tc.field+`-`+at+`"`); n != 1 || !strings.Contains(body, `aria-describedby="err-`+tc.field+`-`+at+`"`) {
				t.Errorf("%s of form %s: %d messages, or its field is not described by its own", tc.field, at, n)
			}
		}
	}
}

// The team page repeats the role field in each user's role form and in the
// invitation's: a role change's error (the company's last admin demoted,
// a role that is none) shows beside that user's role, and an invitation's
// beside its own, each select described by its own message. A role
// change's error showed in the banner alone: the last admin's conflict
// named no field, and a plain post's came back to the invitation's role.
func TestRoleFormErrorIsThatUsersOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	if p := b.post("/console/team/invite", url.Values{"email": {"bob@acme.test"}, "firstName": {"Bob"}, "lastName": {"B"}, "role": {"member"}}); p.status != http.StatusOK {
		t.Fatalf("invite: %d %s", p.status, p.body)
	}
	ids := regexp.MustCompile(`action="/console/team/(\d+)/role"`).FindAllStringSubmatch(b.get("/console/team").body, -1)
	if len(ids) != 2 {
		t.Fatalf("role forms on the page: %v", ids)
	}
	ada, bob := ids[0][1], ids[1][1]

	// The script's post: the conflict names the role.
	p := b.post("/console/team/"+ada+"/role", url.Values{"role": {"member"}})
	if p.status != http.StatusConflict || !strings.Contains(p.body, `"field":"role"`) || !strings.Contains(p.body, "at least one admin") {
		t.Fatalf("the last admin demoted by the script: %d %s, want 409 naming role", p.status, p.body)
	}
	for _, tc := range []struct {
		path, at string
		form     url.Values
	}{
		{"/console/team/" + ada + "/role", ada, url.Values{"role": {"member"}}},
		{"/console/team/" + bob + "/role", bob, url.Values{"role": {"owner"}}},
		{"/console/team/invite", "invite", url.Values{"email": {"cy@acme.test"}, "firstName": {"Cy"}, "lastName": {"C"}, "role": {"owner"}}},
	} {
		p, to := b.plainPost(tc.path, tc.form)
		msg := to.Query().Get("err")
		if to.Path != "/console/team" || to.Query().Get("field") != "role" || msg == "" {
			t.Errorf("%s %v: refused to %s, want the team page naming role", tc.path, tc.form, to)
			continue
		}
		body := html.UnescapeString(p.body)
		if n := strings.Count(body, msg); n != 2 {
			t.Errorf("%s %v: the error shows %d times, want in the banner and beside its field once", tc.path, tc.form, n)
		}
		if !strings.Contains(body, `id="err-role-`+tc.at+`">`+msg+`</span>`) {
			t.Errorf("%s %v: the error is not beside the role of form %s: %.4000s", tc.path, tc.form, tc.at, p.body)
		}
		for _, at := range []string{ada, bob, "invite"} {
			if n := strings.Count(body, `id="err-role-`+at+`"`); n != 1 || !strings.Contains(body, `aria-describedby="err-role-`+at+`"`) {
				t.Errorf("role of form %s: %d messages, or its select is not described by its own", at, n)
			}
		}
	}
}
