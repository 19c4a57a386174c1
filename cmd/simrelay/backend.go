package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/cliflag"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
	"github.com/simrelay/simrelay/web"
	"github.com/simrelay/simrelay/webhook"
)

// backend is the server's store, whichever backend keeps it.
type backend = store.Backend

// Every domain's store interface is a part of the backend, and both
// backends are one.
var (
	_ account.Store     = backend(nil)
	_ billing.Store     = backend(nil)
	_ channel.Store     = backend(nil)
	_ device.Store      = backend(nil)
	_ mail.Outbox       = backend(nil)
	_ media.Store       = backend(nil)
	_ sms.Store         = backend(nil)
	_ webhook.Store     = backend(nil)
	_ httpapi.Backuper  = backend(nil)
	_ httpapi.Analytics = backend(nil)
	_ web.Analytics     = backend(nil)

	_ backend = (*boltstore.Store)(nil)
	_ backend = (*postgres.Store)(nil)
)

// storeConfig says where a command's store is and how it opens.
type storeConfig struct {
	// dataDir holds the embedded store when databaseURL is empty.
	dataDir string
	// databaseURL is --database-url: the store in that PostgreSQL database.
	databaseURL *cliflag.DatabaseURL
	// companyDailyStorage is each company's budget of bytes per UTC day; 0: none.
	companyDailyStorage int64
	// existing refuses a data dir without a store file, or a database
	// without simrelay's schema, instead of starting a store there (the
	// admin commands but create-company).
	existing bool
	// readOnly opens the embedded store with a shared lock (admin mail).
	readOnly bool
	// syncDelay is boltstore.Options.SyncDelay (measurement only).
	syncDelay time.Duration
	// logger hears what the embedded store says at its start; nil: nothing.
	logger *slog.Logger
}

// postgres says whether the store is in PostgreSQL.
func (c storeConfig) postgres() bool { return c.databaseURL != nil && c.databaseURL.URL() != "" }

// where names the store for logs and messages: the data dir's file, or the
// database's URL with its password masked.
func (c storeConfig) where() string {
	if c.postgres() {
		return c.databaseURL.String()
	}
	return filepath.Join(c.dataDir, boltstore.FileName)
}

// kind names the backend for logs.
func (c storeConfig) kind() string {
	if c.postgres() {
		return "postgres"
	}
	return "bbolt"
}

// openBackend opens the store of c: PostgreSQL when a database URL is
// given (its schema created or migrated at once; with c.existing, a
// database without it is refused, as a data dir without a store file is),
// else the embedded store in the data dir.
func openBackend(ctx context.Context, c storeConfig) (backend, error) {
	if c.postgres() {
		pg, err := postgres.Open(ctx, c.databaseURL.URL(), postgres.Options{CompanyDailyStorage: c.companyDailyStorage, Existing: c.existing})
		if errors.Is(err, postgres.ErrNoSchema) {
			return nil, fmt.Errorf("%s %s: %w; nothing was written to it: give the server's database; simrelay serve and admin create-company create the schema in a new one", both("database-url"), c.databaseURL, err)
		}
		if err != nil {
			return nil, fmt.Errorf("the database %s: %w", c.databaseURL, err)
		}
		return pg, nil
	}
	opt := boltstore.Options{ReadOnly: c.readOnly, CompanyDailyStorage: c.companyDailyStorage, Logger: c.logger, SyncDelay: c.syncDelay}
	if c.existing {
		st, err := openStore(c.dataDir, opt)
		if err != nil {
			return nil, err
		}
		if !c.readOnly {
			return st, nil
		}
		// A read-only open migrates nothing: a file of another schema is
		// refused, as a writing open refuses a newer one and migrates an
		// older one before it reads it.
		if err := st.Current(); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("store %s: %w", c.where(), err)
		}
		return st, nil
	}
	// A stop (ctx) during a migration of the store stops it between two steps.
	st, err := boltstore.OpenContext(ctx, c.dataDir, opt)
	if err != nil {
		return nil, dataDirErr(c.dataDir, err)
	}
	return st, nil
}

// backendClock is the clock an admin command stamps and times its writes
// with: on PostgreSQL the database server's, read once as a node reads it
// (cluster.Clock), so that a command run from a machine whose clock is off
// agrees with the nodes, which time their work by the database (a plan's
// billing period, a deletion's events); on the embedded store the
// machine's own, which the server beside it reads. A failed reading keeps
// the machine's clock.
func backendClock(b backend) func() time.Time {
	db, ok := b.(interface{ DatabaseTime() (time.Time, error) })
	if !ok {
		return time.Now
	}
	c := cluster.NewClock(time.Now, nil)
	_ = c.Measure(db.DatabaseTime)
	return c.Now
}

// dataDirErr names the flag (and its environment twin) whose directory
// the embedded store could not be opened in, so that an operator knows
// what to change: a path that is a file, a directory not writable, a
// store in use by another process, one of a newer release.
func dataDirErr(dir string, err error) error {
	return fmt.Errorf("%s %q: %w", both("data-dir"), dir, err)
}

// openStore opens the embedded store in dir for an admin command that works
// on an existing one, refusing a dir without one (storeFileExists).
func openStore(dir string, opt boltstore.Options) (*boltstore.Store, error) {
	if err := storeFileExists(dir); err != nil {
		return nil, err
	}
	st, err := boltstore.Open(dir, opt)
	if err != nil {
		return nil, dataDirErr(dir, err)
	}
	return st, nil
}

// storeFileExists refuses a data dir without a store, so a mistyped
// --data-dir is said as such and nothing is created there, where
// boltstore.Open would start a new, empty store.
func storeFileExists(dir string) error {
	path := filepath.Join(dir, boltstore.FileName)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %q: no store there (no %s): give the server's data dir; simrelay serve and admin create-company start a new store", both("data-dir"), dir, boltstore.FileName)
	case err == nil && fi.Size() == 0:
		return fmt.Errorf("%s %q: no store there yet (%s is empty, as a first start that failed leaves it); simrelay serve and admin create-company write a new store into it", both("data-dir"), dir, boltstore.FileName)
	}
	return nil
}
