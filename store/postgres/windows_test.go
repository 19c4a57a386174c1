package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/pacing"
)

// Two nodes (two stores, two pools) on one database count a key's requests
// in one window: the requests split between them are refused at the count
// one pacing.Windows refuses them at, with the same Remaining on the way.
func TestWindowsSharedByTwoNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := open(t, url), open(t, url)
	rate := pacing.Rate{Limit: 5, Window: time.Hour}
	wa, err := a.Windows("general", rate)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.Windows("general", rate)
	if err != nil {
		t.Fatal(err)
	}
	one := pacing.New(rate, nil)
	for i := range 8 {
		w := wa
		if i%2 == 1 {
			w = wb
		}
		got, err := w.Take("company:1")
		if err != nil {
			t.Fatal(err)
		}
		want := one.Take("company:1")
		if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.Limit != want.Limit {
			t.Errorf("request %d: got allowed %v remaining %d limit %d, want %v %d %d", i+1, got.Allowed, got.Remaining, got.Limit, want.Allowed, want.Remaining, want.Limit)
		}
		if got.Reset <= 0 || got.Reset > rate.Window {
			t.Errorf("request %d: reset %v, want within (0, %v]", i+1, got.Reset, rate.Window)
		}
	}
	// Another key, and the same key in another scope, have windows of their own.
	if got, _ := wb.Take("company:2"); !got.Allowed || got.Remaining != 4 {
		t.Errorf("another key: got %+v, want allowed with 4 left", got)
	}
	wauth, err := b.Windows("auth", rate)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := wauth.Take("company:1"); !got.Allowed {
		t.Errorf("the key in another scope was refused: %+v", got)
	}
	// Spent answers on either node, counting nothing.
	for _, w := range []*Windows{wa, wb} {
		spent, wait, err := w.Spent("company:1")
		if err != nil || !spent || wait <= 0 || wait > rate.Window {
			t.Errorf("spent: got %v %v %v, want true within the window", spent, wait, err)
		}
		if spent, _, _ := w.Spent("company:2"); spent {
			t.Error("a key with requests left reads as spent")
		}
	}
}

// A window that ended starts afresh at the next request, and Sweep deletes
// ended windows of its scope only.
func TestWindowsEndAndSweep(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	rate := pacing.Rate{Limit: 1, Window: time.Hour}
	w, err := s.Windows("general", rate)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Windows("auth", rate)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Windows{w, other} {
		x.Take("ip:a") //nolint:errcheck // checked below
		if got, err := x.Take("ip:a"); err != nil || got.Allowed {
			t.Fatalf("the second request of a 1/1h window: got %+v, %v, want refused", got, err)
		}
	}
	// End both windows as time would.
	if _, err := s.pool.Exec(context.Background(), "UPDATE rate_windows SET window_end = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if spent, _, _ := w.Spent("ip:a"); spent {
		t.Error("an ended window reads as spent")
	}
	if err := w.Sweep(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM rate_windows WHERE scope = 'auth'").Scan(&n); err != nil || n != 1 {
		t.Errorf("windows of another scope after a sweep: %d (%v), want 1", n, err)
	}
	if got, err := other.Take("ip:a"); err != nil || !got.Allowed || got.Remaining != 0 {
		t.Errorf("the first request after the window ended: got %+v, %v, want allowed", got, err)
	}
}

// A refund on one node takes back a request the other counted, in the
// open window only and never below 0, as pacing.Windows.Refund does.
func TestWindowsRefundShared(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := open(t, url), open(t, url)
	rate := pacing.Rate{Limit: 2, Window: time.Hour}
	wa, err := a.Windows("login", rate)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.Windows("login", rate)
	if err != nil {
		t.Fatal(err)
	}
	var k pacing.Result
	for range 2 {
		if k, err = wa.Take("k"); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Refund("k", k.End); err != nil {
		t.Fatal(err)
	}
	if got, err := wa.Take("k"); err != nil || !got.Allowed || got.Remaining != 0 {
		t.Fatalf("after 2 taken and 1 refunded on the other node: got %+v, %v, want allowed with 0 left", got, err)
	}
	if err := wb.Refund("unseen", k.End); err != nil {
		t.Fatal(err)
	}
	if got, err := wb.Take("unseen"); err != nil || got.Remaining != 1 {
		t.Fatalf("an unseen key after a refund: got %+v, %v, want 1 left", got, err)
	}
	u, err := wb.Take("unseen")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := wb.Refund("unseen", u.End); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := wb.Take("unseen"); err != nil || got.Remaining != 1 {
		t.Fatalf("refunds beyond what was taken: got %+v, %v, want 1 left (never below 0)", got, err)
	}
	if _, err := a.pool.Exec(context.Background(), "UPDATE login_windows SET window_end = now() - interval '1 second' WHERE scope = 'login' AND key = 'k'"); err != nil {
		t.Fatal(err)
	}
	if err := wa.Refund("k", k.End); err != nil {
		t.Fatal(err)
	}
	if got, err := wa.Take("k"); err != nil || got.Remaining != 1 {
		t.Fatalf("first request after the window ended and a late refund: got %+v, %v, want 1 left", got, err)
	}
}

// A bad rate or an empty scope is refused when the windows are made.
func TestWindowsRefuseBadRate(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	if _, err := s.Windows("general", pacing.Rate{Limit: 0, Window: time.Minute}); err == nil {
		t.Error("a limit of 0 was taken")
	}
	if _, err := s.Windows("", pacing.Rate{Limit: 1, Window: time.Minute}); err == nil {
		t.Error("an empty scope was taken")
	}
}

// The failed logins' and the reset mails' windows are in the logged table
// login_windows, which a crash of the database server or a failover to a
// standby keeps; the API's stay in the UNLOGGED rate_windows. Spent,
// Refund and Sweep work on the scope's table, and a sweep of a login scope
// deletes its ended windows there and nothing else.
func TestLoginWindowsLogged(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.URL(t))
	ctx := context.Background()
	for table, want := range map[string]string{"login_windows": "p", "rate_windows": "u"} {
		var got string
		if err := s.pool.QueryRow(ctx, "SELECT relpersistence::text FROM pg_class WHERE oid = $1::regclass", table).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: relpersistence %q, want %q", table, got, want)
		}
	}
	rate := pacing.Rate{Limit: 1, Window: time.Hour}
	logged := []string{"login", "login-client", "login-device", "reset-mail"}
	windows := map[string]*Windows{}
	ends := map[string]time.Time{}
	for _, scope := range append([]string{"general", "members", "auth"}, logged...) {
		w, err := s.Windows(scope, rate)
		if err != nil {
			t.Fatal(err)
		}
		windows[scope] = w
		for range 2 {
			r, err := w.Take("k")
			if err != nil {
				t.Fatal(err)
			}
			ends[scope] = r.End
		}
		if spent, _, err := w.Spent("k"); err != nil || !spent {
			t.Errorf("%s: spent %v, %v after 2 requests of a 1/1h window, want spent", scope, spent, err)
		}
	}
	scopesIn := func(table string) []string {
		t.Helper()
		rows, err := s.pool.Query(ctx, "SELECT scope FROM "+table+" ORDER BY scope")
		if err != nil {
			t.Fatal(err)
		}
		scopes, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return scopes
	}
	if got, want := scopesIn("login_windows"), []string{"login", "login-client", "login-device", "reset-mail"}; !slices.Equal(got, want) {
		t.Errorf("scopes in login_windows: %v, want %v", got, want)
	}
	if got, want := scopesIn("rate_windows"), []string{"auth", "general", "members"}; !slices.Equal(got, want) {
		t.Errorf("scopes in rate_windows: %v, want %v", got, want)
	}
	// Refunds take back in the scope's table (the count saturated at 2).
	for range 2 {
		if err := windows["login"].Refund("k", ends["login"]); err != nil {
			t.Fatal(err)
		}
	}
	if spent, _, err := windows["login"].Spent("k"); err != nil || spent {
		t.Errorf("login after a refund: spent %v, %v, want not spent", spent, err)
	}
	// End every window as time would; a sweep of each login scope deletes
	// its own, the API's stay until their own sweeps.
	for _, table := range []string{"login_windows", "rate_windows"} {
		if _, err := s.pool.Exec(ctx, "UPDATE "+table+" SET window_end = now() - interval '1 second'"); err != nil {
			t.Fatal(err)
		}
	}
	for _, scope := range logged[:3] {
		if err := windows[scope].Sweep(); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := scopesIn("login_windows"), []string{"reset-mail"}; !slices.Equal(got, want) {
		t.Errorf("scopes in login_windows after the login scopes' sweeps: %v, want %v", got, want)
	}
	if got := scopesIn("rate_windows"); len(got) != 3 {
		t.Errorf("scopes in rate_windows after the login scopes' sweeps: %v, want the 3 of the API", got)
	}
	if err := windows["reset-mail"].Sweep(); err != nil {
		t.Fatal(err)
	}
	if got := scopesIn("login_windows"); len(got) != 0 {
		t.Errorf("scopes in login_windows after every sweep: %v, want none", got)
	}
}

// The scopes counted in login_windows are the account package's.
func TestLoggedScopesAreTheAccountsOnes(t *testing.T) {
	for _, scope := range []string{account.LoginScope, account.ClientShareScope, account.DeviceScope, account.ResetScope} {
		if windowsTable(scope) != "login_windows" {
			t.Errorf("scope %q is not counted in login_windows", scope)
		}
	}
}

// A refund that comes after its request's window ended takes nothing from
// the key's next window (pacing.Windows.Refund): it gave the new window one
// request more than its limit.
func TestWindowsRefundAcrossAWindowBoundary(t *testing.T) {
	t.Parallel()
	a := open(t, pgtest.URL(t))
	w, err := a.Windows("login", pacing.Rate{Limit: 2, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Take("k") // window 1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(context.Background(), "UPDATE login_windows SET window_end = now() - interval '1 second' WHERE scope = 'login' AND key = 'k'"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Take("k"); err != nil { // window 2: 1 left
		t.Fatal(err)
	}
	if err := w.Refund("k", first.End); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Take("k"); err != nil || !got.Allowed || got.Remaining != 0 {
		t.Fatalf("the second request of window 2: got %+v, %v, want allowed with 0 left", got, err)
	}
	if got, err := w.Take("k"); err != nil || got.Allowed {
		t.Fatalf("a third request in window 2 after a refund for window 1: got %+v, %v, want refused", got, err)
	}
}
