package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// An agent that stops ends its link with a close frame, 1001 going away
// (PROTOCOL.md 7.4), and Run returns nil: the server sees a link closed by
// its phone, not a connection dropped mid-frame. The stop comes at once
// after the welcome is written, so it may find the agent still reading it.
func TestShutdownClosesTheLinkWithGoingAway(t *testing.T) {
	t.Parallel()
	var code atomic.Int32
	code.Store(-2)
	welcomed := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := context.Background()
		if _, _, err := ws.Read(ctx); err != nil {
			return
		}
		write(ctx, ws, proto.Welcome{DeviceFingerprint: "fp", ServerTime: stamp(time.Now()), PingIntervalSeconds: 45, MaxInflight: 16, SelectedSIM: "BOTH"})
		welcomed <- struct{}{}
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				code.Store(int32(websocket.CloseStatus(err)))
				return
			}
		}
	}))
	defer srv.Close()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	a := New(Options{Config: ConfigFile{WSURL: "ws" + strings.TrimPrefix(srv.URL, "http"), DeviceToken: "dt_test", Salt: "s1"},
		Transport: &memTransport{inbox: make(chan Received)}, Journal: j, BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- a.Run(ctx) }()
	select {
	case <-welcomed:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not link")
	}
	cancel()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
	poll.Until(t, "the server reads the agent's close frame", func() bool { return code.Load() != -2 })
	if got := websocket.StatusCode(code.Load()); got != websocket.StatusGoingAway {
		t.Errorf("the server read close code %d, want 1001 going away", got)
	}
}
