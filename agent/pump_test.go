package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// A link forgets the reports it carried once they are answered: it kept
// one entry per record it ever sent, so a link up for months grew by one
// for every report of every message.
func TestLinkForgetsAnsweredReports(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			_, data, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			if st, ok := mustDecode(data).(*proto.Status); ok {
				write(r.Context(), ws, proto.StatusAck{ID: st.ID, Status: st.Status})
			}
		}
	}))
	t.Cleanup(srv.Close)
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	a := New(Options{Journal: j})
	ctx, cancel := context.WithCancel(context.Background())
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &link{ws: ws, waiting: map[string]bool{}, later: map[string]time.Time{}, sent: map[string]bool{}}
	done := make(chan struct{})
	go func() { // the reader: answers go through handle, as on a live link
		defer close(done)
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if err := a.handle(ctx, l, data); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	pumped := make(chan struct{})
	go func() { a.pump(ctx, l); close(pumped) }()
	t.Cleanup(func() { cancel(); ws.CloseNow(); <-done; <-pumped })

	const n = 50
	for i := range n {
		st := proto.Status{ID: fmt.Sprintf("job-%d", i), Status: proto.StatusSent, At: stamp(time.Now())}
		if err := j.db.Update(func(tx *bolt.Tx) error { return addReport(tx, st) }); err != nil {
			t.Fatal(err)
		}
		wake(a.pumpWake)
	}
	poll.Until(t, "every report is answered and the link keeps none of them", func() bool {
		reports, _ := j.Reports()
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(reports) == 0 && len(l.sent) == 0 && len(l.waiting) == 0
	})
}

func mustDecode(data []byte) proto.Frame {
	f, err := proto.Decode(data)
	if err != nil {
		return nil
	}
	return f
}
