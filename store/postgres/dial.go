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

// connDefaults gives a connection's settings parsed from a URL what the URL
// did not set: DefaultConnectTimeout, and the dialer above (TCP keepalive
// and TCP_USER_TIMEOUT).
func connDefaults(cfg *pgx.ConnConfig) {
	if cfg.ConnectTimeout == 0 { // the URL set no connect_timeout
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.DialFunc = dial
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
