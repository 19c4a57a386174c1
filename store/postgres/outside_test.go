package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// fillDisk makes the database at url answer every write of the tables
// with disk_full (SQLSTATE 53100), raised by the server itself from a
// statement trigger, as a table that cannot grow its file raises it.
func fillDisk(t *testing.T, url string, tables ...string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `
CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'could not extend file "base/1/2": No space left on device' USING ERRCODE = 'disk_full';
END $$;`); err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		if _, err := conn.Exec(context.Background(), "CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE OR DELETE ON "+
			pgx.Identifier{table}.Sanitize()+" FOR EACH STATEMENT EXECUTE FUNCTION disk_full()"); err != nil {
			t.Fatal(err)
		}
	}
}

// wantDiskFull fails the test unless err is store.ErrDiskFull with the
// database's error still in its chain.
func wantDiskFull(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrDiskFull) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("%s on the database's full disk: %v, want store.ErrDiskFull", what, err)
	}
}

// The shared rate-limit windows run their statements outside a
// transaction, and classify their errors as a transaction does: a full
// disk is store.ErrDiskFull, a database out of reach store.ErrUnavailable,
// so that the API's log says which. They were the database's bare errors.
func TestWindowsErrorsClassified(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	relay := pgtest.Relay(t, url)
	s := openURL(t, relay.URL, Options{})
	w, err := s.Windows("general", pacing.Rate{Limit: 5, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fillDisk(t, url, "rate_windows")
	_, err = w.Take("company:1")
	wantDiskFull(t, "counting a request", err)
	wantDiskFull(t, "pruning the windows", w.Sweep())
	relay.Cut()
	if _, _, err := w.Spent("company:1"); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrDiskFull) {
		t.Errorf("reading a window with the database cut: %v, want store.ErrUnavailable", err)
	}
}

// The stream leases' statements outside a transaction (dropping a node's
// old leases, giving one back, renewing) classify their errors as a
// transaction does; taking one is a transaction already.
func TestStreamLeasesErrorsClassified(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s := openURL(t, url, Options{})
	c := streamCompany(t, s)
	l, err := s.StreamLeases("a")
	if err != nil {
		t.Fatal(err)
	}
	lease, over, err := l.Take(context.Background(), c.ID, 1, "s", 5, 5, 5)
	if err != nil || over != "" {
		t.Fatalf("Take: %d, %q, %v", lease, over, err)
	}
	fillDisk(t, url, "stream_leases")
	_, err = s.StreamLeases("a")
	wantDiskFull(t, "dropping a node's old leases", err)
	wantDiskFull(t, "giving a lease back", l.Give(context.Background(), lease))
	wantDiskFull(t, "renewing the leases", l.Renew())
	_, _, err = l.Take(context.Background(), c.ID, 1, "s", 5, 5, 5)
	wantDiskFull(t, "taking a lease", err)
}

// The import (admin copy-store) runs its own transaction, and classifies
// its errors as the store's transactions do: a full disk met by a record
// as it is put (a secret) or by a batch written after the source's last
// record (a company) is store.ErrDiskFull. The source's own error is not
// the database's and stays as it is.
func TestLoadErrorsClassified(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s := openURL(t, url, Options{})
	fillDisk(t, url, "companies", "secrets")
	err := s.Load(func(put func(store.CopyRecord) error) error {
		return put(store.CopyCompany{Company: store.Company{ID: 7, Name: "Acme", APIKeyHash: []byte("k"), CreatedAt: time.Now()}})
	})
	wantDiskFull(t, "loading a company", err)
	err = s.Load(func(put func(store.CopyRecord) error) error {
		return put(store.CopySecret{Name: "jwt", Value: []byte("secret")})
	})
	wantDiskFull(t, "loading a secret", err)
	// A source cut short fails with io.ErrUnexpectedEOF, which from the
	// database would be a connection lost: it stays the source's error.
	boom := fmt.Errorf("read the source: %w", io.ErrUnexpectedEOF)
	err = s.Load(func(put func(store.CopyRecord) error) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a source that failed: %v, want its own error alone", err)
	}
}

// A statement on a connection that pgx closed (its socket broke before)
// fails with pgconn.ErrConnClosed: the database out of reach, 503, as the
// broken socket's own error is. It was left as it was: a send answered
// 500 'internal' while PostgreSQL stopped.
func TestConnClosedIsUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, migrated(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PgConn().Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "SELECT 1")
	if err == nil {
		t.Fatal("a statement on a closed connection succeeded")
	}
	if got := classified(err); !errors.Is(got, store.ErrUnavailable) || !errors.Is(got, err) {
		t.Errorf("a statement on a closed connection: %v, want store.ErrUnavailable with the driver's error", got)
	}
}
