package postgres

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The TCP settings of every connection to the database (the pool's and the
// cluster leader's, ConnConfig), so that a database host that stops
// answering without refusing (powered off behind a firewall, a network
// partition: its packets dropped) is noticed by the connection itself,
// idle or busy, in about half a minute instead of the operating system's
// defaults (keepalive after two hours idle; about 15 minutes of
// retransmissions for data never acknowledged):
//   - keepalive: a probe after 15 s of silence, then every 5 s; 3 unanswered
//     close the connection (an idle pooled connection, the leader's
//     session between its checks, a statement waiting for its answer);
//   - TCP_USER_TIMEOUT (Linux): data sent and unacknowledged for 30 s
//     closes the connection (a statement sent into the void).
//
// Connections over a Unix socket have neither and need neither.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	userTimeout       = 30 * time.Second
)

// dialer is the net.Dialer of every connection to the database.
var dialer = &net.Dialer{
	KeepAliveConfig: net.KeepAliveConfig{
		Enable:   true,
		Idle:     keepAliveIdle,
		Interval: keepAliveInterval,
		Count:    keepAliveCount,
	},
	Control: setUserTimeout,
}

// dial is pgconn's DialFunc with the dialer above.
func dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialer.DialContext(ctx, network, addr)
}

// serverSettings are the settings every connection of the store (the
// pool's and ConnConfig's) asks of the PostgreSQL server at its start,
// unless the URL sets them (postgres://...?tcp_keepalives_idle=60), for the
// server's side of the connection:
//   - tcp_keepalives_*, tcp_user_timeout: the server notices a node whose
//     machine vanished (its socket silent, not closed) and ends its
//     session, rolling back its transaction and releasing its row and
//     advisory locks, in about 30 s, not after the server's operating
//     system's TCP keepalive (two hours by Linux's defaults). They apply to
//     TCP connections only (a Unix socket's read 0), and a server on a
//     system without one of them logs so and goes on;
//   - idle_in_transaction_session_timeout: a session that holds a
//     transaction open with no statement for a minute is ended, its locks
//     released: every transaction of the store has DefaultTxTimeout (30 s)
//     from its start, but that deadline is the node's, and a node stopped
//     (SIGSTOP, a frozen VM) or hung between two statements does not keep
//     it. The copy-store load, one long transaction, lifts it for itself.
//
// statement_timeout is left to the server: a statement's deadline is its
// transaction's, and a node cancels it then (a cancel request on a
// connection of its own), while a migration's statements (an index built
// over a large table) may take longer.
var serverSettings = map[string]string{
	"tcp_keepalives_idle":                 "15",
	"tcp_keepalives_interval":             "5",
	"tcp_keepalives_count":                "3",
	"tcp_user_timeout":                    "30000", // ms
	"idle_in_transaction_session_timeout": "60000", // ms
}

// connDefaults gives a connection's settings parsed from a URL what the URL
// did not set: DefaultConnectTimeout, the dialer above (TCP keepalive
// and TCP_USER_TIMEOUT) and serverSettings.
func connDefaults(cfg *pgx.ConnConfig) {
	if cfg.ConnectTimeout == 0 { // the URL set no connect_timeout
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.DialFunc = dial
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range serverSettings {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
}

// ConnConfig parses url as Open does, for a connection of its own outside
// a store's pool (the cluster leader's): it gets the store's connect
// timeout and TCP settings.
func ConnConfig(url string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	connDefaults(cfg)
	return cfg, nil
}

var _ pgconn.DialFunc = dial
