package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// lateWelcome is how long the server below holds its answer to a hello:
// more than the 10 s the phone waited, well within the server's own
// bound (a database that does not answer holds the hello up to its 30 s
// deadline before the server closes with 1013, PROTOCOL.md 7.2).
const lateWelcome = 12 * time.Second

// TestLateWelcomeWithinTheServersBoundIsWaitedFor: a server whose
// database is slow answers the hello late; the phone waits for the welcome
// (PROTOCOL.md 7.2: a little over the server's 30 s) rather than give the
// link up at 10 s and go to its growing backoff, which the quick retry of
// a 1013 would have spared it.
func TestLateWelcomeWithinTheServersBoundIsWaitedFor(t *testing.T) {
	t.Parallel()
	var links atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		links.Add(1)
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		if _, _, err := ws.Read(ctx); err != nil { // hello
			return
		}
		select {
		case <-time.After(lateWelcome): // the slow database
		case <-ctx.Done():
			return
		}
		data, _ := proto.Encode(proto.Welcome{DeviceFingerprint: "p", ServerTime: "2026-11-22T10:04:05.123Z", PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "SIM1"})
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			return
		}
		for { // the link stays up
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), Token: "dt_x"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(2 * lateWelcome)
	for p.Welcome().DeviceFingerprint == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: got %v, want nil", err)
	}
	if p.Welcome().DeviceFingerprint != "p" {
		t.Fatalf("no welcome within %v of a server that answers the hello after %v (links: %d)", 2*lateWelcome, lateWelcome, links.Load())
	}
	if n := links.Load(); n != 1 {
		t.Errorf("links: got %d, want the first one welcomed", n)
	}
}
