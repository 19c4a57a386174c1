package main

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/poll"
)

// TestCrashBetweenAckAndStatus kills the server with SIGKILL after the
// phone acked jobs and before any of their reports reached it (the phone
// holds them back until the server is dead), restarts it on the same data,
// and wants every job to reach the phone once (a job whose ack died with
// the server is sent again and deduped by the phone's journal), to end
// delivered, and its sent and delivered to be recorded once each: one
// webhook event of each, and the analytics counting each message once.
func TestCrashBetweenAckAndStatus(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	const n, killAt = 60, 24
	r := startStatusRun(t, bin, st, apiKey, "ack-phone", n)
	srv, addr, flags, sink, reg, ids := r.srv, r.addr, r.flags, r.sink, r.reg, r.ids

	// The phone acks each job (the client does, after journaling it) and,
	// until the kill, reports nothing: the killAt-th new job kills the
	// server right after its ack went out, while acks are on their way.
	var mu sync.Mutex
	jobs := map[string]int{} // new jobs by id: the SMS the phone sends
	var held []string        // jobs taken before the kill, reports not yet made
	killed := false
	var phone *client.Phone
	phone = client.New(client.Config{WSURL: "ws://" + addr + "/device/ws", Token: reg.DeviceToken, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) {
			mu.Lock()
			defer mu.Unlock()
			jobs[s.ID]++
			if !killed {
				held = append(held, s.ID)
				if len(held) == killAt {
					killed = true
					_ = srv.cmd.Process.Signal(syscall.SIGKILL)
				}
				return
			}
			phone.Report(s.ID, proto.StatusSent, "")
			phone.Report(s.ID, proto.StatusDelivered, "")
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- phone.Run(ctx) }()
	poll.Within(t, 30*time.Second, "the phone takes jobs until the server is killed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return killed
	})
	_ = srv.cmd.Wait()
	cancel()
	<-done // the phone is offline while the server comes back

	srv = startServer(t, bin, st, flags...)
	mu.Lock()
	taken := append([]string(nil), held...)
	mu.Unlock()
	lostAcks := 0
	for _, id := range taken {
		st, body := call(t, "GET", srv.url+"/chat/queue/"+id, apiKey, nil)
		switch {
		case st == 200 && body["status"] == "queued":
			lostAcks++ // acked, but the ack died with the server
		case st == 200 && body["status"] == "sending":
		default:
			t.Fatalf("job %s acked before the kill: %d %v, want queued or sending", id, st, body)
		}
	}
	// Now the phone sends what it held back, and reports new jobs at once.
	for _, id := range taken {
		phone.Report(id, proto.StatusSent, "")
		phone.Report(id, proto.StatusDelivered, "")
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- phone.Run(ctx) }()
	defer func() { cancel(); <-done }()
	poll.Within(t, 60*time.Second, "every job delivered, its reports stored and its two events received", func() bool {
		return len(sink.events()) == 2*n && phone.Pending() == 0
	})

	mu.Lock()
	for _, id := range ids {
		if jobs[id] != 1 {
			t.Errorf("job %s reached the phone as a new job %d times, want 1", id, jobs[id])
		}
	}
	mu.Unlock()
	evs := sink.events()
	for _, id := range ids {
		if st, body := call(t, "GET", srv.url+"/chat/queue/"+id, apiKey, nil); st != 200 || body["status"] != "delivered" {
			t.Fatalf("message %s: %d %v, want delivered", id, st, body)
		}
		for _, typ := range []string{"message.sent", "message.delivered"} {
			if got := evs[typ+":"+id]; got != 1 {
				t.Errorf("%s of %s: got %d distinct deliveries, want 1", typ, id, got)
			}
		}
	}
	if st, body := call(t, "GET", srv.url+"/analytics", apiKey, nil); st != 200 {
		t.Fatalf("analytics: %d %v", st, body)
	} else if tot, _ := body["totals"].(map[string]any); tot["sent"] != float64(n) || tot["delivered"] != float64(n) || tot["failed"] != float64(0) {
		t.Fatalf("analytics totals: %v, want %d sent, %d delivered, none failed", body["totals"], n, n)
	}
	// How many writes folded depends on how the reports fell into commits;
	// that the server counts them is what is checked here. Only the
	// embedded store's group commit folds writes, and only it has the metric.
	code, body := get(t, srv.url+"/metrics", "")
	if folded := strings.Contains(string(body), "\nsimrelay_store_folded_writes_total "); code != 200 || folded != (st.databaseURL == "") {
		t.Fatalf("GET /metrics: got %d, simrelay_store_folded_writes_total present: %v; want it on the embedded store only", code, folded)
	}
	t.Logf("%d jobs acked before the SIGKILL, %d of the acks lost with it (those jobs sent again and deduped)", len(taken), lostAcks)
}
