package httpapi_test

import (
	"net/http"
	"testing"
)

// A device's queue goes highest priority first, first-in first-out within
// a priority: jobs queued later with a priority reach the phone before the
// plain jobs queued earlier, and each exactly once. A bad priority is 400
// naming the field.
func TestPriorityOrdersTheDeviceQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "a-phone")

	for _, p := range []any{-1, 10, "high", 1.5} {
		body := sendBody("a-phone", "+15551234567", "x", "")
		body["priority"] = p
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: body})
		e.want(r, http.StatusBadRequest, "")
		if r.str("field") != "priority" {
			t.Errorf("priority %v: got %s, want field priority", p, r.Raw)
		}
	}

	send := func(text string, priority int) string {
		body := sendBody("a-phone", "+15551234567", text, "")
		if priority != 0 {
			body["priority"] = priority
		}
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: body})
		e.want(r, http.StatusOK, "")
		return r.str("queueId")
	}
	var want []string
	plain := []string{send("plain 1", 0), send("plain 2", 0)}
	five1 := send("five 1", 5)
	nine := send("nine", 9)
	five2 := send("five 2", 5)
	plain = append(plain, send("plain 3", 0))
	want = append(append(want, nine, five1, five2), plain...)
	if q := e.queueStatus(a.apiKey, nine); q.Body["priority"] != float64(9) {
		t.Fatalf("queue item: got %s, want priority 9", q.Raw)
	}

	phone := e.runPhone(reg, "BOTH", true)
	e.eventually("every job reaches the phone", func() bool { return len(phone.Jobs()) >= len(want) })
	for _, id := range want {
		e.eventually("delivered", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "delivered" })
	}
	jobs := phone.Jobs()
	if len(jobs) != len(want) {
		t.Fatalf("got %d jobs, want %d (each once)", len(jobs), len(want))
	}
	for i, j := range jobs {
		if j.ID != want[i] {
			t.Fatalf("job %d: got %s (%s), want %s", i, j.ID, j.Message, want[i])
		}
	}

	// With the link up, a priority job still goes before plain ones
	// queued before it that the phone was not handed yet; here the link
	// takes them as they come, so all arrive, each once, and the queue
	// ends empty.
	more := []string{send("plain 4", 0), send("urgent", 9), send("plain 5", 0)}
	e.eventually("the later jobs reach the phone", func() bool { return len(phone.Jobs()) == len(want)+len(more) })
	for _, id := range more {
		e.eventually("delivered", func() bool { return e.queueStatus(a.apiKey, id).str("status") == "delivered" })
	}
	if n := len(phone.Jobs()); n != len(want)+len(more) {
		t.Fatalf("got %d jobs, want %d: a job was sent twice", n, len(want)+len(more))
	}
}
