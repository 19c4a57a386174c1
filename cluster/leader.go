package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store/postgres"
)

// DefaultLeaderPoll is LeaderConfig.Poll: how often a follower tries for
// leadership and a leader checks that it still holds it. A leader's death
// is seen by PostgreSQL when its connection drops (at once on a kill, the
// TCP keepalive's time on a lost machine); a follower then takes over
// within one poll. Five seconds is nothing to an hourly prune and one cheap
// statement per node.
const DefaultLeaderPoll = 5 * time.Second

// LeaderConfig configures a Leader.
type LeaderConfig struct {
	// URL is the database's (the store's --database-url): the leader holds
	// its lock on a connection of its own, outside the store's pool.
	URL string
	// Key names the leadership: one advisory lock key per kind of work.
	Key int64
	// Poll is DefaultLeaderPoll when 0.
	Poll time.Duration
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Leader runs work on one node of a cluster at a time: the node whose
// dedicated connection holds the session-level advisory lock
// pg_try_advisory_lock(Key). PostgreSQL releases the lock when that
// session ends, so leadership moves when the leader dies, its connection
// drops or it stops, without any lease of our own to time.
//
// A leader that lost its connection learns it at its next check (one
// Poll) and stops its work; meanwhile another node may have taken over,
// so the work run under a Leader must be harmless if it runs twice for a
// moment (every loop that uses it is a conditional delete or update).
type Leader struct {
	cfg LeaderConfig
	log *slog.Logger
	// refused counts the tries the database answered with the lock held
	// by another session: a test's sign that this node tried and waits.
	refused atomic.Uint64
}

// NewLeader checks cfg and returns a Leader; Run starts it.
func NewLeader(cfg LeaderConfig) (*Leader, error) {
	if cfg.URL == "" {
		return nil, errors.New("cluster: leader: no database URL")
	}
	if cfg.Poll < 0 {
		return nil, fmt.Errorf("cluster: leader poll %s: must be positive", cfg.Poll)
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultLeaderPoll
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Leader{cfg: cfg, log: log.With("leadership", cfg.Key)}, nil
}

// Run tries for leadership every Poll until ctx ends; while this node leads
// it runs work with a context that ends when leadership is lost or ctx ends,
// and waits for work to return before it lets go. Run returns when ctx ends,
// after work returned and the lock's connection closed (which releases it).
func (l *Leader) Run(ctx context.Context, work func(ctx context.Context)) {
	t := time.NewTicker(l.cfg.Poll)
	defer t.Stop()
	// conn is the session that tries for the lock, kept between tries: a
	// follower costs the database one idle session, not a new connection
	// (a backend started, TLS, authentication) every Poll.
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			l.close(conn)
		}
	}()
	for {
		var got bool
		conn, got = l.acquire(ctx, conn)
		if conn != nil && !got {
			l.refused.Add(1)
		}
		if got {
			l.lead(ctx, conn, t.C, work) // closes conn, releasing the lock
			conn = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// acquire tries for the lock on conn (connecting first when conn is nil)
// and returns the session to keep, and whether it holds the lock; nil when
// the database did not answer (closed: a try later connects again).
func (l *Leader) acquire(ctx context.Context, conn *pgx.Conn) (*pgx.Conn, bool) {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.Poll)
	defer cancel()
	if conn == nil {
		// The store's connect timeout, TCP keepalive and server settings
		// (store/postgres: serverSettings), so that this node notices a silent
		// database on this session too, and the server a vanished leader:
		// it ends the session, releasing the lock, in about 30 s.
		cfg, err := postgres.ConnConfig(l.cfg.URL)
		if err != nil {
			l.log.Warn("leadership: connect", "err", err)
			return nil, false
		}
		if conn, err = pgx.ConnectConfig(cctx, cfg); err != nil {
			if ctx.Err() == nil {
				l.log.Warn("leadership: connect", "err", err)
			}
			return nil, false
		}
	}
	var got bool
	if err := conn.QueryRow(cctx, "SELECT pg_try_advisory_lock($1)", l.cfg.Key).Scan(&got); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("leadership: try the lock", "err", err)
		}
		l.close(conn)
		return nil, false
	}
	return conn, got
}

// lead runs work while conn answers each tick, then stops it, waits for it
// and closes conn, releasing the lock.
func (l *Leader) lead(ctx context.Context, conn *pgx.Conn, tick <-chan time.Time, work func(ctx context.Context)) {
	l.log.Info("leadership taken")
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); work(wctx) }()
	defer func() {
		stop()
		<-done
		l.close(conn)
		l.log.Info("leadership released")
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return // work ended by itself
		case <-tick:
			pctx, cancel := context.WithTimeout(ctx, l.cfg.Poll)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					l.log.Warn("leadership lost: the lock's connection failed", "err", err)
				}
				return
			}
		}
	}
}

// close ends the session, which releases the lock if it held it.
func (l *Leader) close(conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.Background(), l.cfg.Poll)
	defer cancel()
	_ = conn.Close(cctx) // the session ends either way: the server drops it with the socket
}
