package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// A device with more unfinished messages than a transaction of its
// deletion fails is deleted: its messages are failed a batch at a time,
// each batch holding its own messages only, so a writer of another of them
// goes on while a batch is open (the deletion locked them all in its first
// statement, and a queue of millions ran past the store's deadline).
// Another company's deletion of it touches nothing, and once deleted it is
// gone.
func TestDeviceDeletionFailsItsQueueInBatches(t *testing.T) {
	t.Parallel()
	tr := newPauseTracer("UPDATE messages SET status = $2, queue_place = NULL") // a message failed
	s := openStore(t, Options{Tracer: tr})
	s.deviceBatch = 3
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	other, _ := conformance.Company(t, s)
	fp := devicesOf(t, s, c.ID, 1)[0]
	const queued = 10
	var last store.Message
	for i := range queued {
		m := store.Message{UUID: fmt.Sprint("q-", i), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms",
			Phone: "+15550100000", Text: "hi"}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = got
	}
	failed := func() int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM messages WHERE device_id = $1 AND status = 'failed' AND rec->>'error' = 'device_deleted'",
			id(last.DeviceID)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.DeleteDevice(other.ID, fp, conformance.T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's deletion of the device: %v, want store.ErrNotFound", err)
	}
	if n := failed(); n != 0 {
		t.Fatalf("another company's deletion failed %d messages of the device", n)
	}

	type result struct {
		d   store.Device
		err error
	}
	deleted := make(chan result, 1)
	go func() {
		d, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute))
		deleted <- result{d, err}
	}()
	select {
	case <-tr.paused:
	case r := <-deleted:
		t.Fatalf("the deletion ended (%v) without failing a message", r.err)
	case <-time.After(time.Minute):
		t.Fatal("the deletion did not fail a message in a minute")
	}
	// The first batch holds the 3 oldest; the newest is free.
	_, err := s.pool.Exec(ctx, "SELECT id FROM messages WHERE id = $1 FOR UPDATE NOWAIT", id(last.ID))
	close(tr.resume)
	if err != nil {
		t.Errorf("the device's newest message while the deletion's first batch was open: %v", err)
	}
	r := <-deleted
	if r.err != nil || r.d.Fingerprint != fp {
		t.Fatalf("DeleteDevice: %+v (%v)", r.d, r.err)
	}
	if n := failed(); n != queued {
		t.Errorf("%d messages failed with device_deleted, want %d", n, queued)
	}
	if _, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted device deleted again: %v, want store.ErrNotFound", err)
	}
}
