package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestChargesLockLast: the day's storage use (storage_usage) is the last
// row every write locks, so a write that charges it never holds it while
// it waits for a row that a write charging after that row holds. Each
// case lines two writes of one company up behind a row a third
// transaction holds, the one that took the charge early first in line
// for it: taken where each write reached it, the charge was locked before
// the row by one and after it by the other, in the same shard (the test
// fixes the shard, as one write in shards does at random), and the
// database broke the deadlock after a second. (The feed's trim now passes
// over lines another transaction holds, so in the first two cases the
// writes may not wait for the held line at all; both are held to no
// deadlock and their outcome either way.)
//   - a received message (its charge, then its activity line) and a
//     batch of reports whose status event is charged after its line;
//   - a received STOP (its charge, then the sender's opt-out) and the
//     API's opt-out of the same number (the entry, then its charge);
//   - an upload (its charge, then its device's row) and a send to the
//     device (the device's row, then its charge);
//   - a bulk send (its charge, then its plan's usage) and a single send
//     to another device (the plan's usage, then its charge).
func TestChargesLockLast(t *testing.T) {
	t.Parallel()
	// setup opens a store whose writes all add to shard 0, with a company
	// whose status events go to a webhook and whose feed is full, and the
	// devices named.
	setup := func(t *testing.T, fps ...string) (*Store, *deadlocks, uint64, map[string]store.Device) {
		dl := &deadlocks{}
		s := openStore(t, Options{Tracer: dl})
		s.pickShard = func() int16 { return 0 }
		s.SetStatusEvents(store.StatusEvents{Build: eventPerEntry(nil)})
		c, _ := conformance.Company(t, s)
		statusWebhook(t, s, c.ID, time.Now())
		devs := map[string]store.Device{}
		for _, fp := range fps {
			devs[fp] = conformance.Device(t, s, c.ID, fp)
		}
		if _, err := s.pool.Exec(context.Background(), `INSERT INTO activity (company_id, rec) SELECT $1, '{}'::jsonb FROM generate_series(1, $2)`,
			int64(c.ID), store.ActivityKeep+10); err != nil {
			t.Fatal(err)
		}
		return s, dl, c.ID, devs
	}
	send := func(t *testing.T, s *Store, companyID uint64, fp, uuid string) store.Message {
		t.Helper()
		m := store.Message{UUID: uuid, CompanyID: companyID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	noDeadlock := func(t *testing.T, dl *deadlocks) {
		t.Helper()
		if n := dl.n.Load(); n != 0 {
			t.Errorf("the database broke %d deadlocks, in %q", n, dl.sql)
		}
	}
	const oldestLine = "SELECT 1 FROM activity WHERE company_id = $1 ORDER BY seq LIMIT 1 FOR UPDATE"

	t.Run("received message and reports", func(t *testing.T) {
		t.Parallel()
		s, dl, c, devs := setup(t, "out", "in")
		job := send(t, s, c, "out", "job")
		if _, _, err := s.Transition(c, job.DeviceID, job.UUID, store.MsgSending, "", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		r := newReport(c, job.DeviceID, job.UUID, store.MsgSent, "", "", "", time.Now())
		var inErr error
		raceBehindOrPast(t, s, oldestLine, c,
			func() { s.applyReports([]*report{r}) },
			func() {
				_, _, inErr = s.StoreInbound(&store.Message{CompanyID: c, DeviceID: devs["in"].ID, ClientID: "in-1", UUID: "in-1",
					Channel: "sms", Phone: "+15550100001", Text: "hello", Segments: 1}, time.Now)
			})
		if m, moved, err := r.Wait(); err != nil || !moved || m.Status != store.MsgSent {
			t.Errorf("the report moved the job to %s (moved %v, %v), want sent", m.Status, moved, err)
		}
		if inErr != nil {
			t.Errorf("the received message: %v", inErr)
		}
		noDeadlock(t, dl)
	})

	t.Run("received STOP and the API's opt-out", func(t *testing.T) {
		t.Parallel()
		s, dl, c, devs := setup(t, "in")
		const who = "+15550100002"
		hold, err := s.pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer hold.Rollback(context.Background()) //nolint:errcheck // released below
		if _, err := hold.Exec(context.Background(), oldestLine, int64(c)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var inErr, apiErr error
		var stopDone atomic.Bool
		wg.Go(func() {
			defer stopDone.Store(true)
			_, _, inErr = s.StoreInbound(&store.Message{CompanyID: c, DeviceID: devs["in"].ID, ClientID: "stop-1", UUID: "stop-1",
				Channel: "sms", Phone: who, Text: "STOP", Segments: 1}, time.Now)
		})
		// The STOP waits for the feed's oldest line, or (its trim passing
		// over a line another transaction holds) is stored meanwhile.
		waitLocksOrEnd(t, s, 1, stopDone.Load)
		waiting := 1
		if stopDone.Load() {
			waiting = 0
		}
		var apiDone atomic.Bool
		wg.Go(func() {
			defer apiDone.Store(true)
			_, _, apiErr = s.AddOptOut(c, who, time.Now())
		})
		// The API's opt-out waits for the STOP's charge, or (charged
		// last) is made meanwhile.
		waitLocksOrEnd(t, s, waiting+1, apiDone.Load)
		if err := hold.Rollback(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if inErr != nil || apiErr != nil {
			t.Errorf("the STOP: %v; the API's opt-out: %v", inErr, apiErr)
		}
		if listed, err := s.OptedOut(c, who); err != nil || !listed {
			t.Errorf("the number is listed %v (%v), want listed", listed, err)
		}
		noDeadlock(t, dl)
	})

	t.Run("upload and a send to its device", func(t *testing.T) {
		t.Parallel()
		s, dl, c, devs := setup(t, "phone")
		var sendErr, putErr error
		raceBehindLock(t, s, lockDevice, devs["phone"].ID,
			func() {
				m := store.Message{UUID: "job", CompanyID: c, Device: "phone", SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
				_, _, sendErr = s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
			},
			func() {
				_, _, putErr = s.PutMedia(store.Media{ID: "media-1", CompanyID: c, DeviceID: devs["phone"].ID, Key: "k-1", ContentType: "image/png", Size: 4},
					bytes.NewReader([]byte("data")), time.Now())
			})
		if sendErr != nil || putErr != nil {
			t.Errorf("the send: %v; the upload: %v", sendErr, putErr)
		}
		noDeadlock(t, dl)
	})

	t.Run("bulk send and a single send", func(t *testing.T) {
		t.Parallel()
		s, dl, c, _ := setup(t, "one", "other")
		send(t, s, c, "one", "first") // makes the period's shard 0 of the plan's usage
		var oneErr, bulkErr error
		raceBehindLock(t, s, "SELECT 1 FROM plan_usage WHERE company_id = $1 AND shard = 0 FOR UPDATE", c,
			func() {
				m := store.Message{UUID: "single", CompanyID: c, Device: "one", SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi", Segments: 1}
				_, _, oneErr = s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
			},
			func() {
				var ms []store.Message
				for i := range 3 {
					ms = append(ms, store.Message{UUID: fmt.Sprint("bulk-", i), CompanyID: c, Device: "other", SIMSlot: "SIM1", Channel: "sms",
						Phone: "+15550100000", Text: "hi", Segments: 1})
				}
				_, _, bulkErr = s.EnqueueBulk(ms, store.IdempotencyKey{}, time.Now, nil, func([]store.Message) (int, []byte) { return 202, nil })
			})
		if oneErr != nil || bulkErr != nil {
			t.Errorf("the single send: %v; the bulk send: %v", oneErr, bulkErr)
		}
		noDeadlock(t, dl)
	})
}

// TestChargesCountInTheirTransaction: a transaction's charges are written
// at its end (txn.chargeStorage), and a later charge of the same
// transaction that may be refused counts them against the budget all the
// same: two charges that together pass the day's budget are refused, and
// nothing is written.
func TestChargesCountInTheirTransaction(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{CompanyDailyStorage: 1000})
	c, _ := conformance.Company(t, s)
	now := time.Now()
	err := s.write("two charges", func(tx *txn) error {
		if err := s.charge(tx, c.ID, now, 600); err != nil {
			return err
		}
		return s.charge(tx, c.ID, now, 600)
	})
	var be *store.BudgetError
	if !errors.As(err, &be) || be.Used != 600 {
		t.Errorf("two charges of 600 bytes against a budget of 1000: %v, want a budget error with 600 used", err)
	}
	if used, err := s.StorageUsed(c.ID, now); err != nil || used != 0 {
		t.Errorf("the day's use is %d (%v), want nothing written", used, err)
	}
}
