package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// TestNULInBodiesIsAFieldError: U+0000 in a string the API stores is the
// client's 400 naming the field, on either store. PostgreSQL's jsonb cannot
// hold it, so it used to be a 500 there (and was stored as it came on
// bbolt). A NUL in a field the route does not know is ignored with the
// field, and the six characters \u0000 written as text are only text.
func TestNULInBodiesIsAFieldError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, nil, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	for _, c := range []struct {
		method, path, token, body, field string
	}{
		{"POST", "/chat/send", a.apiKey, `{"device_fingerprint":"a-phone","phone":"+15551234567","message":"a\u0000b"}`, "message"},
		{"POST", "/automation/send-sms", a.apiKey, `{"device_fingerprint":"a-phone","phone":"+15551234567","message":"\u0000"}`, "message"},
		{"POST", "/chat/send-bulk", a.apiKey, `{"device_fingerprint":"a-phone","messages":[{"phone":"+15551234567","message":"ok"},{"phone":"+15551234567","message":"b\u0000"}]}`, "messages[1].message"},
		{"POST", "/whatsapp/send", a.apiKey, `{"number_id":"` + wa + `","to":"+15551234567","content":"a\u0000"}`, "content"},
		{"PATCH", "/company", a.apiKey, `{"name":"Acme\u0000"}`, "name"},
		{"PATCH", "/users/me", a.access, `{"firstName":"A\u0000na"}`, "firstName"},
		{"PATCH", "/device/a-phone", a.apiKey, `{"device_name":"pixel\u0000"}`, "device_name"},
	} {
		r := e.do(call{method: c.method, path: c.path, token: c.token, body: c.body})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if got := r.str("field"); got != c.field {
			t.Errorf("%s %s: field %q, want %q; body %s", c.method, c.path, got, c.field, r.Raw)
		}
	}

	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey,
		body: `{"device_fingerprint":"a-phone","phone":"+15551234567","message":"literal \\u0000","note":"x\u0000"}`})
	e.want(r, http.StatusOK, "")
	msgs := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567", token: a.apiKey})
	e.want(msgs, http.StatusOK, "")
	list, _ := msgs.Body["messages"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["message"] != `literal \u0000` { // the refused bulk stored nothing
		t.Fatalf("stored messages: %s", msgs.Raw)
	}
}

// TestPhoneInboundNULIsStoredReplaced: an inbound text holding U+0000 (a GSM
// decoder's '@') is stored with U+FFFD in its place and acked, and the link
// stays up. On PostgreSQL it used to fail the store and close the link with
// 1011 on every resend: a message the phone could never hand over.
func TestPhoneInboundNULIsStoredReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	ws := dialRaw(t, e, reg.DeviceToken)
	defer ws.CloseNow()
	writeRaw(t, ws, proto.Inbound{ClientID: "c1", Channel: "sms", From: "+15551234567", Message: "mail me at ann\x00example.com", ReceivedAt: "2026-11-22T10:00:00Z"})
	if ack, ok := readRaw(t, ws).(*proto.InboundAck); !ok || ack.ClientID != "c1" {
		t.Fatalf("got %#v, want the inbound_ack of c1", ack)
	}
	writeRaw(t, ws, proto.Inbound{ClientID: "c2", Channel: "sms", From: "+15551234567", Message: `text \u0000`, ReceivedAt: "2026-11-22T10:00:01Z"})
	if ack, ok := readRaw(t, ws).(*proto.InboundAck); !ok || ack.ClientID != "c2" {
		t.Fatalf("got %#v, want the inbound_ack of c2 on the same link", ack)
	}
	r := e.do(call{method: "GET", path: "/automation/inbound-sms", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	var list []struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(r.Raw, &list); err != nil {
		t.Fatalf("inbound list: %v: %s", err, r.Raw)
	}
	if len(list) != 2 || list[0].Message != `text \u0000` || list[1].Message != "mail me at ann\uFFFDexample.com" {
		t.Fatalf("inbound list: %s", r.Raw)
	}
}

// TestMediaKeyWithNULIsAFieldError: an upload's key holding U+0000 is 400
// naming key, on either store (a 500 on PostgreSQL before); other bytes of
// UTF-8 stay a key as before.
func TestMediaKeyWithNULIsAFieldError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	r := e.upload(reg.DeviceToken, "c1/\x00", "", "text/plain", []byte("hi"))
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "key" {
		t.Fatalf("field %q, want key: %s", r.str("field"), r.Raw)
	}
	e.want(e.upload(reg.DeviceToken, "c1/\u00e9", "", "text/plain", []byte("hi")), http.StatusCreated, "")
}
