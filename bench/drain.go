package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

// drainFingerprint is the phone of the drain phase: provisioned with the
// fleet but never connected with it, so its backlog waits for it alone.
const drainFingerprint = "drain-00000"

// drain is one phone back from an outage: jobs messages wait for it (queued
// through send-bulk while it is offline); it then connects, acks each job
// and reports it sent and delivered at once, as a phone with a backlog does.
// It returns the jobs per second from the connect until the server has
// answered every report with its status_ack (each one durable).
func drain(ctx context.Context, api *apiClient, token string, jobs int) (perSecond float64, err error) {
	for queued := 0; queued < jobs && ctx.Err() == nil; {
		n := min(bulkSize, jobs-queued)
		msgs := make([]map[string]string, n)
		for j := range msgs {
			msgs[j] = map[string]string{"phone": fmt.Sprintf("+1555%07d", queued+j), "message": "drain"}
		}
		code, body, err := api.do("POST", "/chat/send-bulk", map[string]any{"device_fingerprint": drainFingerprint, "messages": msgs})
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK {
			return 0, fmt.Errorf("bench: send-bulk answered %d: %s", code, body)
		}
		queued += n
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var received atomic.Int64
	var p *client.Phone
	p = client.New(client.Config{
		WSURL: "ws" + api.base[len("http"):] + "/device/ws", Token: token,
		BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second,
		Hello: proto.Hello{AppVersion: "bench", SelectedSIM: proto.BothSIMs, SIMs: []proto.SIM{{Slot: proto.SIM1}}},
		OnJob: func(s proto.Send) {
			received.Add(1)
			p.Report(s.ID, proto.StatusSent, "")
			p.Report(s.ID, proto.StatusDelivered, "")
		},
	})
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := start.Add(10 * time.Minute)
	for received.Load() < int64(jobs) || p.Pending() > 0 {
		select {
		case err := <-done:
			done <- err // for the deferred wait
			return 0, fmt.Errorf("bench: the drain phone stopped: %w", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bench: the drain phone took %d of %d jobs, %d reports unanswered, in 10 minutes", received.Load(), jobs, p.Pending())
		}
	}
	return float64(jobs) / time.Since(start).Seconds(), nil
}
