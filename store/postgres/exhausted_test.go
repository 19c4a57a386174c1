package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// The database's answers that it ran out of a resource (SQLSTATE class
// 53) fail a transaction as the store's errors the API answers 503 for: a
// full disk as store.ErrDiskFull, the others as store.ErrUnavailable; the
// database's own error stays in the chain, and none is run again.
func TestResourceErrorsClassified(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code             string
		diskFull, unavai bool
	}{
		{"53100", true, true},   // disk_full
		{"53000", false, true},  // insufficient_resources
		{"53200", false, true},  // out_of_memory
		{"53300", false, true},  // too_many_connections
		{"53400", false, false}, // configuration_limit_exceeded: a statement's own limit
		{"23505", false, false},
		{"XX000", false, false},
	} {
		pe := &pgconn.PgError{Severity: "ERROR", Code: c.code, Message: "the server's words"}
		err := failed("add opt-out", fmt.Errorf("insert: %w", pe))
		if got := errors.Is(err, store.ErrDiskFull); got != c.diskFull {
			t.Errorf("SQLSTATE %s: store.ErrDiskFull %v, want %v (%v)", c.code, got, c.diskFull, err)
		}
		if got := errors.Is(err, store.ErrUnavailable); got != c.unavai {
			t.Errorf("SQLSTATE %s: store.ErrUnavailable %v, want %v (%v)", c.code, got, c.unavai, err)
		}
		if back := (*pgconn.PgError)(nil); !errors.As(err, &back) || back != pe {
			t.Errorf("SQLSTATE %s: the database's error is not in the chain: %v", c.code, err)
		}
		if retryable(pe) {
			t.Errorf("SQLSTATE %s is run again", c.code)
		}
	}
}

// A write the database refuses with disk_full, raised by the server itself
// from a trigger on the table the write changes, fails as
// store.ErrDiskFull and is tried once, not run again.
func TestDiskFullFromDatabase(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s := openURL(t, url, Options{})
	c, _ := conformance.Company(t, s)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	// nextval is not rolled back with the transaction: it counts the tries.
	if _, err := conn.Exec(context.Background(), `
CREATE SEQUENCE full_tries;
CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM nextval('full_tries');
	RAISE EXCEPTION 'could not extend file "base/1/2": No space left on device' USING ERRCODE = 'disk_full';
END $$;
CREATE TRIGGER disk_full BEFORE UPDATE ON companies FOR EACH ROW EXECUTE FUNCTION disk_full();`); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateCompany(c.ID, func(c *store.Company) error { c.Name = "Renamed"; return nil })
	if !errors.Is(err, store.ErrDiskFull) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write on the database's full disk: %v, want store.ErrDiskFull", err)
	}
	var tries int64
	if err := conn.QueryRow(context.Background(), "SELECT last_value FROM full_tries").Scan(&tries); err != nil {
		t.Fatal(err)
	}
	if tries != 1 {
		t.Fatalf("the write was tried %d times on a full disk, want once", tries)
	}
	if got, err := s.Company(c.ID); err != nil || got.Name == "Renamed" {
		t.Fatalf("after the refused write: %+v, %v; want the company unchanged", got, err)
	}
}
