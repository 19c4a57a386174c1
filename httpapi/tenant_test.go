package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// TestReusedFingerprintIsANewDevice: a handset's fingerprint outlives its
// registration. Company A pairs a phone, uses it and deletes it; company B
// pairs the same handset. B must see nothing of A's, move none of A's jobs,
// and get its own messages for client_ids A's phone used; A's history stays.
func TestReusedFingerprintIsANewDevice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	const fp = "handset-7"
	const peer, sender = "+15551234567", "+15557654321"

	// A: one job delivered, one left queued (failed by the delete), one
	// inbound message.
	phoneA := e.runPhone(e.pairPhone(a.apiKey, fp), "BOTH", false)
	delivered := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody(fp, peer, "A: delivered", "")}).str("queueId")
	e.eventually("A's phone takes the job", func() bool { return e.queueStatus(a.apiKey, delivered).str("status") == "sending" })
	phoneA.Report(delivered, proto.StatusSent, "")
	phoneA.Report(delivered, proto.StatusDelivered, "")
	e.eventually("delivered", func() bool { return e.queueStatus(a.apiKey, delivered).str("status") == "delivered" })
	inA := waitAck(t, phoneA.Receive(proto.Inbound{ClientID: "sms-1", From: sender, Message: "A: inbound", SIMSlot: "SIM1", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	phoneA.stop()
	<-phoneA.done
	phoneA.done <- nil // for the cleanup's wait
	queued := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody(fp, peer, "A: queued", "")}).str("queueId")
	e.want(e.do(call{method: "DELETE", path: "/device/delete/" + fp, token: a.apiKey}), http.StatusOK, "")

	// B pairs the same handset.
	phoneB := dialRaw(t, e, e.pairPhone(b.apiKey, fp).DeviceToken)
	defer phoneB.CloseNow()

	get := func(path string) resp {
		t.Helper()
		return e.do(call{method: "GET", path: path, token: b.apiKey})
	}
	q := "device_fingerprint=" + url.QueryEscape(fp)
	for _, number := range []string{peer, sender} {
		r := get("/chat/messages?" + q + "&phone=" + url.QueryEscape(number))
		e.want(r, http.StatusOK, "")
		if r.Body["total"] != float64(0) || r.Body["pages"] != float64(0) || len(r.Body["messages"].([]any)) != 0 {
			t.Errorf("B's history with %s shows A's messages: %s", number, r.Raw)
		}
	}
	if r := get("/chat/conversations?" + q); len(r.Body["conversations"].([]any)) != 0 {
		t.Errorf("B's conversations show A's: %s", r.Raw)
	}
	for _, path := range []string{"/automation/inbound-sms", "/automation/inbound-sms?" + q} {
		if r := get(path); strings.TrimSpace(string(r.Raw)) != "[]" {
			t.Errorf("%s for B shows A's: %s", path, r.Raw)
		}
	}
	for _, path := range []string{"/automation/latest-sms", "/automation/latest-sms?" + q} {
		e.want(get(path), http.StatusNotFound, "not_found")
	}

	// B's phone cannot ack or report A's jobs.
	for _, id := range []string{delivered, queued} {
		writeRaw(t, phoneB, proto.Ack{ID: id})
		if got, ok := readRaw(t, phoneB).(*proto.Error); !ok || got.Code != "not_found" || got.ID != id {
			t.Errorf("B's ack of A's job %s: got %#v, want a not_found error frame", id, got)
		}
		writeRaw(t, phoneB, proto.Status{ID: id, Status: proto.StatusDelivered, At: "2026-11-22T10:04:05Z"})
		if got, ok := readRaw(t, phoneB).(*proto.Error); !ok || got.Code != "not_found" || got.ID != id {
			t.Errorf("B's report of A's job %s: got %#v, want a not_found error frame", id, got)
		}
	}

	// B's inbound with the client_id A's phone used is B's own new message.
	writeRaw(t, phoneB, proto.Inbound{ClientID: "sms-1", Channel: "sms", From: sender, Message: "B: inbound", ReceivedAt: "2026-11-22T10:04:05Z"})
	ack, ok := readRaw(t, phoneB).(*proto.InboundAck)
	if !ok || ack.ClientID != "sms-1" || ack.ID == inA.ID || ack.UUID == inA.UUID {
		t.Fatalf("B's inbound sms-1: got %#v, want a new message (A's was %d)", ack, inA.ID)
	}
	latest := get("/automation/latest-sms")
	if latest.Status != http.StatusOK || latest.str("message") != "B: inbound" || latest.Body["message_id"] != float64(ack.ID) {
		t.Errorf("B's latest inbound: %s, want B's own", latest.Raw)
	}
	r := get("/chat/messages?" + q + "&phone=" + url.QueryEscape(sender))
	if r.Body["total"] != float64(1) || r.Body["messages"].([]any)[0].(map[string]any)["message"] != "B: inbound" {
		t.Errorf("B's history with %s: %s, want B's one message", sender, r.Raw)
	}

	// A's history is intact and still A's.
	if s := e.queueStatus(a.apiKey, delivered); s.str("status") != "delivered" {
		t.Errorf("A's delivered job after B's reports: %s", s.Raw)
	}
	if s := e.queueStatus(a.apiKey, queued); s.str("status") != "failed" || s.str("error") != "device_deleted" {
		t.Errorf("A's queued job after the delete and B's reports: %s", s.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/chat/queue/" + delivered, token: b.apiKey}), http.StatusNotFound, "not_found")
	inbound := e.do(call{method: "GET", path: "/automation/inbound-sms", token: a.apiKey})
	if !strings.Contains(string(inbound.Raw), "A: inbound") || strings.Contains(string(inbound.Raw), "B: inbound") {
		t.Errorf("A's inbound list: %s, want A's message alone", inbound.Raw)
	}
	// A's own lists name the device by fingerprint; A no longer has it.
	e.want(e.do(call{method: "GET", path: "/chat/messages?" + q + "&phone=" + url.QueryEscape(peer), token: a.apiKey}), http.StatusNotFound, "not_found")
}
