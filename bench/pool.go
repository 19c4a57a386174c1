package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// poolMembers is the size of the pools of the pool phase: a hundred
// phones, SIM1 each.
const poolMembers = 100

// poolRecipients is how many recipients the pool phase writes to, so a
// sticky pool finds most of them on a member already.
const poolRecipients = 5000

// poolThroughput defines a pool of the fleet's first poolMembers phones
// with strategy and sends through it as fast as senders can for d (or until
// ctx ends); it
// returns the sends answered 2xx per second, and fails on any other answer.
func poolThroughput(ctx context.Context, api *apiClient, f *fleet, fps []string, strategy string, senders int, d time.Duration) (float64, error) {
	n := min(poolMembers, len(fps))
	members := make([]map[string]string, n)
	for i := range members {
		members[i] = map[string]string{"device_fingerprint": fps[i], "sim_slot": "SIM1"}
	}
	name := "bench-" + strategy
	code, body, err := api.do("POST", "/pools", map[string]any{"name": name, "strategy": strategy, "members": members})
	if err != nil {
		return 0, err
	}
	if code != http.StatusCreated {
		return 0, fmt.Errorf("bench: POST /pools answered %d: %s", code, body)
	}
	before := f.received.Load()
	var ok atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := range senders {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				to := fmt.Sprintf("+1555%07d", (w*7919+i)%poolRecipients)
				code, body, err := api.do("POST", "/chat/send", map[string]string{"pool": name, "phone": to, "message": "pool"})
				switch {
				case err != nil:
					firstErr.CompareAndSwap(nil, err)
				case code != http.StatusOK:
					firstErr.CompareAndSwap(nil, fmt.Errorf("bench: pool send answered %d: %s", code, body))
				default:
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if e, _ := firstErr.Load().(error); e != nil {
		return 0, e
	}
	deadline := time.Now().Add(60 * time.Second)
	for f.received.Load()-before < ok.Load() && time.Now().Before(deadline) && sleep(ctx, 10*time.Millisecond) {
	}
	return float64(ok.Load()) / elapsed.Seconds(), nil
}
