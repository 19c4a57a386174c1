package postgres

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/multitracer"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// pauseAt holds the first transaction that sends a statement containing
// sql, before it is sent, until free is called; reached is closed when it
// does. Its check is a store's tracer (sqlTracer).
type pauseAt struct {
	sql     string
	hit     atomic.Bool
	reached chan struct{}
	release chan struct{}
	freed   sync.Once
}

func newPauseAt(sql string) *pauseAt {
	return &pauseAt{sql: sql, reached: make(chan struct{}), release: make(chan struct{})}
}

func (p *pauseAt) check(sql string) {
	if strings.Contains(sql, p.sql) && p.hit.CompareAndSwap(false, true) {
		close(p.reached)
		<-p.release
	}
}

// free lets the held transaction go on.
func (p *pauseAt) free() { p.freed.Do(func() { close(p.release) }) }

// race runs first until p holds it, then second, and lets first go on
// once second waits for first's lock or, were first to hold none, ended
// (secondDone has its answer).
func (p *pauseAt) race(t *testing.T, s *Store, first, second func(), secondDone chan error) {
	t.Helper()
	go first()
	<-p.reached
	go second()
	waitLocksOrEnd(t, s, 1, func() bool { return len(secondDone) > 0 })
	p.free()
}

// TestEmailDeviceRacesItsDeletion: an UpdateCompany setting the e-mail
// device and a DeleteDevice of that device, on two nodes, each held at
// the point where the other could slip past it. Either order leaves no
// setting naming the deleted device: the deletion, held after its own
// writes, keeps the company's row locked, so the update waits and then
// finds the device gone; the update, held after reading the device live,
// keeps the row locked, so the deletion waits and then clears what the
// update wrote. The database breaks no deadlock between them.
func TestEmailDeviceRacesItsDeletion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		held      string // the statement before which the first is held
		deleteFst bool
		updateErr error // what the update answers
	}{
		{"deletion first", "INSERT INTO activity", true, store.ErrEmailDeviceGone},
		{"update first", "UPDATE companies SET api_key_hash", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := migrated(t)
			dl := &deadlocks{}
			s := openURL(t, url, Options{Tracer: dl})
			pause := newPauseAt(tc.held)
			held := openURL(t, url, Options{Tracer: multitracer.New(sqlTracer(pause.check), dl)}) // another node, held once
			// Freed at the end if the test has not (it failed): the store's
			// Close, which runs after, waits for the connection it holds.
			t.Cleanup(pause.free)
			c, _ := conformance.Company(t, s)
			conformance.Device(t, s, c.ID, "mail")
			updater, deleter := held, s
			if tc.deleteFst {
				updater, deleter = s, held
			}
			updated, deleted := make(chan error, 1), make(chan error, 1)
			update := func() {
				_, err := updater.UpdateCompany(c.ID, func(c *store.Company) error { c.EmailDevice = "mail"; return nil })
				updated <- err
			}
			remove := func() {
				_, err := deleter.DeleteDevice(c.ID, "mail", conformance.T0)
				deleted <- err
			}
			first, second, secondDone := update, remove, deleted
			if tc.deleteFst {
				first, second, secondDone = remove, update, updated
			}
			pause.race(t, s, first, second, secondDone)
			if err := <-deleted; err != nil {
				t.Fatalf("the deletion: %v", err)
			}
			if err := <-updated; !errors.Is(err, tc.updateErr) {
				t.Errorf("the update: %v, want %v", err, tc.updateErr)
			}
			got, err := s.Company(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.EmailDevice != "" {
				t.Errorf("e-mail device %q after its deletion, want none", got.EmailDevice)
			}
			if n := dl.n.Load(); n != 0 {
				t.Errorf("the database broke %d deadlocks between the update and the deletion, in %q", n, dl.sql)
			}
		})
	}
}
