package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// TestAgentGapAndJitter: a number's jobs reach its agent one per gap, each
// gap within the configured 2-5 s and not all equal, measured on the
// injected clock.
func TestAgentGapAndJitter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	ag := e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, nil, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	e.clock.Advance(8 * 24 * time.Hour) // past the warm-up: 8 a minute
	const n = 6
	for i := range n {
		e.want(e.waSend(a.apiKey, wa, "+15557654321", fmt.Sprint("m", i)), http.StatusAccepted, "")
	}
	ag.settle()
	if jobs, _ := ag.Jobs(); len(jobs) != 1 {
		t.Fatalf("got %d jobs at once, want 1: the rest wait for the gap", len(jobs))
	}
	const step = 100 * time.Millisecond
	// No job is due within 2 s of the one before: after each, the clock
	// moves to a step short of that at once (a job there is a gap of 1.9 s,
	// which fails below), then a step at a time, where the gap may end.
	jumped := 0
	for i := 0; i < 400; i++ {
		jobs, _ := ag.Jobs()
		if len(jobs) == n {
			break
		}
		if len(jobs) > jumped {
			jumped = len(jobs)
			e.clock.Advance(2*time.Second - step)
		} else {
			e.clock.Advance(step)
		}
		ag.settle()
	}
	jobs, at := ag.Jobs()
	if len(jobs) != n {
		t.Fatalf("got %d jobs, want %d", len(jobs), n)
	}
	gaps := map[time.Duration]bool{}
	for i := 1; i < n; i++ {
		d := at[i].Sub(at[i-1])
		// Dispatch happens at the first step at or after the gap ends.
		if d < 2*time.Second || d > 5*time.Second+step {
			t.Fatalf("gap %d: got %v, want 2s to 5s", i, d)
		}
		gaps[d] = true
		if jobs[i].Message != fmt.Sprint("m", i) {
			t.Fatalf("job %d is %q: out of order", i, jobs[i].Message)
		}
	}
	if len(gaps) < 3 {
		t.Fatalf("got gaps %v: want jitter", gaps)
	}
	// PATCH sets the number's own gap: 0 to 1 ms lets the rest go at once.
	e.clock.Advance(time.Minute)
	for i := range 3 {
		e.want(e.waSend(a.apiKey, wa, "+15557654321", fmt.Sprint("fast", i)), http.StatusAccepted, "")
	}
	r := e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: a.apiKey, body: map[string]any{"gap_seconds": map[string]any{"min": 0, "max": 0.001}}})
	e.want(r, http.StatusOK, "")
	e.clock.Advance(10 * time.Second)
	ag.settle()
	e.clock.Advance(time.Millisecond)
	ag.settle()
	e.clock.Advance(time.Millisecond)
	ag.settle()
	if jobs, _ := ag.Jobs(); len(jobs) != n+3 {
		t.Fatalf("with a 0-1 ms gap: got %d jobs, want %d", len(jobs), n+3)
	}
}

// TestAgentPatchAndPause: PATCH sets caps, gap and status; a paused number
// refuses sends with 403 number_paused; bad values name the field.
func TestAgentPatchAndPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	r := e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: a.access, body: map[string]any{
		"caps": map[string]any{"per_minute": 2, "per_hour": 50}, "gap_seconds": map[string]any{"min": 1, "max": 1.5}, "status": "paused"}})
	e.want(r, http.StatusOK, "")
	caps := r.Body["caps"].(map[string]any)
	gap := r.Body["gap_seconds"].(map[string]any)
	// Warm-up halves the number's own caps too; the day keeps the default's half.
	if r.str("status") != "paused" || caps["per_minute"] != 1.0 || caps["per_hour"] != 25.0 || caps["per_day"] != 500.0 || gap["min"] != 1.0 || gap["max"] != 1.5 {
		t.Fatalf("got %s", r.Raw)
	}
	s := e.waSend(a.apiKey, wa, "+15557654321", "x")
	e.want(s, http.StatusForbidden, "number_paused")
	e.want(e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: a.apiKey, body: map[string]any{"status": "active"}}), http.StatusOK, "")
	e.want(e.waSend(a.apiKey, wa, "+15557654321", "x"), http.StatusAccepted, "")
	e.want(e.waSend(a.apiKey, wa, "+15557654321", "x"), http.StatusTooManyRequests, "number_capped")
	e.want(e.do(call{method: "PATCH", path: "/imessage/handles/" + im, token: a.apiKey, body: map[string]any{"status": "paused"}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "bob@example.com", "content": "x"}}), http.StatusForbidden, "number_paused")
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"status": "gone"}, "status"},
		{map[string]any{"caps": map[string]any{"per_minute": -1}}, "caps.per_minute"},
		{map[string]any{"caps": map[string]any{"per_day": 70000}}, "caps.per_day"},
		{map[string]any{"caps": map[string]any{"per_hour": "ten"}}, "caps.per_hour"},
		{map[string]any{"gap_seconds": map[string]any{"min": 3}}, "gap_seconds.max"},
		{map[string]any{"gap_seconds": map[string]any{"min": 3, "max": 2}}, "gap_seconds.max"},
		{map[string]any{"gap_seconds": map[string]any{"min": -1, "max": 2}}, "gap_seconds.min"},
		{map[string]any{"caps": map[string]any{"per_minute": 1e9}}, "caps.per_minute"},
		{map[string]any{"caps": map[string]any{"per_minute": 2.5}}, "caps.per_minute"},
		// Two or three bad caps: the first in the docs' order, every time.
		{map[string]any{"caps": map[string]any{"per_minute": -1, "per_hour": -1, "per_day": -1}}, "caps.per_minute"},
		{map[string]any{"caps": map[string]any{"per_minute": -1, "per_hour": -1, "per_day": -1}}, "caps.per_minute"},
		{map[string]any{"caps": map[string]any{"per_minute": -1, "per_hour": -1, "per_day": -1}}, "caps.per_minute"},
		{map[string]any{"caps": map[string]any{"per_hour": 70000, "per_day": -1}}, "caps.per_hour"},
		{map[string]any{"caps": map[string]any{"per_hour": 70000, "per_day": -1}}, "caps.per_hour"},
		{map[string]any{"caps": map[string]any{"per_hour": 70000, "per_day": -1}}, "caps.per_hour"},
	} {
		r := e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: a.apiKey, body: c.body})
		if r.Status != 400 || r.str("field") != c.field {
			t.Errorf("PATCH %v: got %d %s, want 400 field %s", c.body, r.Status, r.Raw, c.field)
		}
		if msg := r.str("message"); strings.Contains(msg, "must be a number") {
			t.Errorf("PATCH %v: %q: a number it is, just not a whole one in range", c.body, msg)
		}
	}
	e.want(e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + im, token: a.apiKey, body: map[string]any{"status": "active"}}), http.StatusNotFound, "not_found")
}

// TestAgentTenantIsolation: another company neither lists, changes, reads
// nor sends through one's numbers and messages: 404 on every route. The
// same number announced by both companies gets two records.
func TestAgentTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Bolt", "owner@bolt.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	sent := e.waSend(a.apiKey, wa, "+15557654321", "private")
	e.want(sent, http.StatusAccepted, "")
	if got := e.numbers(b.apiKey, "whatsapp"); len(got) != 0 {
		t.Fatalf("company B lists %v", got)
	}
	if got := e.numbers(b.apiKey, "imessage"); len(got) != 0 {
		t.Fatalf("company B lists %v", got)
	}
	for _, c := range []call{
		{method: "PATCH", path: "/whatsapp/numbers/" + wa, body: map[string]any{"status": "paused"}},
		{method: "PATCH", path: "/imessage/handles/" + im, body: map[string]any{"status": "paused"}},
		{method: "POST", path: "/whatsapp/send", body: map[string]any{"number_id": wa, "to": "+15557654321", "content": "x"}},
		{method: "POST", path: "/imessage/send", body: map[string]any{"handle_id": im, "to": "+15557654321", "content": "x"}},
		{method: "GET", path: "/whatsapp/messages?number_id=" + wa},
		{method: "GET", path: "/imessage/messages?handle_id=" + im},
		{method: "GET", path: "/whatsapp/messages/" + sent.str("id")},
	} {
		c.token = b.apiKey
		e.want(e.do(c), http.StatusNotFound, "not_found")
	}
	// B's agent announcing the same number gets B's own record.
	e.runAgent(e.pairPhone(b.apiKey, "agent-b"), "agent-b", []string{waNumber}, nil, false)
	bid := e.numberID(b.apiKey, "whatsapp", waNumber)
	if bid == wa {
		t.Fatal("company B got company A's number id")
	}
	if n := e.numbers(a.apiKey, "whatsapp")[0]; n["device_fingerprint"] != "agent-a" || n["number_id"] != wa {
		t.Fatalf("company A's number moved: %v", n)
	}
	if h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + bid, token: b.apiKey}); h.Body["total"] != 0.0 {
		t.Fatalf("B sees %s", h.Raw)
	}
}

// TestAgentInboundToWebhooks: inbound WhatsApp and iMessage frames are
// stored once per client_id and delivered as whatsapp.received and
// imessage.received to the entries whose channels, wa_numbers and
// im_handles take them; sims does not scope them.
func TestAgentInboundToWebhooks(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	ag := e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber, "+15550002222"}, []string{imHandle}, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	e.whPut(a.apiKey,
		map[string]any{"url": rc.URL + "/all"},
		map[string]any{"url": rc.URL + "/sms", "channels": []string{"sms"}},
		map[string]any{"url": rc.URL + "/wa", "channels": []string{"whatsapp"}},
		map[string]any{"url": rc.URL + "/wa-id", "wa_numbers": []string{wa}},
		map[string]any{"url": rc.URL + "/wa-other", "wa_numbers": []string{"+15550002222"}},
		map[string]any{"url": rc.URL + "/im-handle", "im_handles": []string{"ANA@example.com"}},
		map[string]any{"url": rc.URL + "/im-id", "channels": []string{"imessage"}, "im_handles": []string{im}},
		map[string]any{"url": rc.URL + "/sim2", "sims": []int{1}},
	)
	w := waitAck(t, ag.Receive(proto.Inbound{ClientID: "wa-1", Channel: "whatsapp", From: "+15557654321", To: waNumber, Message: "hi on WhatsApp"}))
	again := waitAck(t, ag.Receive(proto.Inbound{ClientID: "wa-1", Channel: "whatsapp", From: "+15557654321", To: waNumber, Message: "hi on WhatsApp"}))
	i := waitAck(t, ag.Receive(proto.Inbound{ClientID: "im-1", Channel: "imessage", From: "bob@example.com", To: imHandle, Message: "hi on iMessage"}))
	if again.ID != w.ID {
		t.Fatalf("a repeated client_id stored twice: %d and %d", w.ID, again.ID)
	}
	// Each list narrows only its own channel (as for SMS and wa_numbers):
	// wa_numbers leaves iMessage alone, im_handles WhatsApp.
	want := map[string][]uint64{
		"/all": {w.ID, i.ID}, "/wa": {w.ID}, "/wa-id": {w.ID, i.ID}, "/wa-other": {i.ID}, "/im-handle": {w.ID, i.ID}, "/im-id": {i.ID}, "/sim2": {w.ID, i.ID},
	}
	e.eventually("every matching delivery arrives", func() bool { return len(rc.Requests()) == 11 })
	got := map[string][]uint64{}
	for _, r := range rc.Requests() {
		var body struct {
			Type string `json:"type"`
			Data struct {
				ID      uint64 `json:"id"`
				Channel string `json:"channel"`
				To      string `json:"to"`
				Phone   string `json:"phone"`
				SIMSlot string `json:"sim_slot"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		wantType, wantTo, wantFrom := "whatsapp.received", waNumber, "+15557654321"
		if body.Data.ID == i.ID {
			wantType, wantTo, wantFrom = "imessage.received", imHandle, "bob@example.com"
		}
		if body.Type != wantType || body.Data.Channel+".received" != wantType || body.Data.To != wantTo || body.Data.Phone != wantFrom || body.Data.SIMSlot != "" || r.Header.Get("X-Service-Event") != wantType {
			t.Fatalf("delivery to %s: got %s", r.Path, r.Body)
		}
		got[r.Path] = append(got[r.Path], body.Data.ID)
	}
	for p := range got {
		sort.Slice(got[p], func(x, y int) bool { return got[p][x] < got[p][y] })
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got deliveries %v, want %v", got, want)
	}
	// Inbound messages are in the number's history, from the sender to the number.
	h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa, token: a.apiKey})
	items := h.Body["messages"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["direction"] != "inbound" || items[0].(map[string]any)["from"] != "+15557654321" || items[0].(map[string]any)["to"] != waNumber || items[0].(map[string]any)["status"] != "received" {
		t.Fatalf("history: got %s", h.Raw)
	}
	// ... and not in the SMS inbound list.
	r := e.do(call{method: "GET", path: "/automation/inbound-sms", token: a.apiKey})
	if string(r.Raw) != "[]\n" && string(r.Raw) != "[]" {
		t.Fatalf("SMS inbound list: got %s", r.Raw)
	}
}

// TestAgentConcurrentSendsTakeEachSlotOnce: sends racing for a new number's
// four slots a minute: exactly four are accepted and stored.
func TestAgentConcurrentSendsTakeEachSlotOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, nil, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	const n = 16
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { statuses <- e.waSend(a.apiKey, wa, "+15557654321", fmt.Sprint("race ", i)).Status })
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	if got[http.StatusAccepted] != 4 || got[http.StatusTooManyRequests] != n-4 {
		t.Fatalf("got statuses %v, want 4 accepted and %d capped", got, n-4)
	}
	if h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa, token: a.apiKey}); h.Body["total"] != 4.0 {
		t.Fatalf("stored: %s", h.Raw)
	}
}

// TestAgentOfflineSendsWaitAndExpire: sends to a number whose agent is
// offline are accepted and wait; the agent gets them when it comes back;
// ones left past their TTL expire like SMS.
func TestAgentOfflineSendsWaitAndExpire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	ag := e.runAgent(reg, "agent-a", []string{waNumber}, nil, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	ag.halt()
	e.eventually("the number shows offline", func() bool { return e.numbers(a.apiKey, "whatsapp")[0]["online"] == false })
	old := e.waSend(a.apiKey, wa, "+15557654321", "too late")
	e.want(old, http.StatusAccepted, "")
	e.clock.Advance(25 * time.Hour)
	e.sms.Expire()
	if r := e.do(call{method: "GET", path: "/whatsapp/messages/" + old.str("id"), token: a.apiKey}); r.str("status") != "expired" || r.str("error") == "" {
		t.Fatalf("got %s, want expired", r.Raw)
	}
	fresh := e.waSend(a.apiKey, wa, "+15557654321", "waiting")
	e.want(fresh, http.StatusAccepted, "")
	// The SMS queue routes do not read agent sends: not there to cancel either.
	for _, method := range []string{"GET", "DELETE"} {
		e.want(e.do(call{method: method, path: "/chat/queue/" + fresh.str("id"), token: a.apiKey}), http.StatusNotFound, "not_found")
	}
	back := e.runAgent(reg, "agent-a", []string{waNumber}, nil, true)
	e.eventually("the waiting send arrives on the new link", func() bool { jobs, _ := back.Jobs(); return len(jobs) == 1 })
	if jobs, _ := back.Jobs(); jobs[0].ID != fresh.str("id") {
		t.Fatalf("got job %+v, want only the fresh send", jobs[0])
	}
	e.eventually("the send is delivered", func() bool {
		return e.do(call{method: "GET", path: "/whatsapp/messages/" + fresh.str("id"), token: a.apiKey}).str("status") == "delivered"
	})
}

// TestAgentStatusEvents: WhatsApp and iMessage sends make the opt-in
// message.* events too, naming their number or handle (the SMS fields
// null), and wa_numbers/im_handles scope them as they scope inbound.
func TestAgentStatusEvents(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	e.whPut(a.apiKey,
		map[string]any{"url": rc.URL + "/wa", "events": []string{"message.delivered"}, "wa_numbers": []string{wa}, "channels": []string{"whatsapp"}},
		map[string]any{"url": rc.URL + "/im", "events": []string{"message.delivered"}, "channels": []string{"imessage"}},
		map[string]any{"url": rc.URL + "/other-number", "events": []string{"message.delivered"}, "wa_numbers": []string{"+15550009999"}, "channels": []string{"whatsapp"}},
	)
	waID := e.waSend(a.apiKey, wa, "+15557654321", "hello").str("id")
	imID := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "bob@example.com", "content": "hi"}}).str("id")
	e.eventually("both delivered events", func() bool {
		return len(statusEvents(t, rc, "/wa")) == 1 && len(statusEvents(t, rc, "/im")) == 1
	})
	for path, want := range map[string]map[string]any{
		"/wa": {"channel": "whatsapp", "queue_id": waID, "number_id": wa, "handle_id": nil, "sim_slot": nil, "to": "+15557654321", "status": "delivered", "device_fingerprint": "agent-a"},
		"/im": {"channel": "imessage", "queue_id": imID, "number_id": nil, "handle_id": im, "sim_slot": nil, "to": "bob@example.com", "status": "delivered", "device_fingerprint": "agent-a"},
	} {
		got := statusEvents(t, rc, path)[0]
		for k, v := range want {
			if got.Data[k] != v {
				t.Fatalf("%s: data.%s = %v, want %v (%s)", path, k, got.Data[k], v, got.Body)
			}
		}
	}
	if evs := statusEvents(t, rc, "/other-number"); len(evs) != 0 {
		t.Fatalf("an entry scoped to another number got %d events", len(evs))
	}
}

// TestAgentLetsGoOfANumberItNoLongerAnnounces: an agent that comes back
// without a number (its WhatsApp session ended, say) no longer holds it:
// the number shows offline and its sends wait for an agent that announces
// it again, instead of going to one that cannot send them.
func TestAgentLetsGoOfANumberItNoLongerAnnounces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	ag := e.runAgent(reg, "agent-a", []string{waNumber}, []string{imHandle}, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	ag.halt()
	smsOnly := e.runAgent(reg, "agent-a", nil, []string{imHandle}, true)
	e.eventually("the number shows offline while the handle stays online", func() bool {
		return e.numbers(a.apiKey, "whatsapp")[0]["online"] == false && e.numbers(a.apiKey, "imessage")[0]["online"] == true
	})
	if got := e.numbers(a.apiKey, "whatsapp")[0]["device_fingerprint"]; got != "agent-a" {
		t.Fatalf("device_fingerprint: got %v, want the agent that held it last", got)
	}
	waiting := e.waSend(a.apiKey, wa, "+15557654321", "waits")
	e.want(waiting, http.StatusAccepted, "")
	// The handle's send goes out on the same link: it is not held up.
	e.want(e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": e.numberID(a.apiKey, "imessage", imHandle), "to": "bob@example.com", "content": "hi"}}), http.StatusAccepted, "")
	e.eventually("the iMessage job arrives", func() bool { jobs, _ := smsOnly.Jobs(); return len(jobs) == 1 })
	smsOnly.settle()
	if jobs, _ := smsOnly.Jobs(); len(jobs) != 1 || jobs[0].Channel != "imessage" {
		t.Fatalf("the link that no longer announces the number got %+v", jobs)
	}
	smsOnly.halt()
	back := e.runAgent(reg, "agent-a", []string{waNumber}, nil, true)
	e.eventually("the waiting send reaches the agent that announces the number again", func() bool {
		jobs, _ := back.Jobs()
		return len(jobs) == 1 && jobs[0].ID == waiting.str("id")
	})
	e.eventually("the number shows online", func() bool { return e.numbers(a.apiKey, "whatsapp")[0]["online"] == true })
}

// TestAgentLetsGoOfItsNumbersWithAHelloOfNone: an agent that comes back
// announcing no number at all (its WhatsApp session ended, and it has no
// other) lets go the one it held, as a hello leaving out one of several
// does: the number shows offline while the agent is linked, a send to it
// stays queued and does not reach that agent, and it goes to the next
// agent that announces the number.
func TestAgentLetsGoOfItsNumbersWithAHelloOfNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	ag := e.runAgent(reg, "agent-a", []string{waNumber}, nil, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	e.eventually("the number shows online", func() bool { return e.numbers(a.apiKey, "whatsapp")[0]["online"] == true })
	ag.halt()
	none := e.runAgent(reg, "agent-a", nil, nil, true)
	e.eventually("the number shows offline while its former agent is linked", func() bool {
		return e.numbers(a.apiKey, "whatsapp")[0]["online"] == false
	})
	if got := e.numbers(a.apiKey, "whatsapp")[0]["device_fingerprint"]; got != "agent-a" {
		t.Fatalf("device_fingerprint: got %v, want the agent that held it last", got)
	}
	waiting := e.waSend(a.apiKey, wa, "+15557654321", "waits")
	e.want(waiting, http.StatusAccepted, "")
	none.settle()
	if jobs, _ := none.Jobs(); len(jobs) != 0 {
		t.Fatalf("the agent that no longer announces the number got %+v", jobs)
	}
	if r := e.do(call{method: "GET", path: "/whatsapp/messages/" + waiting.str("id"), token: a.apiKey}); r.str("status") != "queued" {
		t.Fatalf("the send to a number held by nobody: %s, want queued", r.Raw)
	}
	other := e.runAgent(e.pairPhone(a.apiKey, "agent-b"), "agent-b", []string{waNumber}, nil, true)
	e.eventually("the waiting send reaches the agent that announces the number", func() bool {
		jobs, _ := other.Jobs()
		return len(jobs) == 1 && jobs[0].ID == waiting.str("id")
	})
	e.eventually("the number shows online, on the new agent", func() bool {
		n := e.numbers(a.apiKey, "whatsapp")[0]
		return n["online"] == true && n["device_fingerprint"] == "agent-b"
	})
	none.settle()
	if jobs, _ := none.Jobs(); len(jobs) != 0 {
		t.Fatalf("the former agent got %+v", jobs)
	}
}
