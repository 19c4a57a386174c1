package postgres

import (
	"context"
	"testing"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestTrimsLetOthersGoOn: a transaction that added a line to a company's
// activity feed (as every received message does) and to its deliveries
// log (as every webhook attempt does), each already at its bound, held
// open after dropping their oldest lines, and another adding to both
// meanwhile. The other commits without waiting: it leaves the lines the
// first is dropping to it. Before, both dropped the same oldest lines, and
// the second waited for the first's commit, so a company's received
// messages and attempts committed one at a time. Both bounds hold once
// both have committed.
func TestTrimsLetOthersGoOn(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s, other := openURL(t, url, Options{}), openURL(t, url, Options{}) // two nodes
	c, _ := conformance.Company(t, s)
	const keep = 10
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, "INSERT INTO activity (company_id, rec) SELECT $1, '{}' FROM generate_series(1, $2)", id(c.ID), store.ActivityKeep); err != nil {
		t.Fatal(err)
	}
	add := func(st *Store, hold func()) error {
		return st.write("add lines", func(tx *txn) error {
			if err := addActivity(tx, c.ID, store.Activity{Type: store.ActMessageReceived, At: conformance.T0, Description: "x"}); err != nil {
				return err
			}
			for range keep {
				a := store.WebhookAttempt{CompanyID: c.ID, WebhookID: 1, CreatedAt: conformance.T0}
				if err := appendAttempt(tx, &a, keep); err != nil {
					return err
				}
			}
			hold()
			return nil
		})
	}
	if err := add(s, func() {}); err != nil { // the log at its bound
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- add(s, func() { close(reached); <-release }) }()
	<-reached
	go func() { second <- add(other, func() {}) }()
	waitLocksOrEnd(t, s, 1, func() bool { return len(second) > 0 })
	if len(second) == 0 {
		close(release)
		t.Fatal("the second writer waits for the lines the first drops")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if err := add(s, func() {}); err != nil { // drops what the two left
		t.Fatal(err)
	}
	var lines, attempts int
	if err := s.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM activity WHERE company_id = $1), (SELECT count(*) FROM webhook_attempts WHERE company_id = $1)",
		id(c.ID)).Scan(&lines, &attempts); err != nil {
		t.Fatal(err)
	}
	if lines != store.ActivityKeep || attempts != keep {
		t.Fatalf("%d activity lines and %d attempts kept, want %d and %d", lines, attempts, store.ActivityKeep, keep)
	}
}
