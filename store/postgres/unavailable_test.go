package postgres

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// A database that stops answering makes the store's calls fail with
// store.ErrUnavailable (the API's 503), not an unnamed error (a 500).
func TestDatabaseGoneIsUnavailable(t *testing.T) {
	t.Parallel()
	s, cut := relayedStore(t)
	c, _ := conformance.Company(t, s)
	cut()
	for i := 0; i < 2; i++ { // a broken pooled connection, then a refused new one
		if _, err := s.Company(c.ID); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("read %d with the database gone: got %v, want store.ErrUnavailable", i, err)
		}
	}
	if err := s.Ready(); err == nil {
		t.Error("ready with the database gone")
	}
}

// A connection that breaks under a transaction's first batch (its BEGIN
// and first statement) fails the transaction with store.ErrUnavailable,
// as a failed BEGIN did, even where the closure turns the statement's
// error into one of its own.
func TestFirstBatchBrokenIsUnavailable(t *testing.T) {
	t.Parallel()
	s, cut := relayedStore(t)
	var one int
	if err := s.read("warm", func(t *txn) error { return t.row("SELECT 1").Scan(&one) }); err != nil {
		t.Fatal(err)
	}
	cut()
	own := errors.New("no answer")
	err := s.read("swallowed", func(t *txn) error {
		if err := t.row("SELECT 1").Scan(&one); err != nil {
			return own
		}
		return nil
	})
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, own) {
		t.Fatalf("a read whose connection broke: %v, want store.ErrUnavailable and the closure's error", err)
	}
}

// relayedStore opens a store on a new database through a relay on a socket
// of its own, which stands for the network to the database: cut closes the
// relay and every connection through it, the database going away.
func relayedStore(t *testing.T) (s *Store, cut func()) {
	t.Helper()
	relay := pgtest.Relay(t, migrated(t))
	return openURL(t, relay.URL, Options{}), relay.Cut
}

// A database that goes silent (its host powered off behind a firewall, a
// partition: nothing refused, nothing answered) fails each call with
// store.ErrUnavailable once the store's transaction deadline passed: a
// read, a write, the statements made outside a transaction, on the
// connections that were open and on the new ones that are never answered.
// Without the deadline each call waited for the operating system's TCP
// timeout, many minutes (a Unix socket, as here: for ever).
func TestDatabaseSilentIsUnavailable(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	relay := pgtest.Relay(t, url)
	// The company is made beside the relay with the store's own deadline:
	// the half second of the store under test bounds a sign-up's
	// transactions too, which a loaded machine can take longer over.
	c, _ := conformance.Company(t, openURL(t, url, Options{}))
	s := openURL(t, relay.URL, Options{TxTimeout: 500 * time.Millisecond})
	// A connection through the relay is open and has served (tried again
	// while a loaded machine keeps one past the deadline).
	poll.Until(t, "a read through the relay before it stalls", func() bool {
		_, err := s.Company(c.ID)
		return err == nil
	})
	relay.Stall()
	calls := []struct {
		name string
		call func() error
	}{
		{"read", func() error { _, err := s.Company(c.ID); return err }},
		{"write", func() error {
			_, err := s.UpdateCompany(c.ID, func(c *store.Company) error { c.Name += "!"; return nil })
			return err
		}},
		{"read again", func() error { _, err := s.Company(c.ID); return err }},
		{"generation", func() error { _, err := s.Generation(); return err }},
		{"schema version", func() error { _, err := s.Version(); return err }},
		{"a file's chunks", func() error { _, err := s.CopyMedia(io.Discard, "m-1", 0, -1); return err }},
	}
	for _, call := range calls {
		if err := answered(t, call.name, call.call); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database silent: got %v, want store.ErrUnavailable", call.name, err)
		}
	}
	relay.Resume()
	poll.Until(t, "the store serving again once the database answers", func() bool {
		_, err := s.Company(c.ID)
		return err == nil
	})
}

// answered runs call and returns its error, failing the test if it is still
// waiting a minute later: a call that waits for the database's silence to end
// never returns.
func answered(t *testing.T, name string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waiting a minute after the database went silent", name)
		return nil
	}
}

// The reads made outside a transaction (the analytics' generation, the
// schema version, a file's chunks) fail with store.ErrUnavailable too when
// the database is gone, as a transaction's reads do: they were the
// database's bare errors, which the API answers 500 where every other
// call answers 503 (GET /analytics asks the generation first).
func TestReadsOutsideTransactionsUnavailable(t *testing.T) {
	t.Parallel()
	s, cut := relayedStore(t)
	if _, err := s.Generation(); err != nil {
		t.Fatal(err)
	}
	cut()
	for i := 0; i < 2; i++ { // a broken pooled connection, then a refused new one
		if _, err := s.Generation(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("generation %d with the database gone: got %v, want store.ErrUnavailable", i, err)
		}
	}
	if _, err := s.Version(); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("schema version with the database gone: got %v, want store.ErrUnavailable", err)
	}
	if _, err := s.CopyMedia(io.Discard, "m-1", 0, -1); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a file's chunks with the database gone: got %v, want store.ErrUnavailable", err)
	}
}

// A prune's batches are transactions like any other: a batch that waits
// on a lock past the store's deadline fails with ErrUnavailable (the next
// sweep prunes again), rather than holding on for minutes.
func TestPruneBatchKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s := openURL(t, url, Options{TxTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(ctx) })
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "LOCK TABLE idempotency IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	if err := answered(t, "the prune", func() error { _, err := s.PruneIdempotency(time.Now()); return err }); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a prune behind a table lock held past the deadline: got %v, want store.ErrUnavailable", err)
	}
}
