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

// Windows are rate-limit windows every node of a cluster shares (table
// rate_windows, migration 0012): fixed windows per key that start at the
// key's first request, with the answers of pacing.Windows (requests
// 1..Limit of a window pass, refused ones count too, Remaining never below
// 0), counted in one statement per request. The database's clock times
// them, so nodes whose clocks disagree still agree on a window.
//
// Unlike pacing.Windows they keep no overflow window for a flood of new
// addresses: rows cost the database's disk, not a node's memory, and Sweep
// deletes each window once it has ended.
type Windows struct {
	s     *Store
	scope string
	rate  pacing.Rate
}

// Windows returns the shared windows of scope (the API names its scopes
// "general", "members" and "auth", the reset mails theirs "reset-mail",
// the failed logins theirs "login") at rate. Nodes that pass the same
// scope count in the same windows, so every node must be given the same
// rate.
func (s *Store) Windows(scope string, rate pacing.Rate) (*Windows, error) {
	if err := rate.Validate(); err != nil {
		return nil, fmt.Errorf("store: windows %s: %w", scope, err)
	}
	if scope == "" {
		return nil, fmt.Errorf("store: windows: the scope is empty")
	}
	return &Windows{s: s, scope: scope, rate: rate}, nil
}

// takeWindow counts one request of a key: a new window when the key has
// none or its window ended, else one more in it (saturating at limit+1:
// refusals beyond change nothing). It answers the count and the
// microseconds until the window ends, by the database's clock.
const takeWindow = `INSERT INTO rate_windows AS w (scope, key, window_end, count)
	VALUES ($1, $2, now() + make_interval(secs => $3), 1)
	ON CONFLICT (scope, key) DO UPDATE SET
		window_end = CASE WHEN w.window_end <= now() THEN excluded.window_end ELSE w.window_end END,
		count = CASE WHEN w.window_end <= now() THEN 1 ELSE least(w.count + 1, $4) END
	RETURNING count, (extract(epoch FROM w.window_end - now()) * 1000000)::bigint`

// Take counts one request of key and reports whether it is allowed.
func (w *Windows) Take(key string) (pacing.Result, error) {
	ctx, cancel := context.WithTimeout(w.s.ctx, windowTimeout)
	defer cancel()
	limit, length := w.rate.Limit, w.rate.Window
	var count int
	var micros int64
	err := w.s.pool.QueryRow(ctx, takeWindow, w.scope, key, length.Seconds(), limit+1).Scan(&count, &micros)
	if err != nil {
		return pacing.Result{}, fmt.Errorf("store: count a request in %s: %w", w.scope, w.s.closed(err))
	}
	reset := min(max(time.Duration(micros)*time.Microsecond, 0), length)
	return pacing.Result{Limit: limit, Remaining: max(limit-count, 0), Reset: reset, Allowed: count <= limit}, nil
}

// Spent reports, without counting a request, whether key's window has no
// request left, and how long until it ends (pacing.Windows.Spent).
func (w *Windows) Spent(key string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(w.s.ctx, windowTimeout)
	defer cancel()
	var micros int64
	err := w.s.pool.QueryRow(ctx, `SELECT (extract(epoch FROM window_end - now()) * 1000000)::bigint
		FROM rate_windows WHERE scope = $1 AND key = $2 AND window_end > now() AND count >= $3`,
		w.scope, key, w.rate.Limit).Scan(&micros)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("store: read a window of %s: %w", w.scope, w.s.closed(err))
	}
	return true, max(time.Duration(micros)*time.Microsecond, 0), nil
}

// Refund takes back one request of key counted in its window still open
// (pacing.Windows.Refund): a login whose password was right, counted as a
// try before it was checked. A window that has ended is left alone.
func (w *Windows) Refund(key string) error {
	ctx, cancel := context.WithTimeout(w.s.ctx, windowTimeout)
	defer cancel()
	if _, err := w.s.pool.Exec(ctx, `UPDATE rate_windows SET count = count - 1
		WHERE scope = $1 AND key = $2 AND window_end > now() AND count > 0`, w.scope, key); err != nil {
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
	if _, err := w.s.pool.Exec(ctx, "DELETE FROM rate_windows WHERE scope = $1 AND window_end <= now()", w.scope); err != nil {
		return fmt.Errorf("store: prune the windows of %s: %w", w.scope, w.s.closed(err))
	}
	return nil
}
