package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// A company that sets a region (PATCH /company) may write national
// numbers on every send path and on the opt-out list; a number the
// numbering plan has not is 400 naming the field; an inbound STOP from a
// national sender opts the number out; another company keeps the
// international rule.
func TestCompanyRegionNationalNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.pairPhone(b.apiKey, "b-phone")

	for _, bad := range []any{"XX", "GBR", 44} {
		r := e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"region": bad}})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "region" {
			t.Errorf("region %v: got field %q", bad, r.str("field"))
		}
	}
	// The phone of the same patch is read in the region it sets.
	r := e.do(call{method: "PATCH", path: "/company", token: a.access, body: map[string]any{"region": "gb", "phone": "020 7946 0958"}})
	e.want(r, http.StatusOK, "")
	if r.str("region") != "GB" || r.str("phone") != "+442079460958" {
		t.Fatalf("PATCH region: %s", r.Raw)
	}
	// Users' phones are read in it too.
	r = e.do(call{method: "POST", path: "/users", token: a.access, body: map[string]any{"firstName": "Ann", "lastName": "Lee", "email": "ann@acme.test", "phone": "07400 123456", "role": "member"}})
	e.want(r, http.StatusCreated, "")
	if r.str("phone") != "+447400123456" {
		t.Fatalf("invite with a national phone: %s", r.Raw)
	}
	r = e.do(call{method: "PATCH", path: "/users/me", token: a.access, body: map[string]any{"phone": "07400 12"}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "phone" {
		t.Errorf("a short national phone: got field %q", r.str("field"))
	}
	if r := e.do(call{method: "GET", path: "/company", token: b.apiKey}); r.Body["region"] != nil {
		t.Errorf("a company without a region shows one: %s", r.Raw)
	}

	// Sends: /automation/send-sms answers the number and its type.
	r = e.do(call{method: "POST", path: "/automation/send-sms", token: a.access, body: sendBody("a-phone", "07400 123456", "hi", "")})
	e.want(r, http.StatusOK, "")
	if r.str("phone") != "+447400123456" || r.str("number_type") != "mobile" {
		t.Fatalf("national send answered %s", r.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "(020) 7946 0958", "hi", "")}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", "020 7946 0958", "later", e.clock.Now().Add(time.Hour))}), http.StatusOK, "")
	h := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B442079460958", token: a.apiKey})
	if msgs, _ := h.Body["messages"].([]any); len(msgs) != 2 || msgs[0].(map[string]any)["number_type"] != "fixed_line" {
		t.Fatalf("history of the landline: %s", h.Raw)
	}
	r = e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"device_fingerprint": "a-phone",
		"messages": []map[string]any{{"phone": "07400 123456", "message": "ok"}, {"phone": "07400 12", "message": "short"}}}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "messages[1].phone" {
		t.Errorf("bulk: got field %q", r.str("field"))
	}
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"device_fingerprint": "a-phone",
		"messages": []map[string]any{{"phone": "07400 123456", "message": "ok"}, {"phone": "+1 415 555 0100", "message": "ok"}}}}), http.StatusOK, "")

	// A wrong length or letters are 400 naming the field; a national number
	// of the right length need not be allocated (Ofcom's drama range is
	// what integrators try first), and one with its + is today's rule.
	for _, good := range []string{"07700 900123", "+1 555 123 4567"} {
		e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", good, "x", "")}), http.StatusOK, "")
	}
	for _, bad := range []string{"07400 12", "07400 1234567", "07700 9001", "07400 ABCDEF"} {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", bad, "x", "")})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "phone" || r.str("message") == "" {
			t.Errorf("%q: got %s", bad, r.Raw)
		}
	}
	// The other company keeps the international rule, fictional numbers included.
	e.want(e.do(call{method: "POST", path: "/chat/send", token: b.apiKey, body: sendBody("b-phone", "07400 123456", "x", "")}), http.StatusBadRequest, "validation_failed")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: b.apiKey, body: sendBody("b-phone", "+1 555 123 4567", "x", "")}), http.StatusOK, "")

	// The opt-out list takes national numbers too.
	r = e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": "020 7946 0958"}})
	e.want(r, http.StatusCreated, "")
	if r.str("phone") != "+442079460958" || r.str("number_type") != "fixed_line" {
		t.Fatalf("national opt-out answered %s", r.Raw)
	}
	e.want(e.do(call{method: "DELETE", path: "/opt-outs/020%207946%200958", token: a.apiKey}), http.StatusOK, "")

	// STOP from a sender the phone reports without its +, in national form.
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-stop", From: "07400123456", Message: "STOP", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	list := e.optOuts(a.apiKey)
	if len(list) != 1 || list[0]["phone"] != "+447400123456" || list[0]["source"] != "keyword" {
		t.Fatalf("after a national STOP: %v", list)
	}
	r = e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "07400 123456", "x", "")})
	e.want(r, http.StatusForbidden, "recipient_opted_out")
	// The STOP itself is stored under the number, in the conversation.
	h = e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=07400%20123456", token: a.apiKey})
	if msgs, _ := h.Body["messages"].([]any); len(msgs) == 0 || msgs[0].(map[string]any)["direction"] != "inbound" ||
		msgs[0].(map[string]any)["phone"] != "+447400123456" {
		t.Fatalf("the national STOP is not in the number's history: %s", h.Raw)
	}

	// Cleared, the company is back on the international rule.
	r = e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"region": ""}})
	e.want(r, http.StatusOK, "")
	if r.Body["region"] != nil {
		t.Fatalf("cleared region: %s", r.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "020 7946 0958", "x", "")}), http.StatusBadRequest, "validation_failed")
}

// WhatsApp and iMessage read numbers in the company's region too: the
// numbers an agent announces (one the numbering data does not know is
// still taken as without a region) and the recipients of sends.
func TestCompanyRegionAgentNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.want(e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"region": "GB"}}), http.StatusOK, "")
	ag := e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{"07400 654321", waNumber}, []string{"020 7946 0958"}, false)
	wa := e.numberID(a.apiKey, "whatsapp", "+447400654321")
	im := e.numberID(a.apiKey, "imessage", "+442079460958")
	e.numberID(a.apiKey, "whatsapp", waNumber)
	e.want(e.waSend(a.apiKey, wa, "07400 123456", "hi"), http.StatusAccepted, "")
	e.want(e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "(020) 7946 0000", "content": "hi"}}), http.StatusAccepted, "")
	e.eventually("the agent gets both jobs", func() bool { jobs, _ := ag.Jobs(); return len(jobs) == 2 })
	jobs, _ := ag.Jobs()
	got := map[string]bool{jobs[0].To: true, jobs[1].To: true}
	if !got["+447400123456"] || !got["+442079460000"] {
		t.Fatalf("jobs to %q and %q, want +447400123456 and +442079460000", jobs[0].To, jobs[1].To)
	}
	for _, bad := range []string{"07400 12", "07700 9001"} {
		r := e.waSend(a.apiKey, wa, bad, "x")
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "to" {
			t.Errorf("%q: got field %q", bad, r.str("field"))
		}
	}
}

// A WhatsApp contact an agent reports without its + (WhatsApp writes them
// so) is read as an SMS sender is: digits that begin with the region's
// country code and make a valid number after a + are that number, the one
// sends to it name, not a long national number of the region.
func TestCompanyRegionAgentSenderWithoutPlus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.want(e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"region": "DE"}}), http.StatusOK, "")
	ag := e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, nil, false)
	e.numberID(a.apiKey, "whatsapp", waNumber)
	in := waitAck(t, ag.Receive(proto.Inbound{ClientID: "wa-plus-dropped", Channel: "whatsapp", From: "4915123456789", To: waNumber, Message: "hallo"}))
	r := e.do(call{method: "GET", path: "/whatsapp/messages/" + in.UUID, token: a.apiKey})
	e.want(r, http.StatusOK, "")
	if r.str("from") != "+4915123456789" {
		t.Fatalf("a WhatsApp contact reported as 4915123456789 in DE stored as %q, want +4915123456789", r.str("from"))
	}
}
