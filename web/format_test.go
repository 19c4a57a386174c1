package web_test

import (
	"bytes"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

var (
	timeElem   = regexp.MustCompile(`<time datetime="([^"]*)"[^>]*>([^<]*)</time>`)
	oneFormat  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d UTC$`)
	wireFormat = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d`)
	tags       = regexp.MustCompile(`<[^>]*>`)
)

// Every moment the console shows is written one way, with its zone; the
// wire's RFC 3339 stays in datetime attributes. The deliveries log shows an
// HTTP status as a plain cell, and a missing one in words.
func TestConsoleWritesEveryMomentOneWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	// A receiver that is not there: its attempts have no HTTP status.
	if p := b.post("/console/webhooks", url.Values{"rows": {"1"}, "webhooks[0].url": {"http://127.0.0.1:9/hook"}}); p.status != http.StatusOK {
		t.Fatalf("save webhooks: %d %s", p.status, p.body)
	}
	ph := e.pairPhone(e.pairingCode(key), "fp-1", true)
	<-ph.Receive(proto.Inbound{ClientID: "in-1", Channel: proto.ChannelSMS, From: "+15550100000", Message: "hello", SIMSlot: "SIM1"})
	at := e.clock.Now().Add(2 * time.Hour).UTC().Format("2006-01-02T15:04")
	if p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {"later"}, "sim_slot": {"SIM1"}, "send_at": {at}}); p.status != http.StatusOK {
		t.Fatalf("schedule: %d %s", p.status, p.body)
	}
	if p := b.post("/console/opt-outs", url.Values{"phone": {"+15550100009"}}); p.status != http.StatusOK {
		t.Fatalf("opt out: %d %s", p.status, p.body)
	}
	var hooks string
	poll.Until(t, "the delivery attempt is logged", func() bool {
		hooks = b.get("/console/webhooks").body
		return strings.Contains(hooks, `id="deliveries"`)
	})
	if !strings.Contains(hooks, `<td class="http-status"><span class="muted">no response</span></td>`) || strings.Contains(hooks, `class="code"`) {
		t.Error(`the deliveries log does not show a missing HTTP status as "no response" in a plain cell`)
	}

	pages := map[string]string{"/console/webhooks": hooks}
	for _, p := range []string{"/console/", "/console/devices", "/console/messages?device=fp-1&phone=%2B15550100000", "/console/opt-outs", "/console/billing"} {
		pages[p] = b.get(p).body
	}
	seen := 0
	for p, body := range pages {
		for _, m := range timeElem.FindAllStringSubmatch(body, -1) {
			seen++
			if !oneFormat.MatchString(m[2]) {
				t.Errorf("%s shows %q, want 2006-01-02 15:04 UTC", p, m[2])
			}
			if _, err := time.Parse(time.RFC3339, m[1]); err != nil {
				t.Errorf("%s: datetime %q is not RFC 3339", p, m[1])
			}
		}
		if m := wireFormat.FindString(tags.ReplaceAllString(body, " ")); m != "" {
			t.Errorf("%s shows a wire-format time %q to people", p, m)
		}
	}
	// Overview activity, last seen, the thread (sent, received, scheduled
	// and its time), the opt-out, the delivery, the period end.
	if seen < 8 {
		t.Errorf("got %d times in the pages, want at least 8", seen)
	}
	thread := pages["/console/messages?device=fp-1&phone=%2B15550100000"]
	if !strings.Contains(thread, `aria-describedby="send_at-zone err-send_at"`) || !strings.Contains(thread, `id="send_at-zone" data-local-zone`) {
		t.Error("the send-at field has no note of the person's time zone")
	}
	// Each label sits above its own field: label, then control, in one box.
	pair := regexp.MustCompile(`<div class="field[^"]*"><label for="([^"]+)">[^<]*</label>\s*<(?:input|select) id="([^"]+)"`)
	for p, want := range map[string]int{"/console/devices": 3, "/console/messages?device=fp-1&phone=%2B15550100000": 6, "/console/opt-outs": 1} {
		n := 0
		for _, m := range pair.FindAllStringSubmatch(pages[p], -1) {
			if m[1] != m[2] {
				t.Errorf("%s: label for %q is followed by %q", p, m[1], m[2])
			}
			n++
		}
		if n != want {
			t.Errorf("%s: got %d labelled fields in their boxes, want %d", p, n, want)
		}
	}
}

// /favicon.ico is the site's icon, not the console's 404 page.
func TestFaviconIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for path, want := range map[string]string{"/favicon.ico": "image/x-icon", "/console/static/favicon.svg": "image/svg+xml"} {
		res, err := testhttp.Client.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		p := read(t, res)
		if p.status != http.StatusOK || p.header.Get("Content-Type") != want {
			t.Errorf("GET %s: got %d %q, want 200 %q", path, p.status, p.header.Get("Content-Type"), want)
		}
		if path == "/favicon.ico" && !bytes.HasPrefix([]byte(p.body), []byte{0, 0, 1, 0}) {
			t.Errorf("GET %s: not an ICO file", path)
		}
	}
	if signin := e.browser().get("/console/signin").body; !strings.Contains(signin, `<link rel="icon" href="/favicon.ico"`) {
		t.Error("pages do not name their icon")
	}
}

// The console writes numbers for reading, international format with the
// country's grouping and the kind of number where it is known; the company's
// region, set on the settings page, lets a send name a national number.
func TestConsoleFormatsNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", true)
	if p := b.post("/console/settings/company", url.Values{"region": {"XX"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"region"`) {
		t.Fatalf("a bad region: %d %s", p.status, p.body)
	}
	if p := b.post("/console/settings/company", url.Values{"region": {"gb"}}); p.status != http.StatusOK {
		t.Fatalf("region: %d %s", p.status, p.body)
	}
	if p := b.get("/console/settings"); !strings.Contains(p.body, `name="region" value="GB"`) {
		t.Fatalf("the settings page does not show the region: %s", p.body)
	}
	if p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"07400 123456"}, "message": {"hi"}, "sim_slot": {"SIM1"}}); p.status != http.StatusOK {
		t.Fatalf("send to a national number: %d %s", p.status, p.body)
	}
	if p := b.post("/console/opt-outs", url.Values{"phone": {"020 7946 0958"}}); p.status != http.StatusOK {
		t.Fatalf("opt out a national number: %d %s", p.status, p.body)
	}
	thread := html.UnescapeString(b.get("/console/messages?device=fp-1&phone=%2B447400123456").body)
	for _, want := range []string{`<strong><bdi>+44 7400 123456</bdi></strong>`, `<h2 id="thread-h"><bdi>+44 7400 123456</bdi> <span class="ntype">mobile</span></h2>`} {
		if !strings.Contains(thread, want) {
			t.Errorf("the conversation page lacks %s", want)
		}
	}
	if list := html.UnescapeString(b.get("/console/opt-outs").body); !strings.Contains(list, `<td><bdi>+44 20 7946 0958</bdi> <span class="ntype">fixed line</span></td>`) {
		t.Errorf("the opt-out list does not format the number: %s", list)
	}
}
