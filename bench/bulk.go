package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// bulkSize is the messages of one bulk request: the most the route takes.
const bulkSize = 1000

// bulkSenders is how many bulk requests run at once: a few campaigns, not
// a flood (each request is one commit of 1,000 messages).
const bulkSenders = 4

// bulkThroughput sends requests bulk requests of bulkSize messages, each to
// one phone of the fleet in turn, and returns the messages stored per
// second (answered 2xx after their one fsync) and dispatched per second
// (taken and acked by the phones, from the first request until the last
// job arrived).
func bulkThroughput(ctx context.Context, api *apiClient, f *fleet, fps []string, requests int) (stored int64, storedPerSecond, dispatchedPerSecond float64, err error) {
	before := f.received.Load()
	var ok atomic.Int64
	var firstErr atomic.Value
	next := atomic.Int64{}
	var wg sync.WaitGroup
	start := time.Now()
	for range bulkSenders {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= requests || ctx.Err() != nil {
					return
				}
				msgs := make([]map[string]string, bulkSize)
				for j := range msgs {
					msgs[j] = map[string]string{"phone": fmt.Sprintf("+1555%07d", j), "message": "bulk"}
				}
				code, body, err := api.do("POST", "/chat/send-bulk", map[string]any{"device_fingerprint": fps[i%len(fps)], "messages": msgs})
				switch {
				case err != nil:
					firstErr.CompareAndSwap(nil, err)
				case code != http.StatusOK:
					firstErr.CompareAndSwap(nil, fmt.Errorf("bench: send-bulk answered %d: %s", code, body))
				default:
					ok.Add(bulkSize)
				}
			}
		})
	}
	wg.Wait()
	storedFor := time.Since(start)
	stored = ok.Load()
	if e, _ := firstErr.Load().(error); e != nil {
		return stored, 0, 0, e
	}
	deadline := time.Now().Add(120 * time.Second)
	for f.received.Load()-before < stored && time.Now().Before(deadline) && sleep(ctx, 10*time.Millisecond) {
	}
	dispatchedFor := time.Since(start)
	return stored, float64(stored) / storedFor.Seconds(), float64(f.received.Load()-before) / dispatchedFor.Seconds(), nil
}
