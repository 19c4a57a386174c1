package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func scheduledBody(fp, to, text string, at time.Time) map[string]any {
	b := sendBody(fp, to, text, "")
	b["send_at"] = at.UTC().Format(time.RFC3339Nano)
	return b
}

// A scheduled send waits as scheduled, never reaches the phone early, is
// queued at its time, and its TTL counts from send_at. Bad send_at values
// name the field.
func TestScheduledSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.pairPhone(a.apiKey, "idle-phone")
	now := e.clock.Now()

	for _, c := range []struct{ name, at string }{
		{"not a time", "tomorrow"},
		{"in the past", now.Add(-time.Second).Format(time.RFC3339)},
		{"now", now.Format(time.RFC3339Nano)},
		{"beyond 30 days", now.Add(30*24*time.Hour + time.Second).Format(time.RFC3339)},
		// An hour ahead, but with ISO 8601's comma before the fraction,
		// which RFC 3339 does not write (Go reads it as a dot).
		{"a comma before the fraction", now.Add(time.Hour).UTC().Format("2006-01-02T15:04:05,000Z")},
	} {
		body := sendBody("a-phone", "+15551234567", "x", "")
		body["send_at"] = c.at
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: body})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "send_at" {
			t.Errorf("%s: got field %q, want send_at", c.name, r.str("field"))
		}
	}

	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", "+15551234567", "later", now.Add(time.Hour))})
	e.want(r, http.StatusOK, "")
	if r.str("message") != "scheduled" || r.str("queueId") == "" {
		t.Fatalf("got %s, want {message: scheduled, queueId}", r.Raw)
	}
	id := r.str("queueId")
	// An idle device's message expires a day after its send_at, not after its acceptance.
	idle := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("idle-phone", "+15551234567", "ttl", now.Add(2*time.Hour))}).str("queueId")
	now2 := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "now", "")}).str("queueId")
	e.eventually("the unscheduled job", func() bool { return len(phone.Jobs()) == 1 })
	if q := e.queueStatus(a.apiKey, id); q.str("status") != "scheduled" || q.str("send_at") != now.Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("got %s, want scheduled with its send_at", q.Raw)
	}
	if q := e.queueStatus(a.apiKey, now2); strings.Contains(string(q.Raw), "send_at") {
		t.Fatalf("an unscheduled send's queue item: got %s, want no send_at", q.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/chat/queue/" + id, token: b.apiKey}), http.StatusNotFound, "not_found")

	e.clock.Advance(time.Hour - time.Millisecond)
	e.sms.ReleaseDue()
	if q := e.queueStatus(a.apiKey, id); q.str("status") != "scheduled" {
		t.Fatalf("a millisecond early: got %s, want scheduled", q.Raw)
	}
	e.clock.Advance(time.Millisecond)
	e.sms.ReleaseDue()
	e.eventually("the scheduled job reaches the phone", func() bool { return len(phone.Jobs()) == 2 })
	if jobs := phone.Jobs(); jobs[0].ID != now2 || jobs[1].ID != id {
		t.Fatalf("got jobs %s, %s; want %s then %s", jobs[0].ID, jobs[1].ID, now2, id)
	}

	e.clock.Advance(time.Hour) // idle's send_at
	e.sms.ReleaseDue()
	if q := e.queueStatus(a.apiKey, idle); q.str("status") != "queued" {
		t.Fatalf("got %s, want queued", q.Raw)
	}
	e.clock.Advance(24*time.Hour - time.Second)
	e.sms.Expire()
	if q := e.queueStatus(a.apiKey, idle); q.str("status") != "queued" {
		t.Fatalf("a second before send_at + 24 h: got %s, want queued", q.Raw)
	}
	e.clock.Advance(2 * time.Second)
	e.sms.Expire()
	if q := e.queueStatus(a.apiKey, idle); q.str("status") != "expired" {
		t.Fatalf("after send_at + 24 h: got %s, want expired", q.Raw)
	}
}

// Cancel takes back a scheduled or a queued message, which then never
// reaches a phone; once the phone took it, or after a cancel, it is 409;
// another company's id is 404.
func TestCancelScheduledAndQueued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	reg := e.pairPhone(a.apiKey, "a-phone")
	now := e.clock.Now()
	scheduled := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", "+15551234567", "s", now.Add(time.Hour))}).str("queueId")
	queued := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "q", "")}).str("queueId")
	kept := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "k", "")}).str("queueId")

	e.want(e.do(call{method: "DELETE", path: "/chat/queue/" + scheduled, token: b.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "DELETE", path: "/chat/queue/not-an-id", token: a.apiKey}), http.StatusNotFound, "not_found")
	for _, id := range []string{scheduled, queued} {
		r := e.do(call{method: "DELETE", path: "/chat/queue/" + id, token: a.access})
		e.want(r, http.StatusOK, "")
		if r.str("status") != "canceled" || r.str("queue_id") != id || r.str("updated_at") == "" {
			t.Fatalf("cancel: got %s", r.Raw)
		}
		e.want(e.do(call{method: "DELETE", path: "/chat/queue/" + id, token: a.apiKey}), http.StatusConflict, "conflict")
	}
	e.clock.Advance(time.Hour)
	e.sms.ReleaseDue()
	phone := e.runPhone(reg, "BOTH", false)
	e.eventually("the kept job", func() bool { return len(phone.Jobs()) == 1 })
	e.eventually("sending", func() bool { return e.queueStatus(a.apiKey, kept).str("status") == "sending" })
	if jobs := phone.Jobs(); len(jobs) != 1 || jobs[0].ID != kept {
		t.Fatalf("got jobs %v, want only %s", jobs, kept)
	}
	for _, id := range []string{scheduled, queued} {
		if q := e.queueStatus(a.apiKey, id); q.str("status") != "canceled" {
			t.Fatalf("got %s, want canceled", q.Raw)
		}
	}
	r := e.do(call{method: "DELETE", path: "/chat/queue/" + kept, token: a.apiKey})
	e.want(r, http.StatusConflict, "conflict")
	if q := e.queueStatus(a.apiKey, kept); q.str("status") != "sending" {
		t.Fatalf("after a refused cancel: %s", q.Raw)
	}
}

// Deleting a device fails its scheduled messages at once, as its queued ones.
func TestDeletedDeviceFailsScheduled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	id := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", "+15551234567", "s", e.clock.Now().Add(time.Hour))}).str("queueId")
	e.want(e.do(call{method: "DELETE", path: "/device/delete/a-phone", token: a.apiKey}), http.StatusOK, "")
	q := e.queueStatus(a.apiKey, id)
	if q.str("status") != "failed" || q.str("error") != "device_deleted" {
		t.Fatalf("after delete: %s", q.Raw)
	}
	e.clock.Advance(time.Hour)
	e.sms.ReleaseDue()
	if q := e.queueStatus(a.apiKey, id); q.str("status") != "failed" {
		t.Fatalf("at its time: %s", q.Raw)
	}
	e.want(e.do(call{method: "DELETE", path: "/chat/queue/" + id, token: a.apiKey}), http.StatusConflict, "conflict")
}

// A bulk send with send_at schedules every message; at its time they all
// reach the phone, in the request's order.
func TestScheduledBulkSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	body := bulkBody("a-phone", 3)
	body["send_at"] = e.clock.Now().Add(time.Minute).Format(time.RFC3339Nano)
	r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: body})
	e.want(r, http.StatusOK, "")
	var ans struct {
		QueueIDs []string `json:"queueIds"`
	}
	mustJSON(t, r.Raw, &ans)
	for _, id := range ans.QueueIDs {
		if s := e.queueStatus(a.apiKey, id).str("status"); s != "scheduled" {
			t.Fatalf("%s: got %s, want scheduled", id, s)
		}
	}
	body["send_at"] = "2020-01-01T00:00:00Z"
	if r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: body}); r.Status != 400 || r.str("field") != "send_at" {
		t.Fatalf("past send_at: got %d %s", r.Status, r.Raw)
	}
	e.clock.Advance(time.Minute)
	e.sms.ReleaseDue()
	e.eventually("three jobs", func() bool { return len(phone.Jobs()) == 3 })
	for i, j := range phone.Jobs() {
		if j.ID != ans.QueueIDs[i] {
			t.Fatalf("job %d: got %s, want %s", i, j.ID, ans.QueueIDs[i])
		}
	}
}
