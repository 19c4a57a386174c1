package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestTwoNodesRemoveACompanyInBoundedSteps: two nodes that finish the same
// closing company at once (each server's sweep finds it) take turns at its
// steps, each of at most the limit's messages. Run side by side, a step
// whose DELETE waited for the other node's rows found them gone, deleted
// none, took the company for empty and removed what was left (thousands of
// messages) in one transaction.
func TestTwoNodesRemoveACompanyInBoundedSteps(t *testing.T) {
	t.Parallel()
	const many, limit = 4000, 50
	url := migrated(t)
	nodes := []*Store{openURL(t, url, Options{}), openURL(t, url, Options{})}
	s := nodes[0]
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "fp-two-nodes")
	for i := 0; i < many; i += 500 {
		bulk := make([]store.Message, 500)
		for j := range bulk {
			bulk[j] = store.Message{UUID: fmt.Sprintf("two-nodes-%d-%d", i, j), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms",
				Phone: fmt.Sprintf("+1555%07d", j), Text: "one of many", SIMSlot: "SIM1", Segments: 1}
		}
		if _, _, err := s.EnqueueBulk(bulk, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.MarkCompanyClosing(c.ID, conformance.T0, func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		total   int64
		largest int64
		done    int
	)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			for range 2 * many / limit {
				r, err := n.RemoveCompanyStep(c.ID, limit)
				if errors.Is(err, store.ErrNotFound) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += r.Messages
				largest = max(largest, r.Messages)
				if r.Done {
					done++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != many || done != 1 {
		t.Errorf("the two nodes removed %d messages, the company %d times; want %d and once", total, done, many)
	}
	if largest > limit {
		t.Errorf("a step removed %d messages, more than the limit %d", largest, limit)
	}
	if _, err := s.Company(c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the company after both: %v, want ErrNotFound", err)
	}
}
