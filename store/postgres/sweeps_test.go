package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/window"
)

// TestSweepStatements: a sweep's statements and round trips do not grow
// with what it moves: a release of 100 due messages (some opted out since,
// some held by a closed window, the rest queued, over 5 devices) costs
// what one of 10 does, and so does an expiry of 100, each failure and
// expiry a status event to the company's two webhooks.
func TestSweepStatements(t *testing.T) {
	t.Parallel()
	s, stmts := openCounted(t, Options{})
	var events atomic.Int64
	s.SetStatusEvents(store.StatusEvents{
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d", m.ID), Body: []byte(`{"type":"sms.` + m.Status + `"}`)}
			var out []store.WebhookDelivery
			for _, e := range set.Entries {
				out = append(out, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d-%d", m.ID, e.ID), EventType: "sms." + m.Status,
					WebhookID: e.ID, CreatedAt: m.UpdatedAt, NextAttemptAt: m.UpdatedAt})
			}
			return ev, out, nil
		},
		Committed: func(store.Message, store.OutboxAdd) { events.Add(1) },
	})
	c, _ := conformance.Company(t, s)
	if _, err := s.UpdateWebhookSet(c.ID, conformance.T0, func(w *store.WebhookSet) error {
		w.Secret = "whsec_test"
		w.Entries = []store.WebhookEntry{{URL: "https://hooks.example.com/a", Active: true}, {URL: "https://hooks.example.com/b", Active: true}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fps := devicesOf(t, s, c.ID, 5)
	closed := &window.Window{Days: []string{"mon"}, From: "09:00", To: "10:00", TimeZone: "UTC"} // T0 is a Thursday
	cost := func(sweep func() (int, error), want int) [2]int64 {
		t.Helper()
		n0, t0 := stmts.n.Load(), stmts.trips.Load()
		got, err := sweep()
		if err != nil || got != want {
			t.Fatalf("the sweep moved %d (%v), want %d", got, err, want)
		}
		return [2]int64{stmts.n.Load() - n0, stmts.trips.Load() - t0}
	}
	var releases, expiries [][2]int64
	due := conformance.T0
	for _, n := range []int{10, 100} {
		due = due.Add(time.Hour)
		ms := seedDue(t, s, c.ID, fps, n, due, func(i int, m *store.Message) {
			m.Phone = fmt.Sprintf("+1556%03d%04d", n, i) // numbers of their own: some opt out below
			if i%5 == 1 {
				m.Window = closed
			}
		})
		for i, m := range ms {
			if i%3 == 0 && m.Window == nil {
				if _, _, err := s.AddOptOut(c.ID, m.Phone, due); err != nil {
					t.Fatal(err)
				}
			}
		}
		releases = append(releases, cost(func() (int, error) {
			got, err := s.ReleaseDue(due, n)
			kinds := map[string]int{}
			for _, m := range got {
				kinds[m.Status+" "+m.Error+fmt.Sprint(m.Held())]++
			}
			if len(kinds) != 3 {
				t.Errorf("release of %d: %v, want some failed, some held, some queued", n, kinds)
			}
			return len(got), err
		}, n))
		end := due.Add(time.Minute)
		seedDue(t, s, c.ID, fps, n, end, func(i int, m *store.Message) {
			m.Phone, m.SendAt, m.ExpiresAt = fmt.Sprintf("+1557%03d%04d", n, i), time.Time{}, end
		})
		expiries = append(expiries, cost(func() (int, error) {
			got, err := s.ExpireQueued(end.Add(time.Second), n)
			return len(got), err
		}, n))
	}
	if n := events.Load(); n < 110 {
		t.Errorf("%d status events committed, want the expiries' 110 and the releases' failures", n)
	}
	var deliveries int64
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM webhook_deliveries WHERE company_id = $1", int64(c.ID)).Scan(&deliveries); err != nil {
		t.Fatal(err)
	} else if deliveries != 2*events.Load() {
		t.Errorf("%d deliveries queued for %d events to two webhooks", deliveries, events.Load())
	}
	t.Logf("release of 10, 100: %v (statements, round trips); expiry: %v", releases, expiries)
	// BEGIN goes with the first statement, the rows' SELECT (txn.go).
	if most := [2]int64{19, 6}; releases[0][0] > most[0] || releases[0][1] > most[1] {
		t.Errorf("a release took %v statements and round trips, want at most %v", releases[0], most)
	}
	if most := [2]int64{16, 5}; expiries[0][0] > most[0] || expiries[0][1] > most[1] {
		t.Errorf("an expiry took %v statements and round trips, want at most %v", expiries[0], most)
	}
	if releases[1] != releases[0] {
		t.Errorf("a release of 100 took %v statements and round trips, one of 10 %v: want the same", releases[1], releases[0])
	}
	if expiries[1] != expiries[0] {
		t.Errorf("an expiry of 100 took %v statements and round trips, one of 10 %v: want the same", expiries[1], expiries[0])
	}
}

// TestSweepsLockDevicesInOrder: two nodes release at once, each its own
// due messages (SKIP LOCKED) of the same two devices, due in opposite
// orders: the first's earliest is of device B, the second's of device A.
// A held lock on B makes the first wait there while the second runs on.
// Locking in due order, the first would take B and wait for A, which the
// second took before it waits for B, and the database would break the
// deadlock; locked in id order, both take A first and the database breaks
// none.
func TestSweepsLockDevicesInOrder(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	url := migrated(t)
	s, other := openURL(t, url, Options{Tracer: dl}), openURL(t, url, Options{Tracer: dl}) // two nodes
	c, _ := conformance.Company(t, s)
	fps := devicesOf(t, s, c.ID, 2)
	at := func(d, min int) store.Message {
		t.Helper()
		m := store.Message{UUID: fmt.Sprintf("lock-%d-%d", d, min), CompanyID: c.ID, Device: fps[d], SIMSlot: "SIM1", Channel: "sms",
			Phone: "+15550100000", Text: "hi", SendAt: conformance.T0.Add(time.Duration(min) * time.Minute)}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := []store.Message{at(1, 1), at(0, 2)}  // B then A
	second := []store.Message{at(0, 3), at(1, 4)} // A then B
	devA, devB := first[1].DeviceID, first[0].DeviceID
	if devA >= devB {
		t.Fatalf("device ids %d, %d: want A's below B's", devA, devB)
	}
	now := conformance.T0.Add(time.Hour)
	var got [2][]store.Message
	var errs [2]error
	raceBehindLock(t, s, lockDevice, devB,
		func() { got[0], errs[0] = s.ReleaseDue(now, 2) },
		func() { got[1], errs[1] = other.ReleaseDue(now, 2) })
	for i, want := range [][]store.Message{first, second} {
		if errs[i] != nil || len(got[i]) != 2 || got[i][0].ID != want[0].ID || got[i][1].ID != want[1].ID {
			t.Fatalf("sweep %d released %+v (%v), want its two", i, got[i], errs[i])
		}
		for _, m := range got[i] {
			if m.Status != store.MsgQueued || m.QueueSeq == 0 {
				t.Errorf("sweep %d: %s %s place %d, want queued with a place", i, m.UUID, m.Status, m.QueueSeq)
			}
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks between the sweeps, in %q", n, dl.sql)
	}
}

// raceBehindLock holds the row lockSQL locks (a SELECT ... FOR UPDATE of
// id) in a transaction of its own, starts each writer once those before it
// wait for a lock, and, once all of them wait, lets the row go and waits
// for them to finish: the writers meet in the order the test sets up, not
// the order the scheduler happens to pick.
func raceBehindLock(t *testing.T, s *Store, lockSQL string, id uint64, writers ...func()) {
	t.Helper()
	raceBehind(t, s, lockSQL, id, false, writers)
}

// raceBehindOrPast is raceBehindLock for writers that may not wait for
// the held row at all (a trim that passes over lines another transaction
// holds, SKIP LOCKED): each writer either waits behind it, the ones before
// it that wait first in line, or ends first; either way the writers then
// run together once the row is let go.
func raceBehindOrPast(t *testing.T, s *Store, lockSQL string, id uint64, writers ...func()) {
	t.Helper()
	raceBehind(t, s, lockSQL, id, true, writers)
}

// raceBehind is raceBehindLock, or with mayPass raceBehindOrPast.
func raceBehind(t *testing.T, s *Store, lockSQL string, id uint64, mayPass bool, writers []func()) {
	t.Helper()
	ctx := context.Background()
	hold, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // released below; this lets the writers go on a failure
	if _, err := hold.Exec(ctx, lockSQL, int64(id)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	waiting := 0
	for _, w := range writers {
		var ended atomic.Bool
		wg.Go(func() {
			defer ended.Store(true)
			w()
		})
		if !mayPass {
			waitLocks(t, s, waiting+1)
			waiting++
			continue
		}
		waitLocksOrEnd(t, s, waiting+1, ended.Load)
		if !ended.Load() {
			waiting++
		}
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// lockDevice is raceBehindLock's statement for a device's row.
const lockDevice = "SELECT 1 FROM devices WHERE id = $1 FOR UPDATE"

// waitLocks waits until n transactions of the store's database wait for a
// lock (30s at most).
func waitLocks(t *testing.T, s *Store, n int) {
	t.Helper()
	waitLocksOrEnd(t, s, n, nil)
}

// waitLocksOrEnd is waitLocks that also returns once ended (when not nil)
// says so: a writer that meets no lock ends instead of waiting.
func waitLocksOrEnd(t *testing.T, s *Store, n int, ended func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ended != nil && ended() {
			return
		}
		var got int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions wait for a lock after 30s, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
