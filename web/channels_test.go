package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// runAgent pairs a virtual agent announcing WhatsApp numbers and iMessage
// handles in its hello, and runs it; jobs are reported sent then delivered
// when autoReport is set.
func (e *env) runAgent(code, fingerprint string, wa, im []string, autoReport bool) *client.Phone {
	e.t.Helper()
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: code, DeviceFingerprint: fingerprint, DeviceName: "Agent " + fingerprint, AppVersion: "agent-1",
		SIMs: []proto.SIM{{Slot: "SIM1"}},
	})
	if err != nil {
		e.t.Fatalf("register %s: %v", fingerprint, err)
	}
	hello := proto.Hello{AppVersion: "agent-1", SIMs: []proto.SIM{{Slot: "SIM1"}}}
	for _, n := range wa {
		hello.WhatsApp = append(hello.WhatsApp, proto.WhatsAppNumber{Phone: n})
	}
	for _, h := range im {
		hello.IMessage = append(hello.IMessage, proto.IMessageHandle{Handle: h})
	}
	return e.runPhone(reg, hello, autoReport)
}

// numberID is the public id of a company's number or handle.
func (e *env) numberID(companyID uint64, ch, addr string) string {
	e.t.Helper()
	list, err := e.agents.Numbers(context.Background(), companyID, ch)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range list {
		if n.Address == addr {
			return n.PublicID
		}
	}
	e.t.Fatalf("no %s %s", ch, addr)
	return ""
}

// member invites mo@acme.test as a member of the admin's company and signs
// them in.
func (e *env) member(admin *browser) *browser {
	e.t.Helper()
	if p := admin.post("/console/team/invite", url.Values{"email": {"mo@acme.test"}, "firstName": {"Mo"}, "lastName": {"Member"}, "role": {"member"}}); p.status != http.StatusOK {
		e.t.Fatalf("invite: %d %s", p.status, p.body)
	}
	tok := mailtest.LinkToken(e.inbox.WaitFor(e.t, "mo@acme.test", 10*time.Second).Text, "/reset-password")
	m := e.browser()
	anon := tokenOf(e.t, m.get("/reset-password?token="+tok))
	if p := m.post("/reset-password", url.Values{"csrf": {anon}, "token": {tok}, "password": {"Member1pass"}, "password2": {"Member1pass"}}); p.status != http.StatusOK {
		e.t.Fatalf("reset: %d %s", p.status, p.body)
	}
	m.signIn("mo@acme.test", "Member1pass")
	return m
}

func TestNumbersPageForAMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, []string{"ana@example.com"}, false)
	admin := e.browser()
	admin.signIn("ada@acme.test", "Correct1horse")
	mo := e.member(admin)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	im := e.numberID(1, channel.IMessage, "ana@example.com")

	list := mo.get("/console/numbers")
	if list.status != http.StatusOK {
		t.Fatalf("GET /console/numbers: %d", list.status)
	}
	for _, want := range []string{`id="number-` + wa + `"`, "&#43;1 555-010-0001", "ana@example.com", "Agent agent-1", "online", "4 / 100 / 500", "warm-up"} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	page := mo.get("/console/numbers/whatsapp/" + wa)
	if page.status != http.StatusOK || !strings.Contains(page.body, `id="agent-send"`) || !strings.Contains(page.body, `data-number="`+wa+`"`) {
		t.Fatalf("the number's page: %d", page.status)
	}

	// The caps and the gap are number fields bounded as PATCH bounds them
	// (docs/api.md), like the pools page's: they were text fields.
	for _, f := range []struct{ id, bounds string }{
		{"caps.per_minute", fmt.Sprintf(`min="0" max="%d" step="1"`, pacing.MaxCap)},
		{"caps.per_hour", fmt.Sprintf(`min="0" max="%d" step="1"`, pacing.MaxCap)},
		{"caps.per_day", fmt.Sprintf(`min="0" max="%d" step="1"`, pacing.MaxCap)},
		{"gap_seconds.min", `min="0" max="3600" step="any"`},
		{"gap_seconds.max", `min="0" max="3600" step="any"`},
	} {
		want := `<input id="` + f.id + `" name="` + f.id + `" type="number" ` + f.bounds + ` value=`
		if !strings.Contains(page.body, want) {
			t.Errorf("the number's page lacks %s", want)
		}
	}

	// A member edits caps and the gap as PATCH lets them, with its field errors.
	base := "/console/numbers/whatsapp/" + wa
	if p := mo.post(base+"/pacing", url.Values{"caps.per_minute": {"70000"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"caps.per_minute"`) {
		t.Errorf("a cap over 65535: got %d %s, want 400 naming caps.per_minute", p.status, p.body)
	}
	if p := mo.post(base+"/pacing", url.Values{"gap_seconds.min": {"5"}, "gap_seconds.max": {"1"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"gap_seconds.max"`) {
		t.Errorf("a gap upside down: got %d %s, want 400 naming gap_seconds.max", p.status, p.body)
	}
	if p := mo.post(base+"/pacing", url.Values{"caps.per_minute": {"two"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"caps.per_minute"`) {
		t.Errorf("a cap that is no number: got %d %s", p.status, p.body)
	}
	if p := mo.post(base+"/pacing", url.Values{"caps.per_minute": {"2"}, "caps.per_hour": {"50"}, "gap_seconds.min": {"0"}, "gap_seconds.max": {"0"}}); p.status != http.StatusOK {
		t.Fatalf("save caps: %d %s", p.status, p.body)
	}
	n, err := e.agents.Number(t.Context(), 1, channel.WhatsApp, wa)
	if err != nil || n.AgentNumber.Caps.PerMinute != 2 || n.AgentNumber.Caps.PerHour != 50 || n.Caps.PerMinute != 1 {
		t.Fatalf("after saving: %+v %v (per minute 2, halved to 1 in the warm-up)", n, err)
	}

	// A send through it; the second in the minute is over its cap, and the
	// page says when it can send again, in words.
	p := mo.post(base+"/send", url.Values{"to": {"+15550100999"}, "type": {"text"}, "content": {"hello"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, `"channel":"whatsapp"`) || !strings.Contains(p.body, `"number_id":"`+wa+`"`) {
		t.Fatalf("send: %d %s", p.status, p.body)
	}
	p = mo.post(base+"/send", url.Values{"to": {"+15550100999"}, "type": {"text"}, "content": {"again"}})
	if p.status != http.StatusTooManyRequests || !strings.Contains(p.body, `"error":"number_capped"`) || !strings.Contains(p.body, "can send again in ") || p.header.Get("Retry-After") == "" {
		t.Errorf("over the cap: got %d %s (Retry-After %q)", p.status, p.body, p.header.Get("Retry-After"))
	}
	if p := mo.post(base+"/send", url.Values{"to": {"+15550100999"}, "type": {"image"}, "media_url": {"http://example.com/a.jpg"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"media_url"`) {
		t.Errorf("an http media URL: got %d %s", p.status, p.body)
	}

	// Paused, a send is refused with number_paused; resumed, it is not.
	if p := mo.post("/console/numbers/imessage/"+im+"/status", url.Values{"status": {"paused"}}); p.status != http.StatusOK {
		t.Fatalf("pause: %d %s", p.status, p.body)
	}
	p = mo.post("/console/numbers/imessage/"+im+"/send", url.Values{"to": {"bo@example.com"}, "type": {"text"}, "content": {"hi"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, `"error":"number_paused"`) {
		t.Errorf("send through a paused handle: got %d %s, want 403 number_paused", p.status, p.body)
	}
	if p := mo.post("/console/numbers/imessage/"+im+"/status", url.Values{"status": {"gone"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `"field":"status"`) {
		t.Errorf("a bad status: got %d %s", p.status, p.body)
	}
	if p := mo.get("/console/numbers/imessage/" + im); !strings.Contains(p.body, "Resume") {
		t.Error("a paused handle's page offers no Resume")
	}
	if p := mo.get("/console/numbers/sms/" + wa); p.status != http.StatusNotFound {
		t.Errorf("an unknown channel: got %d, want 404", p.status)
	}
}

func TestNumbersOfAnotherCompanyAreNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keyA := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	e.runAgent(e.pairingCode(keyA), "agent-acme", []string{"+15550100001"}, []string{"ana@example.com"}, false)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	im := e.numberID(1, channel.IMessage, "ana@example.com")
	bo := e.browser()
	bo.signIn("bo@bolt.test", "Correct1horse")
	for _, path := range []string{"/console/numbers/whatsapp/" + wa, "/console/numbers/whatsapp/" + wa + "/messages", "/console/numbers/imessage/" + im} {
		if got := bo.get(path); got.status != http.StatusNotFound {
			t.Errorf("GET %s across companies: got %d, want 404", path, got.status)
		}
	}
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{"/console/numbers/whatsapp/" + wa + "/status", url.Values{"status": {"paused"}}},
		{"/console/numbers/whatsapp/" + wa + "/pacing", url.Values{"caps.per_minute": {"1"}}},
		{"/console/numbers/whatsapp/" + wa + "/send", url.Values{"to": {"+15550100999"}, "content": {"hi"}}},
		{"/console/numbers/imessage/" + im + "/send", url.Values{"to": {"+15550100999"}, "content": {"hi"}}},
	} {
		if got := bo.post(c.path, c.form); got.status != http.StatusNotFound {
			t.Errorf("POST %s across companies: got %d %s, want 404", c.path, got.status, got.body)
		}
	}
	if p := bo.get("/console/numbers"); strings.Contains(p.body, "15550100001") || strings.Contains(p.body, "555-010-0001") || strings.Contains(p.body, "ana@example.com") {
		t.Error("another company's numbers are listed")
	}
	n, err := e.agents.Number(t.Context(), 1, channel.WhatsApp, wa)
	if err != nil || n.Status != store.NumberActive || n.AgentNumber.Caps.PerMinute != 0 {
		t.Errorf("another company changed the number: %+v %v", n, err)
	}
}

func TestNumberMessagesAreLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	ag := e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, true)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	events, _ := b.stream(t)
	poll.Until(t, "the stream is open", func() bool { return e.broker.Streams() == 1 })
	if p := b.post("/console/numbers/whatsapp/"+wa+"/send", url.Values{"to": {"+15550100999"}, "type": {"text"}, "content": {"hello"}}); p.status != http.StatusOK {
		t.Fatalf("send: %d %s", p.status, p.body)
	}
	var delivered string
	for _, st := range []string{"queued", "delivered"} {
		delivered = waitEventAll(t, events, `"number_id":"`+wa+`"`, `"status":"`+st+`"`)
	}
	// A read receipt shows on the page as the delivered status's detail.
	var sent struct {
		QueueID string `json:"queue_id"`
	}
	if err := json.Unmarshal([]byte(delivered), &sent); err != nil || sent.QueueID == "" {
		t.Fatalf("delivered event %s: %v", delivered, err)
	}
	ag.ReportDetail(sent.QueueID, "read")
	waitEventAll(t, events, `"queue_id":"`+sent.QueueID+`"`, `"status":"delivered"`, `"detail":"read"`)
	if p := b.get("/console/numbers/whatsapp/" + wa); !strings.Contains(p.body, `<span class="detail"> (<bdi>read</bdi>)</span>`) {
		t.Errorf("the number's page does not show the read detail:\n%s", p.body)
	}
	<-ag.Receive(proto.Inbound{ClientID: "wa-in-1", Channel: proto.ChannelWhatsApp, From: "+15550100999", To: "+15550100001", Message: "hi back"})
	waitEventAll(t, events, `"direction":"inbound"`, `"text":"hi back"`, `"channel":"whatsapp"`, `"number_id":"`+wa+`"`)
	if p := b.get("/console/numbers/whatsapp/" + wa + "/messages"); p.status != http.StatusOK || !strings.Contains(p.body, "hi back") || !strings.Contains(p.body, `"status":"delivered"`) {
		t.Errorf("the reload after a reconnect: %d %s", p.status, p.body)
	}
}

// waitEventAll waits for an event whose data holds every one of wants.
func waitEventAll(t *testing.T, ch <-chan [2]string, wants ...string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before an event with %v", wants)
			}
			all := true
			for _, w := range wants {
				all = all && strings.Contains(ev[1], w)
			}
			if all {
				return ev[1]
			}
		case <-deadline:
			t.Fatalf("no event with %v within 10 s", wants)
		}
	}
}

// TestWhatsAppNumbersWrittenAsTheMessagesPageWritesNumbers: a WhatsApp
// number is written in international format on the numbers list, its own
// page's heading and its notices ("+1 555-010-0001"), as the messages page
// and the opt-out list write numbers; they showed the E.164 string. An
// iMessage handle that is an address is shown as it is.
func TestWhatsAppNumbersWrittenAsTheMessagesPageWritesNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, []string{"ana@example.com"}, false)
	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	const shown = "&#43;1 555-010-0001"
	list := ada.get("/console/numbers")
	if !strings.Contains(list.body, `"><bdi>`+shown+`</bdi></a>`) || !strings.Contains(list.body, `><bdi>ana@example.com</bdi></a>`) {
		t.Errorf("the numbers list does not write %s, and the handle as it is", shown)
	}
	if p := ada.get("/console/numbers/whatsapp/" + wa); !strings.Contains(p.body, "<h1><bdi>"+shown+"</bdi></h1>") {
		t.Errorf("the number's page heading is not %s", shown)
	}
	var out struct{ Notice string }
	p := ada.post("/console/numbers/whatsapp/"+wa+"/status", url.Values{"status": {"paused"}})
	if err := json.Unmarshal([]byte(p.body), &out); err != nil || !strings.HasPrefix(out.Notice, "+1 555-010-0001 paused") {
		t.Errorf("pause notice: %d %s", p.status, p.body)
	}
}
