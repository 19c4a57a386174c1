package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	proto "github.com/simrelay/simrelay/android-protocol"
)

func sendBody(fp, to, text, slot string) map[string]any {
	b := map[string]any{"device_fingerprint": fp, "phone": to, "message": text}
	if slot != "" {
		b["sim_slot"] = slot
	}
	return b
}

func (e *env) queueStatus(key, queueID string) resp {
	e.t.Helper()
	r := e.do(call{method: "GET", path: "/chat/queue/" + queueID, token: key})
	e.want(r, http.StatusOK, "")
	return r
}

func TestSendShapesAndValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(a.apiKey, "a-phone")
	e.pairPhone(b.apiKey, "b-phone")

	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+1 (555) 123-4567", "hello", "SIM1")})
	e.want(r, http.StatusOK, "")
	if r.str("message") != "queued" || uuid.Validate(r.str("queueId")) != nil || len(r.Body) != 2 {
		t.Fatalf("chat/send: got %s, want {message:\"queued\", queueId:<uuid>}", r.Raw)
	}
	q := e.queueStatus(a.apiKey, r.str("queueId"))
	if q.str("queue_id") != r.str("queueId") || q.str("status") != "queued" || q.Body["id"].(float64) < 1 || q.str("updated_at") == "" {
		t.Fatalf("queue status: %s", q.Raw)
	}

	r = e.do(call{method: "POST", path: "/automation/send-sms", token: a.access, body: sendBody("a-phone", "+15551234567", "héllo", "")})
	e.want(r, http.StatusOK, "")
	want := map[string]any{"message": "héllo", "phone": "+15551234567", "device_fingerprint": "a-phone", "sim_slot": "SIM1"}
	for k, v := range want {
		if r.Body[k] != v {
			t.Errorf("alias %s: got %v, want %v", k, r.Body[k], v)
		}
	}
	if id, ok := r.Body["id"].(float64); !ok || id < 2 || len(r.Body) != 5 {
		t.Errorf("alias answer: %s", r.Raw)
	}

	cases := []struct {
		name   string
		body   map[string]any
		status int
		code   string
		field  string
	}{
		{"no device", sendBody("", "+15551234567", "x", ""), 400, "validation_failed", "device_fingerprint"},
		{"no phone", sendBody("a-phone", "", "x", ""), 400, "validation_failed", "phone"},
		{"phone without +", sendBody("a-phone", "15551234567", "x", ""), 400, "validation_failed", "phone"},
		{"no message", sendBody("a-phone", "+15551234567", "", ""), 400, "validation_failed", "message"},
		{"1601 characters", sendBody("a-phone", "+15551234567", strings.Repeat("a", 1601), ""), 400, "validation_failed", "message"},
		{"bad slot", sendBody("a-phone", "+15551234567", "x", "SIM3"), 400, "validation_failed", "sim_slot"},
		{"unknown device", sendBody("nope", "+15551234567", "x", ""), 404, "not_found", "device_fingerprint"},
		{"another company's device", sendBody("b-phone", "+15551234567", "x", ""), 404, "not_found", "device_fingerprint"},
	}
	for _, c := range cases {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: c.body})
		if r.Status != c.status || r.str("error") != c.code || r.str("field") != c.field {
			t.Errorf("%s: got %d %s, want %d %s field %s", c.name, r.Status, r.Raw, c.status, c.code, c.field)
		}
	}
	if r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", strings.Repeat("ж", 1600), "")}); r.Status != 200 {
		t.Errorf("1600 characters: got %d, want 200", r.Status)
	}

	// A device on SIM1 refuses SIM2; BOTH takes either.
	e.want(e.do(call{method: "PATCH", path: "/device/a-phone", token: a.apiKey, body: map[string]any{"selected_sim": "SIM1"}}), http.StatusOK, "")
	r = e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "x", "SIM2")})
	e.want(r, http.StatusForbidden, "sim_mismatch")
	e.want(e.do(call{method: "PATCH", path: "/device/a-phone", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "x", "")}), http.StatusForbidden, "device_disabled")

	// Another company's queue id is not found.
	e.want(e.do(call{method: "GET", path: "/chat/queue/" + q.str("queue_id"), token: b.apiKey}), http.StatusNotFound, "not_found")
}

func TestDispatchAckStatusAndHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", true)

	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "your code is 1234", "SIM2")})
	e.want(r, http.StatusOK, "")
	id := r.str("queueId")
	e.eventually("the phone gets the job", func() bool { return len(phone.Jobs()) == 1 })
	job := phone.Jobs()[0]
	if job.ID != id || job.To != "+15551234567" || job.Message != "your code is 1234" || job.SIMSlot != "SIM2" || job.Channel != "sms" || job.ContentType != "" {
		t.Fatalf("got job %+v", job)
	}
	if exp, err := time.Parse("2006-01-02T15:04:05.000Z", job.ExpiresAt); err != nil || exp.Sub(e.clock.Now()) != 24*time.Hour {
		t.Errorf("expires_at %q: want 24 h after the send", job.ExpiresAt)
	}
	e.eventually("delivered", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "delivered" })

	h := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567", token: a.apiKey})
	e.want(h, http.StatusOK, "")
	msgs := h.Body["messages"].([]any)
	if len(msgs) != 1 || h.Body["total"] != float64(1) || h.Body["page"] != float64(1) || h.Body["pages"] != float64(1) {
		t.Fatalf("history: %s", h.Raw)
	}
	m := msgs[0].(map[string]any)
	for k, v := range map[string]any{"direction": "outbound", "message": "your code is 1234", "phone": "+15551234567", "sim_slot": "SIM2", "status": "delivered", "queue_id": id, "segments": float64(1)} {
		if m[k] != v {
			t.Errorf("history item %s: got %v, want %v", k, m[k], v)
		}
	}
	for _, k := range []string{"id", "created_at", "updated_at"} {
		if m[k] == nil {
			t.Errorf("history item lacks %s: %v", k, m)
		}
	}
	if _, ok := m["error"]; ok {
		t.Errorf("a delivered message carries error: %v", m)
	}

	// A failure report carries its error into history.
	r = e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "second", "")})
	id2 := r.str("queueId")
	e.eventually("the second job", func() bool { return len(phone.Jobs()) == 2 })
	e.eventually("delivered too", func() bool { return e.queueStatus(a.apiKey, id2).str("status") == "delivered" })
	// A late "failed" cannot move a delivered message back.
	phone.Report(id2, proto.StatusFailed, "radio_off")
	e.eventually("the report is acknowledged", func() bool { return phone.Pending() == 0 })
	if s := e.queueStatus(a.apiKey, id2).str("status"); s != "delivered" {
		t.Errorf("a late failure moved a delivered message to %s", s)
	}
}

func TestFailureReportAndUnknownJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "x", "")})
	id := r.str("queueId")
	e.eventually("sending after the ack", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "sending" })
	phone.Report(id, proto.StatusFailed, "no_service")
	e.eventually("failed", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "failed" })
	if q := e.queueStatus(a.apiKey, id); q.str("error") != "no_service" {
		t.Errorf("got error %q, want no_service", q.str("error"))
	}
}

func TestStoreAndForwardAndResendAfterReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	var ids []string
	for i := range 3 {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", fmt.Sprint("offline ", i), "")})
		ids = append(ids, r.str("queueId"))
	}

	// A raw phone takes the jobs but acks none, then drops the link.
	ws := dialRaw(t, e, reg.DeviceToken)
	for i := range 3 {
		s, ok := readRaw(t, ws).(*proto.Send)
		if !ok || s.ID != ids[i] {
			t.Fatalf("job %d: got %#v, want %s in queue order", i, s, ids[i])
		}
	}
	ws.CloseNow()
	e.eventually("offline", func() bool { return !linked(e.hub, "a-phone") })

	// After reconnecting, the un-acked jobs come again, in order.
	ws = dialRaw(t, e, reg.DeviceToken)
	defer ws.CloseNow()
	for i := range 3 {
		s, ok := readRaw(t, ws).(*proto.Send)
		if !ok || s.ID != ids[i] {
			t.Fatalf("resend %d: got %#v, want %s", i, s, ids[i])
		}
		writeRaw(t, ws, proto.Ack{ID: s.ID})
	}
	for _, id := range ids {
		e.eventually("sending", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "sending" })
	}
	ws.CloseNow()
	e.eventually("offline", func() bool { return !linked(e.hub, "a-phone") })
	// Acked jobs are the phone's now: a new link gets nothing again.
	ws = dialRaw(t, e, reg.DeviceToken)
	defer ws.CloseNow()
	writeRaw(t, ws, proto.Inbound{ClientID: "probe", Channel: "sms", From: "+15550000000", Message: "probe"})
	if f, ok := readRaw(t, ws).(*proto.InboundAck); !ok || f.ClientID != "probe" {
		t.Fatalf("got %#v, want no resend of acked jobs before the probe's ack", f)
	}
}

func TestAckWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	ws := dialRaw(t, e, reg.DeviceToken)
	defer ws.CloseNow()
	for i := range 20 {
		e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", fmt.Sprint("m", i), "")}), http.StatusOK, "")
	}
	var got []*proto.Send
	for range 16 {
		got = append(got, readRaw(t, ws).(*proto.Send))
	}
	// The 17th waits for an ack: the window is 16. A probe proves nothing else is queued before it.
	writeRaw(t, ws, proto.Inbound{ClientID: "probe", Channel: "sms", From: "+15550000000", Message: "probe"})
	if f, ok := readRaw(t, ws).(*proto.InboundAck); !ok {
		t.Fatalf("got %#v, want the probe's ack: more than 16 un-acked sends were written", f)
	}
	writeRaw(t, ws, proto.Ack{ID: got[0].ID})
	if s, ok := readRaw(t, ws).(*proto.Send); !ok || s.Message != "m16" {
		t.Fatalf("after one ack: got %#v, want m16", s)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(a.apiKey, "a-phone")
	e.pairPhone(b.apiKey, "b-phone")
	send := func(key, token, fp string) resp {
		return e.do(call{method: "POST", path: "/chat/send", token: token, body: sendBody(fp, "+15551234567", "once", ""), header: map[string]string{"Idempotency-Key": key}})
	}
	first := send("order-42", a.apiKey, "a-phone")
	again := send("order-42", a.apiKey, "a-phone")
	e.want(again, http.StatusOK, "")
	if again.str("queueId") != first.str("queueId") || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: got %s (replayed %q), want the first answer %s", again.Raw, again.Header.Get("Idempotent-Replayed"), first.Raw)
	}
	// The key belongs to the company: another company's same key is a new send.
	if other := send("order-42", b.apiKey, "b-phone"); other.str("queueId") == first.str("queueId") {
		t.Fatal("another company's key replayed this company's answer")
	}
	h := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567", token: a.apiKey})
	if h.Body["total"] != float64(1) {
		t.Fatalf("got %v messages, want 1", h.Body["total"])
	}
	e.want(send(strings.Repeat("k", 256), a.apiKey, "a-phone"), http.StatusBadRequest, "validation_failed")
	// After 24 hours the key is free again.
	e.clock.Advance(24*time.Hour + time.Second)
	if later := send("order-42", a.apiKey, "a-phone"); later.str("queueId") == first.str("queueId") {
		t.Fatal("a 24-hour-old key still replayed")
	}
}

func TestHistoryPagingAndConversations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	for i := range 120 {
		e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", fmt.Sprint("n", i), "")}), http.StatusOK, "")
	}
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15559990000", "other", "")}), http.StatusOK, "")

	page := func(q string) resp {
		return e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000" + q, token: a.apiKey})
	}
	r := page("&limit=50")
	if r.Body["total"] != float64(120) || r.Body["pages"] != float64(3) || r.Body["page"] != float64(1) || len(r.Body["messages"].([]any)) != 50 {
		t.Fatalf("page 1: total %v pages %v page %v items %d", r.Body["total"], r.Body["pages"], r.Body["page"], len(r.Body["messages"].([]any)))
	}
	if first := r.Body["messages"].([]any)[0].(map[string]any); first["message"] != "n119" {
		t.Errorf("newest first: got %v first", first["message"])
	}
	r = page("&limit=50&page=3")
	items := r.Body["messages"].([]any)
	if len(items) != 20 || items[19].(map[string]any)["message"] != "n0" {
		t.Fatalf("page 3: got %d items, want 20 ending with n0", len(items))
	}
	if r := page("&page=4"); len(r.Body["messages"].([]any)) != 0 || r.Body["pages"] != float64(3) {
		t.Errorf("past the end (default limit 50): %s", r.Raw)
	}
	if r := page(""); len(r.Body["messages"].([]any)) != 50 {
		t.Errorf("default limit: got %d, want 50", len(r.Body["messages"].([]any)))
	}
	for q, field := range map[string]string{"&limit=0": "limit", "&limit=101": "limit", "&page=0": "page", "&limit=x": "limit"} {
		if r := page(q); r.Status != 400 || r.str("field") != field {
			t.Errorf("%s: got %d %s, want 400 field %s", q, r.Status, r.Raw, field)
		}
	}
	empty := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15550000001", token: a.apiKey})
	if empty.Body["total"] != float64(0) || empty.Body["pages"] != float64(0) {
		t.Errorf("no messages: got total %v pages %v, want 0 0", empty.Body["total"], empty.Body["pages"])
	}
	e.want(e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=nope&phone=%2B15551230000", token: a.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone", token: a.apiKey}), http.StatusBadRequest, "validation_failed")

	c := e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=a-phone", token: a.apiKey})
	e.want(c, http.StatusOK, "")
	convs := c.Body["conversations"].([]any)
	if len(convs) != 2 {
		t.Fatalf("got %d conversations, want 2", len(convs))
	}
	newest := convs[0].(map[string]any)
	for k, v := range map[string]any{"phone": "+15559990000", "lastMessage": "other", "direction": "outbound", "messageCount": float64(1)} {
		if newest[k] != v {
			t.Errorf("newest conversation %s: got %v, want %v", k, newest[k], v)
		}
	}
	if older := convs[1].(map[string]any); older["messageCount"] != float64(120) || older["lastMessage"] != "n119" || older["lastMessageAt"] == "" {
		t.Errorf("older conversation: %v", older)
	}
	e.want(e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=nope", token: a.apiKey}), http.StatusNotFound, "not_found")
	// limit: the latest first, at most 1000.
	c = e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=a-phone&limit=1", token: a.apiKey})
	if convs := c.Body["conversations"].([]any); len(convs) != 1 || convs[0].(map[string]any)["phone"] != "+15559990000" {
		t.Errorf("limit=1: got %s, want the newest conversation alone", c.Raw)
	}
	for _, q := range []string{"0", "1001", "x", "-1"} {
		if r := e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=a-phone&limit=" + q, token: a.apiKey}); r.Status != 400 || r.str("field") != "limit" {
			t.Errorf("limit=%s: got %d %s, want 400 field limit", q, r.Status, r.Raw)
		}
	}
}

func TestInboundStoredOnceAndListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.pairPhone(b.apiKey, "b-phone")
	e.want(e.do(call{method: "GET", path: "/automation/latest-sms", token: a.apiKey}), http.StatusNotFound, "not_found")

	in := proto.Inbound{ClientID: "sms-1", From: "+1 555 765 4321", Message: "STOP", SIMSlot: "SIM2", ReceivedAt: "2026-11-22T09:59:58.000Z"}
	first := waitAck(t, phone.Receive(in))
	// The same client_id again (a resend after a lost ack) is stored once.
	if again := waitAck(t, phone.Receive(proto.Inbound{ClientID: "sms-1", From: "+15557654321", Message: "STOP"})); again.ID != first.ID {
		t.Fatalf("a repeat got id %d, want %d", again.ID, first.ID)
	}
	list := e.do(call{method: "GET", path: "/automation/inbound-sms", token: a.apiKey})
	e.want(list, http.StatusOK, "")
	var items []map[string]any
	mustJSON(t, list.Raw, &items)
	if len(items) != 1 {
		t.Fatalf("got %d inbound, want 1", len(items))
	}
	for k, v := range map[string]any{"id": float64(first.ID), "uuid": first.UUID, "phone": "+15557654321", "message": "STOP", "sim_slot": "SIM2", "device_fingerprint": "a-phone", "received_at": "2026-11-22T09:59:58.000Z"} {
		if items[0][k] != v {
			t.Errorf("inbound %s: got %v, want %v", k, items[0][k], v)
		}
	}
	latest := e.do(call{method: "GET", path: "/automation/latest-sms", token: a.apiKey})
	if latest.str("id") != first.UUID || latest.Body["message_id"] != float64(first.ID) {
		t.Errorf("latest: got %s, want id = the UUID", latest.Raw)
	}
	hist := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15557654321", token: a.apiKey})
	if m := hist.Body["messages"].([]any)[0].(map[string]any); m["direction"] != "inbound" || m["status"] != "received" {
		t.Errorf("inbound in history: %v", m)
	}
	conv := e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=a-phone", token: a.apiKey})
	if c := conv.Body["conversations"].([]any)[0].(map[string]any); c["direction"] != "inbound" || c["messageCount"] != float64(1) {
		t.Errorf("inbound conversation: %v", c)
	}

	// Filters.
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "sms-2", From: "+15550001111", Message: "hi", SIMSlot: "SIM1"}))
	for q, want := range map[string]int{"": 2, "?sim_slot=SIM1": 1, "?sim_slot=SIM2": 1, "?device_fingerprint=a-phone&sim_slot=SIM1": 1, "?device_fingerprint=b-phone": 0, "?device_fingerprint=nope": 0} {
		r := e.do(call{method: "GET", path: "/automation/inbound-sms" + q, token: a.apiKey})
		var got []map[string]any
		mustJSON(t, r.Raw, &got)
		if r.Status != 200 || len(got) != want {
			t.Errorf("inbound-sms%s: got %d %d items, want %d", q, r.Status, len(got), want)
		}
	}
	if r := e.do(call{method: "GET", path: "/automation/latest-sms?sim_slot=SIM1", token: a.apiKey}); r.str("message") != "hi" {
		t.Errorf("latest on SIM1: %s", r.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/automation/inbound-sms?sim_slot=SIM9", token: a.apiKey}), http.StatusBadRequest, "validation_failed")
	e.want(e.do(call{method: "GET", path: "/automation/latest-sms?device_fingerprint=b-phone", token: a.apiKey}), http.StatusNotFound, "not_found")
	// Company B sees none of it.
	r := e.do(call{method: "GET", path: "/automation/inbound-sms", token: b.apiKey})
	if strings.TrimSpace(string(r.Raw)) != "[]" {
		t.Errorf("company B's inbound list: %s", r.Raw)
	}
}

func TestTTLExpiryAndDeletedDeviceQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	e.pairPhone(a.apiKey, "b-phone")
	old := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "too late", "")}).str("queueId")
	e.clock.Advance(24*time.Hour + time.Second)
	fresh := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "in time", "")}).str("queueId")
	e.sms.Expire()
	if s := e.queueStatus(a.apiKey, old).str("status"); s != "expired" {
		t.Fatalf("got %s, want expired", s)
	}
	phone := e.runPhone(reg, "BOTH", false)
	e.eventually("the fresh job", func() bool { return len(phone.Jobs()) == 1 })
	if j := phone.Jobs(); j[0].ID != fresh {
		t.Fatalf("got job %s, want only the fresh one", j[0].ID)
	}

	// Deleting a device fails what it had not finished.
	queued := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("b-phone", "+15551234567", "never", "")}).str("queueId")
	e.want(e.do(call{method: "DELETE", path: "/device/delete/b-phone", token: a.apiKey}), http.StatusOK, "")
	q := e.queueStatus(a.apiKey, queued)
	if q.str("status") != "failed" || q.str("error") != "device_deleted" {
		t.Fatalf("after delete: %s", q.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("b-phone", "+15551234567", "x", "")}), http.StatusNotFound, "not_found")
}

// dialRaw connects a raw WebSocket phone and completes hello/welcome.
func dialRaw(t *testing.T, e *env, token string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, ws, proto.Hello{Protocol: 1, SelectedSIM: "BOTH"})
	if _, ok := readRaw(t, ws).(*proto.Welcome); !ok {
		t.Fatal("no welcome")
	}
	return ws
}

func writeRaw(t *testing.T, ws *websocket.Conn, f proto.Frame) {
	t.Helper()
	data, _ := proto.Encode(f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
}

func readRaw(t *testing.T, ws *websocket.Conn) proto.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	f, err := proto.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func waitAck(t *testing.T, ch <-chan proto.InboundAck) proto.InboundAck {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no inbound_ack within 10s")
	}
	return proto.InboundAck{}
}

func mustJSON(t testing.TB, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
}

// TestForeignPhoneCannotTouchJobs: a phone of company B that names company
// A's job in an ack or status is refused by an error frame naming the job,
// and A's message does not move. A malformed report is refused with its field.
func TestForeignPhoneCannotTouchJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(a.apiKey, "a-phone")
	intruder := dialRaw(t, e, e.pairPhone(b.apiKey, "b-phone").DeviceToken)
	defer intruder.CloseNow()
	id := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "secret", "")}).str("queueId")

	refused := func(what string, want proto.Error) {
		t.Helper()
		got, ok := readRaw(t, intruder).(*proto.Error)
		if !ok || got.Code != want.Code || got.ID != want.ID || got.ClientID != want.ClientID || got.Field != want.Field || !strings.HasPrefix(got.Message, what+": ") {
			t.Fatalf("%s: got %#v, want an error frame like %+v with message %q...", what, got, want, what+": ")
		}
	}
	writeRaw(t, intruder, proto.Ack{ID: id})
	refused("ack", proto.Error{Code: "not_found", ID: id})
	writeRaw(t, intruder, proto.Status{ID: id, Status: proto.StatusDelivered, At: "2026-11-22T10:04:05Z"})
	refused("status", proto.Error{Code: "not_found", ID: id})
	writeRaw(t, intruder, proto.Status{ID: id, Status: proto.StatusSent, At: "yesterday"})
	refused("status", proto.Error{Code: "validation_failed", ID: id, Field: "at"})
	writeRaw(t, intruder, proto.Inbound{ClientID: "in-1", Channel: "sms", From: "  ", Message: "hi", ReceivedAt: "2026-11-22T10:04:05Z"})
	refused("inbound", proto.Error{Code: "validation_failed", ClientID: "in-1", Field: "from"})

	// The link stays up after refusals, and A's job has not moved.
	writeRaw(t, intruder, proto.Inbound{ClientID: "in-2", Channel: "sms", From: "+15557654321", Message: "hello", ReceivedAt: "2026-11-22T10:04:05Z"})
	if ack, ok := readRaw(t, intruder).(*proto.InboundAck); !ok || ack.ClientID != "in-2" {
		t.Fatalf("got %#v, want the inbound_ack of in-2", ack)
	}
	if q := e.queueStatus(a.apiKey, id); q.str("status") != "queued" {
		t.Errorf("company A's message after company B's reports: %s, want queued", q.Raw)
	}
	if r := e.do(call{method: "GET", path: "/automation/inbound-sms", token: a.apiKey}); strings.Contains(string(r.Raw), "hello") {
		t.Errorf("company A sees company B's inbound: %s", r.Raw)
	}
}

// A send from a SIM slot the device did not announce is refused at once
// (403 sim_mismatch) on every SMS send route, and nothing is stored; the
// SIMs its latest hello announces count; a device that announced no SIMs
// (an older client) takes either slot, as its selected_sim allows.
func TestSendToUnannouncedSIM(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	one := e.pairPhoneSIMs(a.apiKey, "one-sim", []proto.SIM{{Slot: "SIM1"}})
	e.pairPhoneSIMs(a.apiKey, "old-phone", nil)
	const to = "+15551234567"
	bulk := map[string]any{"device_fingerprint": "one-sim", "sim_slot": "SIM2", "messages": []map[string]any{{"phone": to, "message": "x"}}}
	for _, c := range []call{
		{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("one-sim", to, "x", "SIM2")},
		{method: "POST", path: "/automation/send-sms", token: a.access, body: sendBody("one-sim", to, "x", "SIM2")},
		{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulk},
	} {
		r := e.do(c)
		e.want(r, http.StatusForbidden, "sim_mismatch")
		if r.str("field") != "sim_slot" {
			t.Errorf("%s: got field %q, want sim_slot", c.path, r.str("field"))
		}
	}
	if r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=one-sim&phone=%2B15551234567", token: a.apiKey}); r.Body["total"] != float64(0) {
		t.Fatalf("refused sends were stored: %s", r.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("one-sim", to, "x", "SIM1")}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("old-phone", to, "x", "SIM2")}), http.StatusOK, "")

	// The phone's hello announces both SIMs now: SIM2 is taken.
	e.runPhone(one, "BOTH", false)
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("one-sim", to, "x", "SIM2")}), http.StatusOK, "")
}

// TestIdempotencyKeyIsTheRoutes: a key is the company's and the route's. The
// same key on another send route is another key (an iMessage send is not
// answered with an SMS's queue id); on the same route a retry with the same
// body, however it is spaced or ordered, replays the first answer, and a
// reuse with another body answers 422 idempotency_key_reused.
func TestIdempotencyKeyIsTheRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", nil, []string{imHandle}, false)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	key := map[string]string{"Idempotency-Key": "order-7"}

	sms := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, header: key, body: sendBody("a-phone", "+15551234567", "once", "")})
	e.want(sms, http.StatusOK, "")
	imsg := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, header: key,
		body: map[string]any{"handle_id": im, "to": "bob@example.com", "content": "once"}})
	e.want(imsg, http.StatusAccepted, "")
	if imsg.Header.Get("Idempotent-Replayed") != "" || imsg.str("id") == "" {
		t.Fatalf("/imessage/send after /chat/send with one key: got %s (replayed %q), want a new iMessage send",
			imsg.Raw, imsg.Header.Get("Idempotent-Replayed"))
	}
	alias := e.do(call{method: "POST", path: "/automation/send-sms", token: a.apiKey, header: key, body: sendBody("a-phone", "+15551234567", "once", "")})
	e.want(alias, http.StatusOK, "")
	if alias.Header.Get("Idempotent-Replayed") != "" || alias.Body["id"] == nil {
		t.Fatalf("/automation/send-sms after /chat/send with one key: got %s, want its own answer", alias.Raw)
	}

	// The same request again, its JSON spaced and ordered otherwise: a retry.
	retry := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, header: key,
		body: `{ "message": "once",  "phone": "+15551234567", "device_fingerprint": "a-phone" }`})
	e.want(retry, http.StatusOK, "")
	if retry.str("queueId") != sms.str("queueId") || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: got %s, want the replay of %s", retry.Raw, sms.Raw)
	}
	// Another request under the used key.
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, header: key, body: sendBody("a-phone", "+15551234567", "twice", "")})
	e.want(r, http.StatusUnprocessableEntity, "idempotency_key_reused")
	if r.str("field") != "Idempotency-Key" {
		t.Errorf("field: got %q, want Idempotency-Key", r.str("field"))
	}
	r = e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, header: key,
		body: map[string]any{"handle_id": im, "to": "carol@example.com", "content": "once"}})
	e.want(r, http.StatusUnprocessableEntity, "idempotency_key_reused")
	h := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567", token: a.apiKey})
	if h.Body["total"] != float64(2) {
		t.Fatalf("got %v SMS, want 2 (/chat/send and its alias, once each)", h.Body["total"])
	}
}
