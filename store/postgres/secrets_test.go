package postgres

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/internal/pgtest"
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
	_, _, err = s.RotateSecrets([]string{"jwt"}, nil)
	if !errors.Is(err, ErrNodesLive) || !strings.Contains(err.Error(), "n-1") || strings.Contains(err.Error(), "gone") {
		t.Fatalf("rotated with a node running: %v; want ErrNodesLive naming n-1 only", err)
	}
	if now, err := s.Secret("jwt", 32); err != nil || !bytes.Equal(now, was) {
		t.Fatalf("the secret after the refusal: %x (%v), want it as it was", now, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	if replaced, _, err := s.RotateSecrets([]string{"jwt"}, nil); err != nil || len(replaced) != 1 {
		t.Fatalf("rotate once the nodes stopped: %v (%v)", replaced, err)
	}
	if now, err := s.Secret("jwt", 32); err != nil || bytes.Equal(now, was) {
		t.Fatalf("the secret after the rotation: %x (%v), want new bytes", now, err)
	}
}
