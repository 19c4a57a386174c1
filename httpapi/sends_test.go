package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// readUntil reads frames until one of type T arrives (pings and the like are skipped).
func readUntil[T proto.Frame](t *testing.T, ws *websocket.Conn) T {
	t.Helper()
	for range 50 {
		if f, ok := readRaw(t, ws).(T); ok {
			return f
		}
	}
	var zero T
	t.Fatalf("no %T frame", zero)
	return zero
}

// statusBodies are the status events a receiver got, by path.
type statusEvent struct {
	Path, Delivery, Signature, Timestamp string
	Body                                 []byte
	Type                                 string         `json:"type"`
	CreatedAt                            string         `json:"created_at"`
	Data                                 map[string]any `json:"data"`
}

func statusEvents(t *testing.T, rc *webhooktest.Receiver, path string) []statusEvent {
	t.Helper()
	var out []statusEvent
	for _, r := range rc.Requests() {
		if r.Path != path || !strings.HasPrefix(r.Header.Get("X-Service-Event"), "message.") {
			continue
		}
		var ev statusEvent
		mustJSON(t, r.Body, &ev)
		ev.Path, ev.Body, ev.Delivery = r.Path, r.Body, r.Header.Get("X-Service-Delivery")
		ev.Signature, ev.Timestamp = r.Header.Get("X-Service-Signature"), r.Header.Get("X-Service-Timestamp")
		if ev.Type != r.Header.Get("X-Service-Event") {
			t.Fatalf("type %q under X-Service-Event %q", ev.Type, r.Header.Get("X-Service-Event"))
		}
		out = append(out, ev)
	}
	return out
}

func eventTypes(evs []statusEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type+":"+fmt.Sprint(ev.Data["id"]))
	}
	return out
}

var allStatusEvents = []string{"message.sent", "message.delivered", "message.failed", "message.expired"}

// Status events go only to entries that ask for them, in their scope; a
// status reported twice makes one event; expiry and failure make theirs; an
// entry written as the specification shows (no events) and another company
// get none.
func TestStatusEventsOptInOncePerChange(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	regA := e.pairPhone(a.apiKey, "a-phone")
	e.pairPhone(a.apiKey, "a-other")
	regB := e.pairPhone(b.apiKey, "b-phone")
	hooks := e.whPut(a.apiKey,
		map[string]any{"url": rc.URL + "/status", "events": allStatusEvents, "devices": []string{"a-phone"}},
		map[string]any{"url": rc.URL + "/plain"},
		map[string]any{"url": rc.URL + "/other-device", "events": []string{"message.sent"}, "devices": []string{"a-other"}},
	)
	if got := hooks[0]["events"]; fmt.Sprint(got) != fmt.Sprint(allStatusEvents) {
		t.Fatalf("entry events: got %v", got)
	}
	if _, shown := hooks[1]["events"]; shown {
		t.Fatalf("an entry without events shows them: %v", hooks[1])
	}
	e.whPut(b.apiKey, map[string]any{"url": rc.URL + "/b", "events": allStatusEvents})
	secret := e.whSecret(a.apiKey)

	ws := dialRaw(t, e, regA.DeviceToken)
	defer ws.CloseNow()
	id := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "hi", "SIM2")}).str("queueId")
	job := readUntil[*proto.Send](t, ws)
	if job.ID != id {
		t.Fatalf("got job %s, want %s", job.ID, id)
	}
	writeRaw(t, ws, proto.Ack{ID: id})
	at := "2026-11-22T10:04:05.000Z"
	for range 2 { // the phone repeats its report: one event
		writeRaw(t, ws, proto.Status{ID: id, Status: proto.StatusSent, At: at})
		readUntil[*proto.StatusAck](t, ws)
	}
	writeRaw(t, ws, proto.Status{ID: id, Status: proto.StatusDelivered, At: at})
	readUntil[*proto.StatusAck](t, ws)
	writeRaw(t, ws, proto.Status{ID: id, Status: proto.StatusDelivered, At: at})
	readUntil[*proto.StatusAck](t, ws)

	failed := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234568", "no", "")}).str("queueId")
	readUntil[*proto.Send](t, ws)
	writeRaw(t, ws, proto.Status{ID: failed, Status: proto.StatusFailed, Error: "no_service", At: at})
	readUntil[*proto.StatusAck](t, ws)

	// A job nobody takes expires: message.expired. Company B's phone reports too.
	expired := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-other", "+15551234569", "late", "")}).str("queueId")
	phoneB := e.runPhone(regB, "BOTH", true)
	idB := e.do(call{method: "POST", path: "/chat/send", token: b.apiKey, body: sendBody("b-phone", "+15551234567", "b", "")}).str("queueId")
	e.eventually("company b's message delivered", func() bool { return e.queueStatus(b.apiKey, idB).str("status") == "delivered" })
	_ = phoneB
	e.clock.Advance(24*time.Hour + time.Second)
	e.sms.Expire()

	e.eventually("three status events at /status", func() bool { return len(statusEvents(t, rc, "/status")) >= 3 })
	e.eventually("company b's two events", func() bool { return len(statusEvents(t, rc, "/b")) == 2 })
	evs := statusEvents(t, rc, "/status")
	// a-phone's entry: sent and delivered of the first, failed of the second; the expired one is a-other's.
	got := eventTypes(evs)
	msgID := fmt.Sprint(e.queueStatus(a.apiKey, id).Body["id"])
	failedID := fmt.Sprint(e.queueStatus(a.apiKey, failed).Body["id"])
	want := []string{"message.sent:" + msgID, "message.delivered:" + msgID, "message.failed:" + failedID}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("events at /status: got %v, want %v", got, want)
	}
	for _, ev := range evs {
		if want := whSign(secret, ev.Timestamp, ev.Body); ev.Signature != want {
			t.Errorf("%s: got signature %q, want %q", ev.Type, ev.Signature, want)
		}
		var top map[string]any
		mustJSON(t, ev.Body, &top)
		if top["id"] != ev.Delivery {
			t.Errorf("%s: body id %v, delivery header %q", ev.Type, top["id"], ev.Delivery)
		}
		if _, err := time.Parse(contractTime, ev.CreatedAt); err != nil {
			t.Errorf("%s created_at %q: %v", ev.Type, ev.CreatedAt, err)
		}
		if ev.Type == "message.delivered" {
			wantData := map[string]any{"channel": "sms", "status": "delivered", "error": nil, "to": "+15551234567",
				"device_fingerprint": "a-phone", "sim_slot": "SIM2", "queue_id": id, "number_id": nil, "handle_id": nil}
			for k, v := range wantData {
				if got, ok := ev.Data[k]; !ok || got != v {
					t.Errorf("data.%s: got %v (present %v), want %v", k, got, ok, v)
				}
			}
			if len(ev.Data) != 11 {
				t.Errorf("data has %d fields, want 11: %v", len(ev.Data), ev.Data)
			}
			if _, err := time.Parse(contractTime, fmt.Sprint(ev.Data["updated_at"])); err != nil {
				t.Errorf("updated_at: %v", err)
			}
		}
		if ev.Type == "message.failed" && ev.Data["error"] != "no_service" {
			t.Errorf("failed event error: %v", ev.Data["error"])
		}
	}
	if evs := statusEvents(t, rc, "/other-device"); len(evs) != 0 {
		t.Errorf("an entry that asked for message.sent only got %v", eventTypes(evs))
	}
	// The plain entry gets inbound events only.
	if evs := statusEvents(t, rc, "/plain"); len(evs) != 0 {
		t.Errorf("an entry without events got status events %v", eventTypes(evs))
	}
	for _, ev := range statusEvents(t, rc, "/b") {
		if ev.Data["queue_id"] == id || ev.Data["queue_id"] == failed || ev.Data["queue_id"] == expired {
			t.Errorf("company b got company a's event %s", ev.Body)
		}
	}
	// The deliveries log lists them like inbound ones.
	e.eventually("logged", func() bool {
		n := 0
		for _, l := range e.whLog(a.apiKey, "") {
			if strings.HasPrefix(l.EventType, "message.") && l.State == "delivered" {
				n++
			}
		}
		return n == 3
	})
	if q := e.queueStatus(a.apiKey, expired); q.str("status") != "expired" {
		t.Fatalf("got %s, want expired", q.Raw)
	}
}

// An entry that asks for message.expired gets it; an unknown event type is refused.
func TestStatusEventsExpiredAndValidation(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []map[string]any{
		{"url": rc.URL + "/x"}, {"url": rc.URL + "/y", "events": []string{"message.sent", "message.bounced"}},
	}}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "webhooks[1].events[1]" {
		t.Fatalf("got field %q, want webhooks[1].events[1]", r.str("field"))
	}
	e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/exp", "events": []string{"message.expired", "sms.received"}})
	id := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "late", "")}).str("queueId")
	e.clock.Advance(24*time.Hour + time.Second)
	e.sms.Expire()
	e.eventually("the expiry event", func() bool { return len(statusEvents(t, rc, "/exp")) == 1 })
	ev := statusEvents(t, rc, "/exp")[0]
	if ev.Type != "message.expired" || ev.Data["queue_id"] != id || ev.Data["status"] != "expired" {
		t.Fatalf("got %s", ev.Body)
	}
	e.sms.Expire() // nothing more expires: no second event
	if n := len(statusEvents(t, rc, "/exp")); n != 1 {
		t.Fatalf("got %d expiry events, want 1", n)
	}
}
