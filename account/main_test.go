package account_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store/boltstore"
)

// TestMain stops the PostgreSQL cluster the shared-count tests start.
func TestMain(m *testing.M) { pgtest.Main(m) }

// openStore opens a bbolt store in the test's directory, closed when the
// test ends.
func openStore(t *testing.T) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newService is the account service over st, with its mailer, at the
// tests' password cost and public URL (cfg's other fields as given), on
// the clock now, logging nowhere.
func newService(t *testing.T, st interface {
	account.Store
	mail.Outbox
}, cfg account.Config, now func() time.Time) *account.Service {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	mailer, err := mail.New(mail.Config{PublicURL: "http://localhost"}, st, log, now)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PublicURL, cfg.PasswordTime, cfg.PasswordMemory = "http://localhost", 1, 64
	svc, err := account.New(cfg, st, mailer, log, now)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
