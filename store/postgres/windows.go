package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/pacing"
)

// windowTimeout bounds one statement of the rate-limit windows. A request
// is counted with the store's context, not the request's, so that a client
// that hangs up cannot leave its request uncounted; this bounds how long a
// slow database holds the request instead.
const windowTimeout = 2 * time.Second

// Windows are rate-limit windows every node of a cluster shares (tables
// rate_windows, migration 0012, and login_windows, migration 0019): fixed
// windows per key that start at the key's first request, with the answers
// of pacing.Windows (requests 1..Limit of a window pass, refused ones count
// too, Remaining never below 0), counted in one statement per request. The
// database's clock times them, so nodes whose clocks disagree still agree
// on a window.
//
// Unlike pacing.Windows they keep no overflow window for a flood of new
// addresses: rows cost the database's disk, not a node's memory, and Sweep
// deletes each window once it has ended.
type Windows struct {
	s     *Store
	scope string
	rate  pacing.Rate
	// take, spent, refund and sweep are the statements, on the scope's
	// table (windowsTable).
	take, spent, refund, sweep string
}

// loggedScopes are the scopes counted in the logged table login_windows
// (migration 0019): the failed logins' (account.LoginScope,
// account.ClientShareScope, account.DeviceScope) and the reset mails'
// (account.ResetScope). A crash of the database server or a failover to a
// standby keeps them, where it empties the UNLOGGED rate_windows: an
// address an attacker has spent stays refused. Every other scope (the
// API's, counted per request) stays in rate_windows, without a WAL record
// per request. Named here, not imported from account, which this package
// does not depend on; TestLoggedScopesAreTheAccountsOnes holds them to
// account's constants.
var loggedScopes = map[string]bool{"login": true, "login-client": true, "login-device": true, "reset-mail": true}

// windowsTable is the table scope's windows are in.
func windowsTable(scope string) string {
	if loggedScopes[scope] {
		return "login_windows"
	}
	return "rate_windows"
}

// Windows returns the shared windows of scope (the API names its scopes
// "general", "members" and "auth", the reset mails theirs "reset-mail",
// the failed logins theirs "login", "login-client" and "login-device") at
// rate, in the scope's table (windowsTable). Nodes that pass the same
// scope count in the same windows, so every node must be given the same
// rate.
func (s *Store) Windows(scope string, rate pacing.Rate) (*Windows, error) {
	if err := rate.Validate(); err != nil {
		return nil, fmt.Errorf("store: windows %s: %w", scope, err)
	}
	if scope == "" {
		return nil, fmt.Errorf("store: windows: the scope is empty")
	}
	table := windowsTable(scope)
	return &Windows{s: s, scope: scope, rate: rate,
		take: takeWindow(table),
		spent: `SELECT (extract(epoch FROM window_end - now()) * 1000000)::bigint
		FROM ` + table + ` WHERE scope = $1 AND key = $2 AND window_end > now() AND count >= $3`,
		refund: `UPDATE ` + table + ` SET count = count - 1
		WHERE scope = $1 AND key = $2 AND window_end = $3 AND window_end > now() AND count > 0`,
		sweep: "DELETE FROM " + table + " WHERE scope = $1 AND window_end <= now()",
	}, nil
}

// takeWindow is the statement that counts one request of a key in table:
// a new window when the key has none or its window ended, else one more
// in it (saturating at limit+1: refusals beyond change nothing). It
// answers the count, the microseconds until the window ends, by the
// database's clock, and the window's end, which names it for Refund.
func takeWindow(table string) string {
	return `INSERT INTO ` + table + ` AS w (scope, key, window_end, count)
	VALUES ($1, $2, now() + make_interval(secs => $3), 1)
	ON CONFLICT (scope, key) DO UPDATE SET
		window_end = CASE WHEN w.window_end <= now() THEN excluded.window_end ELSE w.window_end END,
		count = CASE WHEN w.window_end <= now() THEN 1 ELSE least(w.count + 1, $4) END
	RETURNING count, (extract(epoch FROM w.window_end - now()) * 1000000)::bigint, w.window_end`
}

// Take counts one request of key and reports whether it is allowed.
func (w *Windows) Take(key string) (pacing.Result, error) {
	ctx, cancel := context.WithTimeout(w.s.ctx, windowTimeout)
	defer cancel()
	limit, length := w.rate.Limit, w.rate.Window
	var count int
	var micros int64
	var end time.Time
	err := w.s.pool.QueryRow(ctx, w.take, w.scope, key, length.Seconds(), limit+1).Scan(&count, &micros, &end)
	if err != nil {
		return pacing.Result{}, fmt.Errorf("store: count a request in %s: %w", w.scope, w.s.closed(err))
	}
	reset := min(max(time.Duration(micros)*time.Microsecond, 0), length)
	return pacing.Result{Limit: limit, Remaining: max(limit-count, 0), Reset: reset, Allowed: count <= limit, End: end}, nil
}

// Spent reports, without counting a request, whether key's window has no
// request left, and how long until it ends (pacing.Windows.Spent).
func (w *Windows) Spent(key string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(w.s.ctx, windowTimeout)
	defer cancel()
	var micros int64
	err := w.s.pool.QueryRow(ctx, w.spent, w.scope, key, w.rate.Limit).Scan(&micros)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("store: read a window of %s: %w", w.scope, w.s.closed(err))
	}
	return true, max(time.Duration(micros)*time.Microsecond, 0), nil
}

// Refund takes back one request of key from the window that counted it
// (end: the End of Take's Result) while it is still open
// (pacing.Windows.Refund): a login whose password was right, counted as a
// try before it was checked. A window that has ended is left alone, and so
// is the key's next one, which never counted the request.
func (w *Windows) Refund(key string, end time.Time) error {
	ctx, cancel := context.WithTimeout(w.s.ctx, windowTimeout)
	defer cancel()
	if _, err := w.s.pool.Exec(ctx, w.refund, w.scope, key, end); err != nil {
		return fmt.Errorf("store: take back a request in %s: %w", w.scope, w.s.closed(err))
	}
	return nil
}

// Sweep deletes the scope's windows that have ended. Every node may run
// it: a window deleted by one is simply not found by the others, and the
// next request starts it afresh, as it would have anyway.
func (w *Windows) Sweep() error {
	ctx, cancel := context.WithTimeout(w.s.ctx, windowTimeout)
	defer cancel()
	if _, err := w.s.pool.Exec(ctx, w.sweep, w.scope); err != nil {
		return fmt.Errorf("store: prune the windows of %s: %w", w.scope, w.s.closed(err))
	}
	return nil
}
