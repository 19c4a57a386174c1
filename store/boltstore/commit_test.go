package boltstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestGroupCommitIsolatesAFailingWrite runs many concurrent grouped writes,
// some of which fail after writing: every good one is stored, no bad one
// leaves a trace, and each caller gets its own outcome.
func TestGroupCommitIsolatesAFailingWrite(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.grouped(func(tx *bolt.Tx) error {
				if err := tx.Bucket(bucketMeta).Put(fmt.Appendf(nil, "k%03d", i), []byte("v")); err != nil {
					return err
				}
				if i%7 == 0 {
					return boom // after its write: the write must not survive
				}
				return nil
			})
		})
	}
	wg.Wait()
	err := s.db.View(func(tx *bolt.Tx) error {
		for i, e := range errs {
			stored := tx.Bucket(bucketMeta).Get(fmt.Appendf(nil, "k%03d", i)) != nil
			switch {
			case i%7 == 0 && !errors.Is(e, boom):
				t.Errorf("write %d: got %v, want boom", i, e)
			case i%7 == 0 && stored:
				t.Errorf("write %d failed but is stored", i)
			case i%7 != 0 && (e != nil || !stored):
				t.Errorf("write %d: got %v, stored %v; want stored", i, e, stored)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestGroupedAfterCloseIsRefused(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.grouped(func(*bolt.Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

// TestSubmittedWritesRunInOrder queues writes one after another without
// waiting, some failing on the way (which reruns their batch), and wants
// each to run after the one queued before it, whatever the batches were:
// what lets a phone's link queue its reports and apply them in order.
func TestSubmittedWritesRunInOrder(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	boom := errors.New("boom")
	var order []int // the committer goroutine's only
	reqs := make([]*commitReq, 300)
	for i := range reqs {
		reqs[i] = s.commit.submit(func(tx *bolt.Tx) error {
			if i%50 == 49 {
				return boom
			}
			// A batch that failed runs again: a write appears once, where it last ran.
			if n := len(order); n > 0 && order[n-1] >= i {
				for n > 0 && order[n-1] >= i {
					n--
				}
				order = order[:n]
			}
			order = append(order, i)
			return nil
		})
	}
	for i, r := range reqs {
		if err := r.wait(); (err != nil) != (i%50 == 49) {
			t.Fatalf("write %d: got %v", i, err)
		}
	}
	if len(order) != 294 {
		t.Fatalf("got %d writes, want 294", len(order))
	}
	for k := 1; k < len(order); k++ {
		if order[k] <= order[k-1] {
			t.Fatalf("write %d ran after %d, want the order they were queued in", order[k], order[k-1])
		}
	}
}

// Records that are only ever added at the end of their bucket (messages by
// id, UUIDv7s, expiries) fill their pages to appendFill, not to the half
// that bbolt's default split leaves.
func TestAppendedRecordsFillTheirPages(t *testing.T) {
	t.Parallel()
	s, d, _, t0 := foldFixture(t, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			for i := range 64 {
				m := Message{UUID: fmt.Sprintf("0190%04x-%04x-7000-8000-000000000000", g, i), CompanyID: d.CompanyID, Device: d.Fingerprint, Channel: "sms",
					Phone: "+15551234567", Text: "Your code is 123456", SIMSlot: "SIM1", Segments: 1, ExpiresAt: t0.Add(time.Hour)}
				if _, _, err := s.Enqueue(&m, IdempotencyKey{}, func() time.Time { return t0 }, nil, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		st := tx.Bucket(bucketMessages).Stats()
		if st.KeyN != 32*64 || st.LeafPageN < 10 {
			t.Fatalf("%d messages on %d leaf pages", st.KeyN, st.LeafPageN)
		}
		fill := float64(st.LeafInuse) / float64(st.LeafAlloc)
		t.Logf("%d messages on %d leaf pages, %.0f%% full", st.KeyN, st.LeafPageN, 100*fill)
		if fill < 0.8 {
			t.Errorf("the messages' leaf pages are %.0f%% full (%d of %d bytes on %d pages), want at least 80%%", 100*fill, st.LeafInuse, st.LeafAlloc, st.LeafPageN)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A phone's hello, last-seen time and presence are device writes, and a
// restart or a network blip brings thousands at once: they share commits
// (updateDeviceTx goes through the committer) rather than paying an fsync
// each behind the sends.
func TestDeviceWritesShareCommits(t *testing.T) {
	t.Parallel()
	s, d, _, t0 := foldFixture(t, 0)
	txID := func() int {
		var id int
		if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	const n = 64
	release := holdCommits(t, s)
	before := txID()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.UpdateDeviceByID(d.CompanyID, d.ID, func(dev *Device) error {
				if at := t0.Add(time.Duration(i) * time.Second); at.After(dev.LastSeenAt) {
					dev.LastSeenAt = at
				}
				return nil
			})
		})
	}
	// All of them wait in the committer's queue while it is held; a device
	// write with a transaction of its own would wait on bbolt's lock instead.
	deadline := time.Now().Add(10 * time.Second)
	for len(s.commit.reqs) < n {
		if time.Now().After(deadline) {
			release()
			wg.Wait()
			t.Fatalf("%d of %d device writes queued for a shared commit", len(s.commit.reqs), n)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := txID() - before; got > 2 {
		t.Errorf("%d device writes took %d commits after the held one, want 1", n, got-1)
	}
	got, err := s.Device(d.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add((n - 1) * time.Second); !got.LastSeenAt.Equal(want) {
		t.Errorf("last seen %v, want the latest, %v", got.LastSeenAt, want)
	}
}

// A device write or a report that is refused (the device is gone, fn says
// no as for a health report too soon, a report of a job the phone does not
// have) writes nothing: it answers its caller without rolling back the
// batch it shares, so the other writes run once.
func TestRefusalKeepsTheBatch(t *testing.T) {
	t.Parallel()
	s, d, msgs, t0 := foldFixture(t, 1)
	no := errors.New("too soon")
	update := func(id uint64, fn func(*Device) error) func() error {
		return func() error { _, err := s.UpdateDeviceByID(d.CompanyID, id, fn); return err }
	}
	report := func(deviceID uint64, uuid string) func() error {
		return func() error {
			_, _, err := s.TransitionLater(d.CompanyID, deviceID, uuid, MsgSending, "", "", "", t0).Wait()
			return err
		}
	}
	for _, c := range []struct {
		name string
		call func() error
		want error
	}{
		{"fn refuses", update(d.ID, func(*Device) error { return no }), no},
		{"device gone", update(d.ID+100, func(*Device) error { return nil }), ErrNotFound},
		{"no such job", report(d.ID, "no-such-uuid"), ErrNotFound},
		{"another phone's job", report(d.ID+100, msgs[0].UUID), ErrNotFound},
		{"send refused by its check", func() error {
			m := Message{UUID: "refused-send", CompanyID: d.CompanyID, Device: d.Fingerprint, Channel: "sms", Phone: "+15551234567", Text: "hi", SIMSlot: "SIM1"}
			_, _, err := s.Enqueue(&m, IdempotencyKey{}, func() time.Time { return t0 }, func(Device, string) error { return no }, nil)
			return err
		}, no},
		{"failover with nothing to move", func() error {
			moved, _, err := s.Failover(FailoverInput{CompanyID: d.CompanyID, DeviceID: d.ID, Reason: "device_offline", Pools: map[uint64]bool{1: true}, Limit: 100}, nil, t0)
			if err == nil && len(moved) != 0 {
				return fmt.Errorf("moved %d jobs of no pool", len(moved))
			}
			return err
		}, nil},
	} {
		release := holdCommits(t, s)
		runs := 0 // the committer goroutine's only
		other := s.commit.submit(func(tx *bolt.Tx) error {
			runs++
			return tx.Bucket(bucketMeta).Put([]byte("other-write"), []byte(c.name))
		})
		done := make(chan error, 1)
		go func() { done <- c.call() }()
		deadline := time.Now().Add(10 * time.Second)
		for len(s.commit.reqs) < 2 { // both in the batch that follows the held one
			if time.Now().After(deadline) {
				release()
				t.Fatalf("%s: the call never queued beside the other write", c.name)
			}
			time.Sleep(time.Millisecond)
		}
		release()
		if err := other.wait(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if runs != 1 {
			t.Errorf("%s: the write sharing its batch ran %d times, want once", c.name, runs)
		}
	}
}

// TestRefusalUnwraps: errors.Is and errors.As see the refused error through
// a refusal, and the committer still takes it for a refusal.
func TestRefusalUnwraps(t *testing.T) {
	t.Parallel()
	pme := &PoolMemberError{Index: 1, Err: ErrNotFound}
	for _, cause := range []error{ErrNotFound, fmt.Errorf("pool 7: %w", ErrNotFound), pme} {
		err := refuse(cause)
		if !errors.Is(err, cause) {
			t.Errorf("errors.Is(refuse(%v), %v) is false", cause, cause)
		}
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("errors.Is(refuse(%v), ErrNotFound) is false", cause)
		}
		if refusedBy(err) != cause {
			t.Errorf("refusedBy(refuse(%v)) = %v, want the cause", cause, refusedBy(err))
		}
	}
	var got *PoolMemberError
	if !errors.As(refuse(pme), &got) || got != pme {
		t.Errorf("errors.As(refuse(%v)) = %v", pme, got)
	}
	if errors.Is(refuse(errors.New("other")), ErrNotFound) {
		t.Error("errors.Is(refuse(other), ErrNotFound) is true")
	}
}
