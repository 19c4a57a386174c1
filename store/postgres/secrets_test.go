package postgres

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
)

// RotateSecrets refuses while nodes beat in the registry, naming them,
// and replaces nothing: each would go on with the old secrets it holds.
// Once their beats are older than the live window (stopped, or killed a
// while ago), it rotates.
func TestRotateSecretsRefusedWhileNodesRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url)
	was, err := s.Secret("jwt", 32)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, `INSERT INTO cluster_nodes (name, started_at, seen_at, bus, instance)
		VALUES ('n-1', now(), now(), true, 'a'), ('gone', now(), now() - interval '1 minute', true, 'c')`); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = s.RotateSecrets([]string{"jwt"}, nil)
	if !errors.Is(err, ErrNodesLive) || !strings.Contains(err.Error(), "n-1") || strings.Contains(err.Error(), "gone") {
		t.Fatalf("rotated with a node running: %v; want ErrNodesLive naming n-1 only", err)
	}
	if now, err := s.Secret("jwt", 32); err != nil || !bytes.Equal(now, was) {
		t.Fatalf("the secret after the refusal: %x (%v), want it as it was", now, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	if replaced, _, _, err := s.RotateSecrets([]string{"jwt"}, nil); err != nil || len(replaced) != 1 {
		t.Fatalf("rotate once the nodes stopped: %v (%v)", replaced, err)
	}
	if now, err := s.Secret("jwt", 32); err != nil || bytes.Equal(now, was) {
		t.Fatalf("the secret after the rotation: %x (%v), want new bytes", now, err)
	}
}

// A rotation removes from the registry the nodes it found not live: a
// node that was not stopped but silent (paused, or cut off from the
// database) past the live window read the secrets replaced at its start,
// and its next beat finds its row gone, so it stops rather than go on
// with them (sealing an API key under the old seal key, which the other
// nodes cannot open; trusting device cookies the rotation voided).
func TestRotateSecretsEndsTheSilentNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	s := open(t, url)
	if _, err := s.Secret("jwt", 32); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, `INSERT INTO cluster_nodes (name, started_at, seen_at, bus, instance)
		VALUES ('paused', now(), now() - interval '11 seconds', true, 'p')`); err != nil {
		t.Fatal(err)
	}
	if replaced, _, _, err := s.RotateSecrets([]string{"jwt"}, nil); err != nil || len(replaced) != 1 {
		t.Fatalf("rotate with the node silent past the live window: %v (%v)", replaced, err)
	}
	if ok, err := s.NodeBeat("paused", "p"); err != nil || ok {
		t.Fatalf("the silent node's beat after the rotation: %v (%v), want false: it must stop", ok, err)
	}
}

// HoldSecrets holds the rotation's lock on a session of its own, beside
// the pool: fn's transactions have the pool's connections, so an admin
// create-company works on a URL whose pool_max_conns is 1 as it did before
// it held the lock (it waited for a connection the lock held until its
// deadline, and failed).
func TestHoldSecretsBesideAPoolOfOne(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := Open(context.Background(), url+sep+"pool_max_conns=1", Options{TxTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var sealKey []byte
	if err := s.HoldSecrets(func() error {
		sealKey, err = s.Secret("held-secret", 32)
		return err
	}); err != nil || len(sealKey) != 32 {
		t.Fatalf("a secret read under the rotation's lock, with one connection in the pool: %d bytes (%v)", len(sealKey), err)
	}
	// The lock went with its session (the server ends it a moment after
	// the close): a rotation takes it.
	poll.Within(t, 10*time.Second, "the rotation's lock free after HoldSecrets", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var got bool
		if err := s.pool.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", migrationLock).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got {
			if _, err := s.pool.Exec(ctx, "SELECT pg_advisory_unlock($1)", migrationLock); err != nil {
				t.Fatal(err)
			}
		}
		return got
	})
}
