package client

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/simrelay/simrelay/internal/poll"
)

// stopAfterWelcome runs a phone against srv until its link is up, stops
// it, and returns once Run does (failing the test if it has not within
// within), with the error Run returned.
func stopAfterWelcome(t *testing.T, srv string, closeTimeout, within time.Duration) error {
	t.Helper()
	p := New(Config{WSURL: "ws" + strings.TrimPrefix(srv, "http"), Token: "dt_x", CloseTimeout: closeTimeout})
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- p.Run(ctx) }()
	poll.Until(t, "the link is up", p.Connected)
	cancel()
	select {
	case err := <-ended:
		return err
	case <-time.After(within):
		t.Fatalf("Run has not returned %s after the stop", within)
		return nil
	}
}

// A phone that stops ends its link with a close frame, 1001 going away
// (PROTOCOL.md 7.4), so the server sees a link its phone closed, not a
// connection dropped (1006). It cancelled its read and the connection
// went with it, without a close frame.
func TestStopClosesTheLinkWithGoingAway(t *testing.T) {
	t.Parallel()
	var code atomic.Int32
	code.Store(-2)
	srv := welcomingServer(t, 10*time.Second, func(ctx context.Context, ws *websocket.Conn) {
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				code.Store(int32(websocket.CloseStatus(err)))
				return
			}
		}
	})
	if err := stopAfterWelcome(t, srv.URL, 0, 10*time.Second); err != nil {
		t.Fatalf("Run after the stop: got %v, want nil", err)
	}
	poll.Until(t, "the server reads the end of the link", func() bool { return code.Load() != -2 })
	if got := websocket.StatusCode(code.Load()); got != websocket.StatusGoingAway {
		t.Errorf("the server read close code %d, want 1001 going away", got)
	}
}

// A server that never answers the close does not hold the stop: the phone
// waits CloseTimeout for the answer, then drops the connection. The
// WebSocket library alone waits 5 s for it; the deadline here, 4 s, is
// far above the 50 ms the phone is given and below the library's wait.
func TestStopDoesNotWaitForAServerThatNeverAnswersTheClose(t *testing.T) {
	t.Parallel()
	stopped := make(chan struct{})
	var code atomic.Int32
	code.Store(-2)
	srv := welcomingServer(t, 20*time.Second, func(ctx context.Context, ws *websocket.Conn) {
		// Nothing is read (a read would answer the close) until the
		// phone has stopped; then the close frame it sent is there.
		select {
		case <-stopped:
		case <-ctx.Done():
			return
		}
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				code.Store(int32(websocket.CloseStatus(err)))
				return
			}
		}
	})
	err := stopAfterWelcome(t, srv.URL, 50*time.Millisecond, 4*time.Second)
	close(stopped)
	if err != nil {
		t.Fatalf("Run after the stop: got %v, want nil", err)
	}
	poll.Until(t, "the server reads the end of the link", func() bool { return code.Load() != -2 })
	if got := websocket.StatusCode(code.Load()); got != websocket.StatusGoingAway {
		t.Errorf("the server read close code %d, want 1001 going away", got)
	}
}
