package sms_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// expiredCount counts the messages the watcher is told expired.
type expiredCount struct{ n atomic.Int64 }

func (e *expiredCount) MessageChanged(m store.Message) {
	if m.Status == store.MsgExpired {
		e.n.Add(1)
	}
}

// A stop ends the expiry sweep between its commits: a backlog of
// messages past their time to live (a server back after a day away) was
// expired to its end, a thousand a commit, before Run returned, and the
// server's shutdown waited for it.
func TestRunStopsBetweenExpiryBatches(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	activeDevice(t, st, c.ID)
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	for b := range 3 {
		items := make([]sms.BulkItem, sms.MaxBulk)
		for i := range items {
			items[i] = sms.BulkItem{Phone: fmt.Sprintf("+1555%07d", b*sms.MaxBulk+i), Message: "hi"}
		}
		if _, _, err := svc.SendBulk(context.Background(), sms.BulkInput{CompanyID: c.ID, Device: "pixel-1", SIMSlot: "SIM1", Messages: items}, nil); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(sms.DefaultMessageTTL + time.Hour)
	expired := &expiredCount{}
	svc.SetWatcher(expired)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the server stops as the sweep begins
	svc.Run(ctx)
	if n := expired.n.Load(); n >= 3*sms.MaxBulk {
		t.Fatalf("Run, stopped, expired all %d messages before it returned; want it to stop between commits", n)
	}
	svc.Expire() // the next start's sweep takes the rest
	if n := expired.n.Load(); n != 3*sms.MaxBulk {
		t.Fatalf("%d expired in all, want %d", n, 3*sms.MaxBulk)
	}
}

// cancelOnQueued ends a context once the watcher is told of a message
// queued, counting those.
type cancelOnQueued struct {
	cancel context.CancelFunc
	n      atomic.Int64
}

func (c *cancelOnQueued) MessageChanged(m store.Message) {
	if m.Status == store.MsgQueued {
		c.n.Add(1)
		c.cancel()
	}
}

// A stop ends the release of scheduled messages between its commits, as it
// ends the expiry sweep: a backlog of due messages (a server back after a
// night away) was released to its end before the scheduler returned.
func TestSchedulerStopsBetweenReleaseBatches(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	activeDevice(t, st, c.ID)
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	sendAt := clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for b := range 3 {
		items := make([]sms.BulkItem, sms.MaxBulk)
		for i := range items {
			items[i] = sms.BulkItem{Phone: fmt.Sprintf("+1555%07d", b*sms.MaxBulk+i), Message: "hi"}
		}
		if _, _, err := svc.SendBulk(context.Background(), sms.BulkInput{CompanyID: c.ID, Device: "pixel-1", SIMSlot: "SIM1", SendAt: sendAt, Messages: items}, nil); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOnQueued{cancel: cancel}
	svc.SetWatcher(w)
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
	if n := w.n.Load(); n == 0 || n >= 3*sms.MaxBulk {
		t.Fatalf("%d released before Run returned; want the first commit's only", n)
	}
}
