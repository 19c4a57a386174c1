package postgres

import (
	"context"
	"testing"
)

// Every connection of the store asks the server for its side's keepalive,
// TCP_USER_TIMEOUT and idle-in-transaction timeout (serverSettings), the
// pool's as the server sees them and ConnConfig's (the cluster leader's);
// a setting the URL gives is the URL's.
func TestConnectionsAskServerSettings(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	settings := func(s *Store) map[string][2]string {
		t.Helper()
		rows, err := s.pool.Query(context.Background(), "SELECT name, setting, source FROM pg_settings WHERE name = ANY ($1)",
			[]string{"tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout", "idle_in_transaction_session_timeout"})
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string][2]string{}
		for rows.Next() {
			var name, setting, source string
			if err := rows.Scan(&name, &setting, &source); err != nil {
				t.Fatal(err)
			}
			got[name] = [2]string{setting, source}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := settings(openURL(t, url, Options{}))
	for name := range serverSettings {
		if got[name][1] != "client" {
			t.Errorf("%s: %v, want the connection's own (source client)", name, got[name])
		}
	}
	// The test cluster listens on a Unix socket, where the TCP settings
	// read 0; the idle timeout reads as asked.
	if got["idle_in_transaction_session_timeout"][0] != "60000" {
		t.Errorf("idle_in_transaction_session_timeout %v, want 60000 ms", got["idle_in_transaction_session_timeout"])
	}
	got = settings(openURL(t, url+"&idle_in_transaction_session_timeout=5000", Options{}))
	if got["idle_in_transaction_session_timeout"][0] != "5000" {
		t.Errorf("idle_in_transaction_session_timeout with the URL's 5000: %v", got["idle_in_transaction_session_timeout"])
	}

	cfg, err := ConnConfig("postgres://u@127.0.0.1:1/db?tcp_keepalives_idle=60")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range serverSettings {
		if name == "tcp_keepalives_idle" {
			want = "60"
		}
		if cfg.RuntimeParams[name] != want {
			t.Errorf("ConnConfig's %s: %q, want %q", name, cfg.RuntimeParams[name], want)
		}
	}
}
