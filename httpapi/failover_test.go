package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// A pool's queued jobs move off a phone that stays offline past the
// pool's failover_after, with the move in their attempts; jobs the phone
// was handed (acked or not) never move, so nothing is sent twice.
func TestPoolFailoverMovesOnlyUndispatchedJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	regA := e.pairPhone(a.apiKey, "fo-a")
	regB := e.pairPhone(a.apiKey, "fo-b")
	bad := e.do(call{method: "POST", path: "/pools", token: a.apiKey, body: map[string]any{"name": "x", "failover_after": 30, "members": members("fo-a", "SIM1")}})
	e.want(bad, http.StatusBadRequest, "validation_failed")
	if bad.str("field") != "failover_after" {
		t.Fatalf("got field %q, want failover_after", bad.str("field"))
	}
	p := e.createPool(a.apiKey, map[string]any{"name": "fo", "members": members("fo-a", "SIM1", "fo-b", "SIM1")})
	if p.Body["failover_after"].(float64) != 600 {
		t.Fatalf("got %s, want the default failover_after of 600 s", p.Raw)
	}
	e.want(e.do(call{method: "PATCH", path: fmt.Sprintf("/pools/%v", p.Body["id"]), token: a.apiKey, body: map[string]any{"failover_after": 60}}), http.StatusOK, "")

	// fo-a's link takes two jobs and never acks them: their outcome is unknown.
	b := e.runPhone(regB, "BOTH", false)
	ws := dialRaw(t, e, regA.DeviceToken)
	var handed []string
	for i := range 4 {
		r := e.poolSend(a.apiKey, "fo", fmt.Sprintf("+1555110%04d", i), "first")
		if r.str("device_fingerprint") == "fo-a" {
			handed = append(handed, r.str("queueId"))
		}
	}
	for range handed {
		readUntil[*proto.Send](t, ws)
	}
	ws.CloseNow()
	e.eventually("fo-a goes offline", func() bool { return !linked(e.hub, "fo-a") })
	// Two more for fo-a while it is offline: never handed to a phone.
	var waiting []string
	waitingTo := map[string]string{}
	for i := range 4 {
		to := fmt.Sprintf("+1555120%04d", i)
		r := e.poolSend(a.apiKey, "fo", to, "second")
		if r.str("device_fingerprint") == "fo-a" {
			waiting = append(waiting, r.str("queueId"))
			waitingTo[r.str("queueId")] = to
		}
	}
	if len(handed) != 2 || len(waiting) != 2 {
		t.Fatalf("round robin gave fo-a %d and %d jobs, want 2 and 2", len(handed), len(waiting))
	}

	e.clock.Advance(59 * time.Second)
	if moved := e.sms.Failover(); len(moved) != 0 {
		t.Fatalf("59 s offline: %d jobs moved, want none before failover_after", len(moved))
	}
	e.clock.Advance(time.Second)
	if moved := e.sms.Failover(); len(moved) != 2 {
		t.Fatalf("60 s offline: %d jobs moved, want the 2 never handed to the phone", len(moved))
	}
	for _, id := range waiting {
		q := e.queueStatus(a.apiKey, id)
		at, _ := q.Body["attempts"].([]any)
		if q.str("device_fingerprint") != "fo-b" || q.str("error") != "" || len(at) != 1 {
			t.Fatalf("moved job: %s, want it on fo-b with one attempt", q.Raw)
		}
		if a0 := at[0].(map[string]any); a0["device_fingerprint"] != "fo-a" || a0["sim_slot"] != "SIM1" || a0["reason"] != "device_offline" || a0["moved_at"] == "" {
			t.Fatalf("attempt %v, want fo-a SIM1 device_offline", a0)
		}
	}
	// The moved jobs' conversations went with them.
	convs := func(fp string) map[string]bool {
		r := e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=" + fp, token: a.apiKey})
		e.want(r, http.StatusOK, "")
		out := map[string]bool{}
		for _, c := range r.Body["conversations"].([]any) {
			out[c.(map[string]any)["phone"].(string)] = true
		}
		return out
	}
	onA, onB := convs("fo-a"), convs("fo-b")
	for _, id := range waiting {
		to := waitingTo[id]
		if onA[to] || !onB[to] {
			t.Fatalf("the conversation with %s: on fo-a %v, on fo-b %v; want it on fo-b only", to, onA[to], onB[to])
		}
	}
	for _, id := range handed {
		if q := e.queueStatus(a.apiKey, id); q.str("device_fingerprint") != "fo-a" || q.Body["attempts"] != nil {
			t.Fatalf("a job handed to fo-a moved: %s", q.Raw)
		}
	}
	// fo-b's phone gets its own jobs and the moved ones, once each.
	e.eventually("fo-b gets 4 + 2 jobs", func() bool { return len(b.Jobs()) == 6 })
	seen := map[string]bool{}
	for _, j := range b.Jobs() {
		seen[j.ID] = true
	}
	for _, id := range append(waiting, handed...) {
		if want := !slices.Contains(handed, id); seen[id] != want {
			t.Fatalf("job %s on fo-b: %v, want %v", id, seen[id], want)
		}
	}
	if moved := e.sms.Failover(); len(moved) != 0 {
		t.Fatalf("a second sweep moved %d jobs, want none", len(moved))
	}
	// fo-a comes back: it is handed its two unknown jobs again, not the moved ones.
	back := e.runPhone(regA, "BOTH", false)
	e.eventually("fo-a gets its own jobs again", func() bool { return len(back.Jobs()) >= 2 })
	for _, j := range back.Jobs() {
		if !slices.Contains(handed, j.ID) {
			t.Fatalf("fo-a got %s, which moved to fo-b", j.ID)
		}
	}
}

// A SIM whose sends fail with carrier errors three times in a row is passed
// over by its pool, and its pool's queued jobs that no phone was handed
// move to other members; the one its phone holds stays.
func TestPoolFailoverOnCarrierErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	bad := e.runPhone(e.pairPhone(a.apiKey, "ce-a"), "BOTH", false)
	e.pairPhone(a.apiKey, "ce-b")
	e.createPool(a.apiKey, map[string]any{"name": "ce", "members": members("ce-a", "SIM1", "ce-b", "SIM1")})
	// Three sends that name ce-a reach its phone; then it is paced to one a
	// minute, so the pool's jobs for it wait in its queue.
	var direct []string
	for i := range 3 {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("ce-a", fmt.Sprintf("+1555130%04d", i), "direct", "")})
		e.want(r, http.StatusOK, "")
		direct = append(direct, r.str("queueId"))
	}
	e.eventually("ce-a gets the three", func() bool { return len(bad.Jobs()) == 3 })
	e.want(e.do(call{method: "PATCH", path: "/device/ce-a", token: a.apiKey, body: map[string]any{"sms_per_minute": 1}}), http.StatusOK, "")
	var onA []string
	for i := range 8 {
		r := e.poolSend(a.apiKey, "ce", fmt.Sprintf("+1555140%04d", i), "pooled")
		if r.str("device_fingerprint") == "ce-a" {
			onA = append(onA, r.str("queueId"))
		}
	}
	if moved := e.sms.Failover(); len(moved) != 0 {
		t.Fatalf("before any failure %d jobs moved", len(moved))
	}
	for _, id := range direct {
		bad.Report(id, proto.StatusFailed, "no_service")
	}
	e.eventually("the three fail", func() bool {
		for _, id := range direct {
			if e.queueStatus(a.apiKey, id).str("status") != "failed" {
				return false
			}
		}
		return true
	})
	moved := e.sms.Failover()
	held := map[string]bool{}
	for _, j := range bad.Jobs() {
		held[j.ID] = true
	}
	if len(moved) == 0 || len(moved) > len(onA) {
		t.Fatalf("%d of ce-a's %d pool jobs moved, want those its phone was not handed", len(moved), len(onA))
	}
	for _, id := range onA {
		q := e.queueStatus(a.apiKey, id)
		switch {
		case held[id] && q.str("device_fingerprint") != "ce-a":
			t.Fatalf("a job ce-a's phone holds moved: %s", q.Raw)
		case !held[id] && (q.str("device_fingerprint") != "ce-b" || q.Body["attempts"].([]any)[0].(map[string]any)["reason"] != "carrier_errors"):
			t.Fatalf("a job ce-a's phone was never handed: %s, want moved to ce-b for carrier_errors", q.Raw)
		}
	}
	// New sends go to ce-b; a send that names ce-a still goes there (the caller chose it).
	for i := range 4 {
		if fp := e.poolSend(a.apiKey, "ce", fmt.Sprintf("+1555150%04d", i), "y").str("device_fingerprint"); fp != "ce-b" {
			t.Fatalf("send %d went from %s after ce-a's SIM failed 3 times in a row", i, fp)
		}
	}
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("ce-a", "+15551234567", "direct", "")}), http.StatusOK, "")
	// After the cool-down the SIM is tried again.
	e.clock.Advance(15 * time.Minute)
	got := map[string]int{}
	for i := range 4 {
		got[e.poolSend(a.apiKey, "ce", fmt.Sprintf("+1555160%04d", i), "z").str("device_fingerprint")]++
	}
	if got["ce-a"] == 0 {
		t.Fatalf("after the cool-down: %v, want ce-a tried again", got)
	}
}
