package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// weekdays is 09:00 to 17:00 in New York, Monday to Friday. The test
// clock starts on Sunday 2026-11-22 at 10:00 UTC (05:00 in New York), so
// the window next opens on Monday at 09:00 EST, 14:00 UTC.
func weekdays() map[string]any {
	return map[string]any{"days": []string{"mon", "tue", "wed", "thu", "fri"}, "from": "09:00", "to": "17:00", "time_zone": "America/New_York"}
}

const mondayOpening = "2026-11-23T14:00:00.000Z"

// A send outside its window stays queued, is never handed to the phone,
// and reaches it when the window opens (by the test's clock); its time to
// live counts from the opening. A pool's window holds its sends the same way.
func TestSendingWindowHoldsJobsUntilItOpens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.pairPhone(a.apiKey, "idle-phone")

	body := sendBody("a-phone", "+15551234567", "office hours", "")
	body["window"] = weekdays()
	held := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: body}).str("queueId")
	pool := e.createPool(a.apiKey, map[string]any{"name": "office", "window": weekdays(), "members": members("a-phone", "SIM1")})
	if w, ok := pool.Body["window"].(map[string]any); !ok || w["time_zone"] != "America/New_York" {
		t.Fatalf("the pool's answer: got %s, want its window", pool.Raw)
	}
	viaPool := e.poolSend(a.apiKey, "office", "+15557654321", "through the pool").str("queueId")
	now := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "any time", "")}).str("queueId")

	e.eventually("the job without a window", func() bool { return len(phone.Jobs()) == 1 })
	for _, id := range []string{held, viaPool} {
		e.eventually("held until Monday", func() bool { return e.queueStatus(a.apiKey, id).str("held_until") == mondayOpening })
		if q := e.queueStatus(a.apiKey, id); q.str("status") != "queued" {
			t.Fatalf("held: got %s, want queued", q.Raw)
		}
	}
	if jobs := phone.Jobs(); len(jobs) != 1 || jobs[0].ID != now {
		t.Fatalf("got jobs %v, want only %s", jobs, now)
	}

	// 28 hours later, a millisecond before the opening: still held, and
	// not expired, though a day has passed since the send.
	e.clock.Advance(28*time.Hour - time.Millisecond)
	e.sms.Expire()
	e.sms.ReleaseDue()
	if q := e.queueStatus(a.apiKey, held); q.str("status") != "queued" || q.str("held_until") != mondayOpening {
		t.Fatalf("a millisecond early: got %s, want queued and held", q.Raw)
	}
	e.clock.Advance(time.Millisecond)
	e.sms.ReleaseDue()
	e.eventually("the held jobs reach the phone", func() bool { return len(phone.Jobs()) == 3 })
	got := map[string]bool{}
	for _, j := range phone.Jobs()[1:] {
		got[j.ID] = true
	}
	if !got[held] || !got[viaPool] {
		t.Fatalf("got jobs %v, want %s and %s", phone.Jobs(), held, viaPool)
	}
	e.eventually("sending", func() bool { return e.queueStatus(a.apiKey, held).str("status") == "sending" })
	if q := e.queueStatus(a.apiKey, held); q.str("held_until") != "" {
		t.Fatalf("taken: got %s, want no held_until", q.Raw)
	}
}

// expires_at and validity end a send that no phone took in time, held by
// its window or not: status expired with its event's error.
func TestSendExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "idle-phone")
	start := e.clock.Now()

	at := sendBody("idle-phone", "+15551234567", "by a minute", "")
	at["expires_at"] = start.Add(time.Minute).Format(time.RFC3339)
	byTime := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: at}).str("queueId")
	// Validity counts from the window's opening (Monday 14:00 UTC).
	v := sendBody("idle-phone", "+15551234567", "an hour of office", "")
	v["window"], v["validity"] = weekdays(), 3600
	byValidity := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: v}).str("queueId")

	e.clock.Advance(time.Minute)
	e.sms.Expire()
	if q := e.queueStatus(a.apiKey, byTime); q.str("status") != "queued" {
		t.Fatalf("at expires_at: got %s, want queued", q.Raw)
	}
	e.clock.Advance(time.Millisecond)
	e.sms.Expire()
	if q := e.queueStatus(a.apiKey, byTime); q.str("status") != "expired" || q.str("error") == "" {
		t.Fatalf("past expires_at: got %s, want expired with an error", q.Raw)
	}
	if q := e.queueStatus(a.apiKey, byValidity); q.str("status") != "queued" {
		t.Fatalf("before the window opened: got %s, want queued", q.Raw)
	}
	e.clock.Advance(28*time.Hour + time.Hour - time.Minute - time.Millisecond)
	e.sms.Expire()
	if q := e.queueStatus(a.apiKey, byValidity); q.str("status") != "queued" {
		t.Fatalf("at the opening + 1 h: got %s, want queued", q.Raw)
	}
	e.clock.Advance(time.Millisecond)
	e.sms.Expire()
	if q := e.queueStatus(a.apiKey, byValidity); q.str("status") != "expired" {
		t.Fatalf("past the opening + 1 h: got %s, want expired", q.Raw)
	}
}

// Bad windows and expiries answer 400 naming the field, on sends, bulk
// sends and pools.
func TestWindowAndExpiryValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	now := e.clock.Now()
	with := func(w map[string]any, k string, v any) map[string]any {
		out := map[string]any{}
		for k, v := range w {
			out[k] = v
		}
		out[k] = v
		return out
	}
	for _, c := range []struct {
		set   map[string]any
		field string
	}{
		{map[string]any{"window": with(weekdays(), "time_zone", "Mars/Olympus")}, "window.time_zone"},
		{map[string]any{"window": with(weekdays(), "time_zone", "")}, "window.time_zone"},
		{map[string]any{"window": with(weekdays(), "from", "9am")}, "window.from"},
		{map[string]any{"window": with(weekdays(), "to", "08:00")}, "window.to"},
		{map[string]any{"window": with(weekdays(), "days", []string{"mon", "funday"})}, "window.days[1]"},
		{map[string]any{"window": with(weekdays(), "from", 9)}, "window.from"},
		{map[string]any{"expires_at": "soon"}, "expires_at"},
		{map[string]any{"expires_at": now.Format(time.RFC3339)}, "expires_at"},
		{map[string]any{"expires_at": now.Add(31 * 24 * time.Hour).Format(time.RFC3339)}, "expires_at"},
		// Before the window's opening the message could never go out.
		{map[string]any{"window": weekdays(), "expires_at": now.Add(time.Hour).Format(time.RFC3339)}, "expires_at"},
		{map[string]any{"validity": 0}, "validity"},
		{map[string]any{"validity": 30*24*3600 + 1}, "validity"},
		{map[string]any{"validity": 60, "expires_at": now.Add(time.Hour).Format(time.RFC3339)}, "validity"},
	} {
		send := sendBody("a-phone", "+15551234567", "x", "")
		bulk := map[string]any{"device_fingerprint": "a-phone", "messages": []map[string]any{{"phone": "+15551234567", "message": "x"}}}
		for k, v := range c.set {
			send[k], bulk[k] = v, v
		}
		for path, body := range map[string]map[string]any{"/chat/send": send, "/chat/send-bulk": bulk} {
			r := e.do(call{method: "POST", path: path, token: a.apiKey, body: body})
			e.want(r, http.StatusBadRequest, "")
			if r.str("field") != c.field {
				t.Errorf("%s %v: got %s, want field %s", path, c.set, r.Raw, c.field)
			}
		}
	}
	p := e.createPool(a.apiKey, map[string]any{"name": "p", "members": members("a-phone", "SIM1")})
	id := strconv.Itoa(int(p.Body["id"].(float64)))
	for _, c := range []struct {
		window any
		field  string
	}{
		{with(weekdays(), "to", "25:00"), "window.to"},
		{with(weekdays(), "from", 9), "window.from"},
		{"office hours", "window"},
		// An item of the wrong type is named with its index, as on a send
		// (the pool's window is decoded apart, to tell absent from null).
		{with(weekdays(), "days", []any{"mon", 2}), "window.days[1]"},
		{with(weekdays(), "days", []any{"mon", "funday"}), "window.days[1]"},
	} {
		r := e.do(call{method: "PATCH", path: "/pools/" + id, token: a.apiKey, body: map[string]any{"window": c.window}})
		e.want(r, http.StatusBadRequest, "")
		if r.str("field") != c.field {
			t.Errorf("pool window %v: got %s, want field %s", c.window, r.Raw, c.field)
		}
	}
	e.want(e.do(call{method: "PATCH", path: "/pools/" + id, token: a.apiKey, body: map[string]any{"window": weekdays()}}), http.StatusOK, "")
	r := e.do(call{method: "PATCH", path: "/pools/" + id, token: a.apiKey, body: map[string]any{"name": "q"}})
	if w, ok := r.Body["window"].(map[string]any); !ok || w["from"] != "09:00" {
		t.Fatalf("a change without window: got %s, want the window kept", r.Raw)
	}
	r = e.do(call{method: "PATCH", path: "/pools/" + id, token: a.apiKey, body: map[string]any{"window": nil}})
	if r.Body["window"] != nil {
		t.Fatalf("window null: got %s, want none", r.Raw)
	}
}

// A send outside its window shows held_until from its answer on, whether
// or not a phone's link has come to hold it yet: a phone that is offline
// (or has not read its queue yet) leaves the job in its queue, but the
// window decides when it may go, and the client reads that in its queue
// item. Once the window is open there is no held_until.
func TestHeldUntilShownForAnOfflinePhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "idle-phone")

	body := sendBody("idle-phone", "+15551234567", "office hours", "")
	body["window"] = weekdays()
	id := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: body}).str("queueId")
	if q := e.queueStatus(a.apiKey, id); q.str("status") != "queued" || q.str("held_until") != mondayOpening {
		t.Fatalf("offline phone: got %s, want queued and held_until %s", q.Raw, mondayOpening)
	}
	e.clock.Advance(28 * time.Hour)
	if q := e.queueStatus(a.apiKey, id); q.str("status") != "queued" || q.str("held_until") != "" {
		t.Fatalf("window open: got %s, want queued without held_until", q.Raw)
	}
}

// A window's hours on the day the clock is set back are its clock's: in
// Sydney, where 02:00 to 03:00 comes twice on 2027-04-04, a window to 02:30
// is closed at 02:45 before the change (the clock reads past its end) and
// opens again at the change, when the clock reads 02:00 once more. The send
// answered there says so (held_until); the window used to be open up to
// the second 02:30, an hour past its end.
func TestHeldUntilOnTheDayTheClockGoesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	e.clock.Advance(time.Date(2027, 4, 3, 15, 45, 0, 0, time.UTC).Sub(e.clock.Now())) // 02:45 AEDT
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "idle-phone")
	body := sendBody("idle-phone", "+61412345678", "small hours", "")
	body["window"] = map[string]any{"from": "00:00", "to": "02:30", "time_zone": "Australia/Sydney"}
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: body})
	e.want(r, http.StatusOK, "")
	if q := e.queueStatus(a.apiKey, r.str("queueId")); q.str("held_until") != "2027-04-03T16:00:00.000Z" {
		t.Fatalf("02:45 before the change: got %s, want held_until the change, 02:00 AEST (16:00 UTC)", q.Raw)
	}
}
