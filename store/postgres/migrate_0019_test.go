package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Migration 0019 (login_windows) on a database of 0018 with windows open:
// the failed logins' and the reset mails' move to login_windows with their
// counts and ends, the API's stay in rate_windows.
func TestMigration0019MovesTheLoginWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, ms, conn := migrationDB(t)
	if len(ms) < 19 || ms[18].version != 19 || ms[18].name != "login_windows" {
		t.Fatalf("migration 0019 is not where this test reads it: %d migrations", len(ms))
	}
	if v, err := migrate(ctx, conn, ms[:18], false); err != nil || v != 18 {
		t.Fatalf("migrate to 0018: %d, %v", v, err)
	}
	for _, sql := range []string{
		`INSERT INTO rate_windows (scope, key, window_end, count) VALUES
			('general', 'company:1', now() + interval '1 minute', 7),
			('auth', 'ip:a', now() + interval '1 minute', 3),
			('login', 'a', now() + interval '10 minutes', 11),
			('login-client', 'b', now() + interval '10 minutes', 4),
			('login-device', 'c', now() + interval '10 minutes', 6),
			('reset-mail', '42', now() + interval '30 minutes', 5)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if v, err := migrate(ctx, conn, ms[:19], false); err != nil || v != 19 {
		t.Fatalf("migrate 0018 to 0019: %d, %v", v, err)
	}
	rowsOf := func(table string) []string {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT scope || ' ' || key || ' ' || count || ' ' || (window_end > now()) FROM "+table+" ORDER BY scope")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := rowsOf("login_windows"), []string{"login a 11 true", "login-client b 4 true", "login-device c 6 true", "reset-mail 42 5 true"}; !slices.Equal(got, want) {
		t.Errorf("login_windows after 0019: %q, want %q", got, want)
	}
	if got, want := rowsOf("rate_windows"), []string{"auth ip:a 3 true", "general company:1 7 true"}; !slices.Equal(got, want) {
		t.Errorf("rate_windows after 0019: %q, want %q", got, want)
	}
}
