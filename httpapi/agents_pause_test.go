package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestAgentPauseHoldsQueuedJobs: pausing a number or handle holds the jobs
// already queued for it. Sent while the agent was offline, they do not
// reach it when it connects; one the pause outlasts expires at its TTL; set
// active again, the rest arrive in order, still one per gap.
func TestAgentPauseHoldsQueuedJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	first := e.runAgent(reg, "agent-a", []string{waNumber}, []string{imHandle}, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	first.halt()
	e.eventually("the number shows offline", func() bool { return e.numbers(a.apiKey, "whatsapp")[0]["online"] == false })

	old := e.waSend(a.apiKey, wa, "+15557654321", "outlasted")
	e.want(old, http.StatusAccepted, "")
	e.clock.Advance(12 * time.Hour)
	var ids []string
	for i := range 3 {
		r := e.waSend(a.apiKey, wa, "+15557654321", fmt.Sprint("m", i))
		e.want(r, http.StatusAccepted, "")
		ids = append(ids, r.str("id"))
	}
	imSend := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "bob@example.com", "content": "hi"}})
	e.want(imSend, http.StatusAccepted, "")
	for _, path := range []string{"/whatsapp/numbers/" + wa, "/imessage/handles/" + im} {
		r := e.do(call{method: "PATCH", path: path, token: a.apiKey, body: map[string]any{"status": "paused"}})
		e.want(r, http.StatusOK, "")
	}

	ag := e.runAgent(reg, "agent-a", []string{waNumber}, []string{imHandle}, true)
	// The hello pumps the link; settle pumps it again and waits until all
	// it wrote has arrived. Then a while more on the real clock, in case.
	ag.settle()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if jobs, _ := ag.Jobs(); len(jobs) != 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if jobs, _ := ag.Jobs(); len(jobs) != 0 {
		t.Fatalf("the paused number's agent got %d jobs (%+v), want none: they are held", len(jobs), jobs)
	}

	// The pause outlasts the first send's TTL (24 h): it expires, held.
	e.clock.Advance(13 * time.Hour)
	e.sms.Expire()
	if r := e.do(call{method: "GET", path: "/whatsapp/messages/" + old.str("id"), token: a.apiKey}); r.str("status") != "expired" || r.str("error") == "" {
		t.Fatalf("the held send past its TTL: %s, want expired", r.Raw)
	}
	for _, id := range ids {
		if r := e.do(call{method: "GET", path: "/whatsapp/messages/" + id, token: a.apiKey}); r.str("status") != "queued" {
			t.Fatalf("a held send within its TTL: %s, want queued", r.Raw)
		}
	}

	// Resuming kicks the link: the first job goes at once, the next ones
	// one per gap (2-5 s on the test clock), in the order they were sent.
	e.want(e.do(call{method: "PATCH", path: "/whatsapp/numbers/" + wa, token: a.apiKey, body: map[string]any{"status": "active"}}), http.StatusOK, "")
	e.eventually("the first held job arrives", func() bool { jobs, _ := ag.Jobs(); return len(jobs) >= 1 })
	ag.settle()
	if jobs, _ := ag.Jobs(); len(jobs) != 1 || jobs[0].ID != ids[0] {
		t.Fatalf("right after the resume: %+v, want only %s: the rest wait for the gap", jobs, ids[0])
	}
	// No job is due within 2 s of the one before: after each, the clock
	// moves to 100 ms short of that at once (a job there arrived too soon,
	// which fails below), then 100 ms at a time.
	jumped := 0
	for i := 0; i < 200; i++ {
		jobs, _ := ag.Jobs()
		if len(jobs) == len(ids) {
			break
		}
		if len(jobs) > jumped {
			jumped = len(jobs)
			e.clock.Advance(1900 * time.Millisecond)
		} else {
			e.clock.Advance(100 * time.Millisecond)
		}
		ag.settle()
	}
	jobs, at := ag.Jobs()
	if len(jobs) != len(ids) {
		t.Fatalf("after the resume: %d jobs, want %d", len(jobs), len(ids))
	}
	for i, j := range jobs {
		if j.ID != ids[i] {
			t.Fatalf("job %d is %s (%q), want %s: out of order", i, j.ID, j.Message, ids[i])
		}
		if i > 0 && at[i].Sub(at[i-1]) < 2*time.Second {
			t.Fatalf("jobs %d and %d arrived %v apart, want at least the 2 s gap", i-1, i, at[i].Sub(at[i-1]))
		}
	}
	// The handle, still paused, held its job throughout; resumed, it goes.
	e.want(e.do(call{method: "PATCH", path: "/imessage/handles/" + im, token: a.apiKey, body: map[string]any{"status": "active"}}), http.StatusOK, "")
	e.eventually("the handle's held job arrives", func() bool { jobs, _ := ag.Jobs(); return len(jobs) == len(ids)+1 })
	if jobs, _ := ag.Jobs(); jobs[len(ids)].ID != imSend.str("id") {
		t.Fatalf("the handle's job: %+v, want %s", jobs[len(ids)], imSend.str("id"))
	}
	e.eventually("every resumed send is delivered", func() bool {
		for _, id := range ids {
			if e.do(call{method: "GET", path: "/whatsapp/messages/" + id, token: a.apiKey}).str("status") != "delivered" {
				return false
			}
		}
		return true
	})
}
