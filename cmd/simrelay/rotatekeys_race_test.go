package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store/postgres"
)

// On PostgreSQL, admin create-company runs beside the servers and so
// beside an admin rotate-keys: a rotation that ran after create-company
// read the seal key and before it stored the company left that company's
// API key sealed under a key that was gone (GET /account/api-key failed
// until the company rotated its key). create-company now holds the
// rotation's lock from its read of the keys to its commit, so the rotation
// waits for it and then re-seals the new company's key with the others.
// The company's insert is held here (a lock on its table) where the race
// would have its window. On the embedded store the two cannot overlap: the
// one that opens the store second is refused (its file lock).
func TestRotateKeysWaitsForCreateCompany(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	accounts := func(pg *postgres.Store) *account.Service {
		t.Helper()
		mailer, err := mail.New(mail.Config{}, pg, quiet, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		a, err := account.New(account.Config{}, pg, mailer, quiet, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// The schema and the server's keys, as a server's first start leaves
	// them, and no company yet.
	pg, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	accounts(pg)
	pg.Close()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lock, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck // rolled back below
	if _, err := lock.Exec(ctx, "LOCK TABLE companies IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}

	type result struct {
		code        int
		out, errOut string
	}
	created := make(chan result, 1)
	go func() {
		code, out, errOut := runAdmin(t, "create-company", "--database-url", url, "--company", "Acme", "--email", "ana@acme.example", "--password", "Secret123")
		created <- result{code, out, errOut}
	}()
	poll.Within(t, 30*time.Second, "create-company, its keys read, waits to store the company", func() bool {
		var waiting int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE relation = 'companies'::regclass AND NOT granted").Scan(&waiting)
		return err == nil && waiting > 0
	})
	rotated := make(chan result, 1)
	go func() {
		code, out, errOut := runAdmin(t, "rotate-keys", "--database-url", url)
		rotated <- result{code, out, errOut}
	}()
	var early *result
	poll.Within(t, 30*time.Second, "rotate-keys ends or waits for create-company", func() bool {
		select {
		case r := <-rotated:
			early = &r
			return true
		default:
		}
		var waiting bool
		err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)").Scan(&waiting)
		return err == nil && waiting
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-created
	if c.code != 0 {
		t.Fatalf("create-company: exit %d: %s", c.code, c.errOut)
	}
	var made struct {
		CompanyID uint64 `json:"companyId"`
		APIKey    string `json:"apiKey"`
	}
	if err := json.Unmarshal([]byte(c.out), &made); err != nil || made.APIKey == "" {
		t.Fatalf("create-company printed %q (%v)", c.out, err)
	}
	if early != nil {
		t.Errorf("rotate-keys ended while create-company held the old seal key (exit %d)", early.code)
	}
	r := early
	if r == nil {
		got := <-rotated
		r = &got
	}
	if r.code != 0 {
		t.Fatalf("rotate-keys: exit %d: %s", r.code, r.errOut)
	}
	if !strings.Contains(r.out, "Re-sealed 1 company's API key") {
		t.Errorf("rotate-keys re-sealed no company's key:\n%s", r.out)
	}

	pg, err = postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	key, _, err := accounts(pg).APIKey(ctx, account.Principal{CompanyID: made.CompanyID})
	if err != nil || key != made.APIKey {
		t.Fatalf("the company's API key after the rotation: %q (%v), want %q as create-company printed it", key, err, made.APIKey)
	}
}
