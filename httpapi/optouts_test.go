package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

func (e *env) optOuts(token string) []map[string]any {
	e.t.Helper()
	r := e.do(call{method: "GET", path: "/opt-outs", token: token})
	e.want(r, http.StatusOK, "")
	var body struct {
		OptOuts []map[string]any `json:"opt_outs"`
	}
	mustJSON(e.t, r.Raw, &body)
	if body.OptOuts == nil {
		e.t.Fatalf("opt_outs is not an array: %s", r.Raw)
	}
	return body.OptOuts
}

// STOP puts the sender on its company's list, and every SMS send path
// refuses the number with 403 recipient_opted_out; START takes it off; the
// company switch turns the keywords off; another company is not touched.
func TestOptOutKeywordsAndEverySendPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.pairPhone(b.apiKey, "b-phone")
	const who = "+15557654321"

	for i, text := range []string{"hello", "stop please", " Stop \n"} {
		waitAck(t, phone.Receive(proto.Inbound{ClientID: fmt.Sprint("in-", i), From: who, Message: text, ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	}
	list := e.optOuts(a.apiKey)
	if len(list) != 1 || list[0]["phone"] != who || list[0]["source"] != "keyword" || list[0]["created_at"] == "" {
		t.Fatalf("after STOP: got %v, want the sender with source keyword", list)
	}
	if l := e.optOuts(b.apiKey); len(l) != 0 {
		t.Fatalf("company b's list: %v", l)
	}

	check := func(r resp, field string) {
		t.Helper()
		e.want(r, http.StatusForbidden, "recipient_opted_out")
		if r.str("field") != field {
			t.Errorf("got field %q, want %s", r.str("field"), field)
		}
	}
	check(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+1 555 765 4321", "x", "")}), "phone")
	check(e.do(call{method: "POST", path: "/automation/send-sms", token: a.access, body: sendBody("a-phone", who, "x", "")}), "phone")
	check(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", who, "x", e.clock.Now().Add(time.Hour))}), "phone")
	check(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"device_fingerprint": "a-phone",
		"messages": []map[string]any{{"phone": "+15551230000", "message": "ok"}, {"phone": who, "message": "no"}}}}), "messages[1].phone")
	if r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000", token: a.apiKey}); r.Body["total"] != float64(0) {
		t.Fatalf("a refused bulk stored messages: %s", r.Raw)
	}
	// Another company sends to the number as before.
	e.want(e.do(call{method: "POST", path: "/chat/send", token: b.apiKey, body: sendBody("b-phone", who, "x", "")}), http.StatusOK, "")

	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-start", From: who, Message: "start", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	if l := e.optOuts(a.apiKey); len(l) != 0 {
		t.Fatalf("after START: %v", l)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", who, "welcome back", "")}), http.StatusOK, "")

	// The switch: off, STOP changes nothing; the company object shows it.
	r := e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"optOutKeywords": 0}})
	e.want(r, http.StatusOK, "")
	if r.Body["optOutKeywords"] != false {
		t.Fatalf("PATCH answered %s", r.Raw)
	}
	if r := e.do(call{method: "GET", path: "/company", token: b.apiKey}); r.Body["optOutKeywords"] != nil {
		t.Errorf("a company that never set the switch sees it: %s", r.Raw)
	}
	e.want(e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"optOutKeywords": "maybe"}}), http.StatusBadRequest, "validation_failed")
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-stop-2", From: who, Message: "STOP", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	if l := e.optOuts(a.apiKey); len(l) != 0 {
		t.Fatalf("keywords off, after STOP: %v", l)
	}
	e.want(e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"optOutKeywords": true}}), http.StatusOK, "")
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-stop-3", From: who, Message: "unsubscribe", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	if l := e.optOuts(a.apiKey); len(l) != 1 {
		t.Fatalf("keywords on again, after UNSUBSCRIBE: %v", l)
	}
}

// The list routes: add (201, then 200), list in number order with paging,
// remove (200, then 404); each company sees its own list only.
func TestOptOutRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(a.apiKey, "a-phone")
	r := e.do(call{method: "POST", path: "/opt-outs", token: a.access, body: map[string]any{"phone": "+1 555 000 0002"}})
	e.want(r, http.StatusCreated, "")
	if r.str("phone") != "+15550000002" || r.str("source") != "api" {
		t.Fatalf("got %s", r.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": "+15550000002"}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": "+15550000001"}}), http.StatusCreated, "")
	for _, bad := range []map[string]any{{}, {"phone": "5550000001"}} {
		r := e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: bad})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "phone" {
			t.Errorf("%v: got field %q", bad, r.str("field"))
		}
	}
	list := e.optOuts(a.apiKey)
	if len(list) != 2 || list[0]["phone"] != "+15550000001" || list[1]["phone"] != "+15550000002" {
		t.Fatalf("got %v", list)
	}
	r = e.do(call{method: "GET", path: "/opt-outs?limit=1&after=%2B15550000001", token: a.apiKey})
	if opts, _ := r.Body["opt_outs"].([]any); len(opts) != 1 || opts[0].(map[string]any)["phone"] != "+15550000002" {
		t.Fatalf("page after: %s", r.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/opt-outs?limit=0", token: a.apiKey}), http.StatusBadRequest, "validation_failed")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15550000001", "x", "")}), http.StatusForbidden, "recipient_opted_out")
	if l := e.optOuts(b.apiKey); len(l) != 0 {
		t.Fatalf("company b sees %v", l)
	}
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%2B15550000001", token: b.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%2B15550000001", token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%2B15550000001", token: a.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15550000001", "x", "")}), http.StatusOK, "")
}

// A number that opts out after a message to it was scheduled does not get
// it: at its time the message becomes failed (recipient_opted_out), with a
// message.failed event; the phone is never handed it.
func TestOptOutBeforeScheduledDispatch(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/status", "events": []string{"message.failed"}})
	const who = "+15557654321"
	id := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", who, "promo", e.clock.Now().Add(time.Hour))}).str("queueId")
	other := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", "+15550000009", "promo", e.clock.Now().Add(time.Hour))}).str("queueId")
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "stop", From: who, Message: "STOP", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	e.clock.Advance(time.Hour)
	e.sms.ReleaseDue()
	q := e.queueStatus(a.apiKey, id)
	if q.str("status") != "failed" || q.str("error") != "recipient_opted_out" {
		t.Fatalf("got %s, want failed with recipient_opted_out", q.Raw)
	}
	e.eventually("the other message reaches the phone", func() bool { return len(phone.Jobs()) == 1 })
	if j := phone.Jobs(); j[0].ID != other {
		t.Fatalf("got job %s, want %s", j[0].ID, other)
	}
	e.eventually("message.failed", func() bool { return len(statusEvents(t, rc, "/status")) == 1 })
	ev := statusEvents(t, rc, "/status")[0]
	if ev.Type != "message.failed" || ev.Data["queue_id"] != id || ev.Data["error"] != "recipient_opted_out" {
		t.Fatalf("got %s", ev.Body)
	}
}

// A STOP from a sender the phone reports without its + lists the number in
// E.164, so it stops sends to it, and START from the same form takes it off.
// A sender that is no number (a name) is listed as reported and is removed
// by exactly that form, URL-escaped; so is a number by either spelling.
func TestOptOutKeywordSenderForms(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	for i, from := range []string{"15557650001", "My Bank", "15557650002"} {
		waitAck(t, phone.Receive(proto.Inbound{ClientID: fmt.Sprint("stop-", i), From: from, Message: "STOP", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	}
	list := e.optOuts(a.apiKey)
	var got []string
	for _, o := range list {
		got = append(got, fmt.Sprint(o["phone"], "/", o["source"]))
	}
	if want := []string{"+15557650001/keyword", "+15557650002/keyword", "My Bank/keyword"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got list %v, want %v", got, want)
	}
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15557650001", "x", "")})
	e.want(r, http.StatusForbidden, "recipient_opted_out")

	// Paging goes on after a name as after a number.
	r = e.do(call{method: "GET", path: "/opt-outs?limit=1&after=%2B15557650002", token: a.apiKey})
	if opts, _ := r.Body["opt_outs"].([]any); len(opts) != 1 || opts[0].(map[string]any)["phone"] != "My Bank" {
		t.Fatalf("page after +15557650002: %s", r.Raw)
	}
	r = e.do(call{method: "GET", path: "/opt-outs?after=My%20Bank", token: a.apiKey})
	if opts, _ := r.Body["opt_outs"].([]any); r.Status != http.StatusOK || len(opts) != 0 {
		t.Fatalf("page after the name: %s", r.Raw)
	}

	waitAck(t, phone.Receive(proto.Inbound{ClientID: "start", From: "15557650001", Message: "START", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15557650001", "x", "")}), http.StatusOK, "")

	e.want(e.do(call{method: "DELETE", path: "/opt-outs/My%20Bank", token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/My%20Bank", token: a.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/%2B1%20555%20765%200002", token: a.apiKey}), http.StatusOK, "")
	if l := e.optOuts(a.apiKey); len(l) != 0 {
		t.Fatalf("after the deletes: %v", l)
	}
	r = e.do(call{method: "DELETE", path: "/opt-outs/" + strings.Repeat("9", 65), token: a.apiKey})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "phone" {
		t.Errorf("got field %q, want phone", r.str("field"))
	}
}

// A message queued while its phone is away, to a number that opts out
// before the phone links, is never handed to the phone: at dispatch it
// becomes failed (recipient_opted_out) with its message.failed event, and
// the job behind it goes out.
func TestOptOutBeforeQueuedDispatch(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/status", "events": []string{"message.failed"}})
	const who = "+15557654321"
	id := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", who, "promo", "")}).str("queueId")
	other := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15550000009", "promo", "")}).str("queueId")
	e.want(e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": who}}), http.StatusCreated, "")

	phone := e.runPhone(reg, "BOTH", false)
	// Jobs go out in queue order: once the later one is there, the earlier
	// one would be too, had it been sent.
	e.eventually("the other message reaches the phone", func() bool {
		for _, j := range phone.Jobs() {
			if j.ID == other {
				return true
			}
		}
		return false
	})
	if j := phone.Jobs(); len(j) != 1 {
		t.Fatalf("the phone got %d jobs (%v), want only %s", len(j), j, other)
	}
	// The dispatcher does not wait for the failure's write: it is in the
	// next shared commit.
	e.eventually("the opted-out message failed", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "failed" })
	if q := e.queueStatus(a.apiKey, id); q.str("error") != "recipient_opted_out" {
		t.Fatalf("got %s, want failed with recipient_opted_out", q.Raw)
	}
	e.eventually("message.failed", func() bool { return len(statusEvents(t, rc, "/status")) == 1 })
	ev := statusEvents(t, rc, "/status")[0]
	if ev.Type != "message.failed" || ev.Data["queue_id"] != id || ev.Data["error"] != "recipient_opted_out" {
		t.Fatalf("got %s", ev.Body)
	}
}

// A keyword sender that no path can name, one holding a "/" (a path never
// carries an encoded slash) or one that is "." or "..", is listed as the
// phone reported it and can still be removed through the API: by
// DELETE /opt-outs?phone=, which also takes a number.
func TestOptOutEntriesNoPathCanName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	senders := []string{"My/Bank", ".", ".."}
	for i, from := range senders {
		waitAck(t, phone.Receive(proto.Inbound{ClientID: fmt.Sprint("stop-", i), From: from, Message: "STOP", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	}
	if l := e.optOuts(a.apiKey); len(l) != len(senders) {
		t.Fatalf("got list %v, want the %d senders", l, len(senders))
	}
	// The path cannot name them.
	r := e.do(call{method: "DELETE", path: "/opt-outs/My%2FBank", token: a.apiKey})
	if r.Status == http.StatusOK {
		t.Fatalf("DELETE /opt-outs/My%%2FBank answered 200; the routing refuses %%2F")
	}
	for _, from := range senders {
		r := e.do(call{method: "DELETE", path: "/opt-outs?phone=" + url.QueryEscape(from), token: a.apiKey})
		e.want(r, http.StatusOK, "")
	}
	if l := e.optOuts(a.apiKey); len(l) != 0 {
		t.Fatalf("after the deletes: %v", l)
	}
	e.want(e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": "+15557650001"}}), http.StatusCreated, "")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs?phone=%2B1%20555%20765%200001", token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "DELETE", path: "/opt-outs?phone=%2B15557650001", token: a.apiKey}), http.StatusNotFound, "not_found")
	for _, path := range []string{"/opt-outs", "/opt-outs?phone=%20%20", "/opt-outs/%20"} {
		// Spaces alone name nothing: empty, as docs/api.md says (was 404 "not on the list").
		r = e.do(call{method: "DELETE", path: path, token: a.apiKey})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "phone" {
			t.Errorf("DELETE %s: got field %q, want phone", path, r.str("field"))
		}
	}
}
