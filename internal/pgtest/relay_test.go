//go:build unix

package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A stalled relay keeps its connections open but answers nothing: a
// statement waits until its own deadline, and a new connection is accepted
// but never answered. Resume closes the connections that lost bytes and
// lets new ones through.
func TestRelayStall(t *testing.T) {
	t.Parallel()
	r := Relay(t, URL(t))
	conn := connect(t, r.URL)
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	r.Stall()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err == nil || ctx.Err() == nil {
		t.Fatalf("a statement through a stalled relay: %v, want its deadline passed", err)
	}
	if !conn.IsClosed() {
		t.Error("the connection whose statement ran out of time is still open")
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer dcancel()
	if c, err := pgx.Connect(dctx, r.URL); err == nil {
		c.Close(context.Background())
		t.Fatal("connected through a stalled relay")
	} else if dctx.Err() == nil {
		t.Fatalf("a connection through a stalled relay failed before its deadline: %v (refused, not silent)", err)
	}
	r.Resume()
	again := connect(t, r.URL)
	if err := again.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
}
