package mail

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/store/boltstore"

	"github.com/simrelay/simrelay/store"
)

// *boltstore.Store is the production Outbox.
var _ Outbox = (*boltstore.Store)(nil)

// waitTimeout bounds every wait in these tests. It is a deadline, not an
// expectation: the waits end as soon as the condition holds.
const waitTimeout = 10 * time.Second

func openStore(t *testing.T, dir string) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newLogger() (*slog.Logger, *syncbuf.Buffer) {
	buf := &syncbuf.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func newService(t *testing.T, cfg Config, outbox Outbox, log *slog.Logger, opts ...Option) *Service {
	t.Helper()
	s, err := New(cfg, outbox, log, time.Now, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// startWorker runs s.Run until the test ends and checks it stopped cleanly.
func startWorker(t *testing.T, s *Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: got %v, want nil after cancel", err)
		}
	})
}

// waitForMail polls the outbox until the only mail to `to` satisfies ok.
func waitForMail(t *testing.T, outbox Outbox, to, what string, ok func(store.Mail) bool) store.Mail {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last []store.Mail
	for time.Now().Before(deadline) {
		all, err := outbox.Mails(false)
		if err != nil {
			t.Fatal(err)
		}
		last = last[:0]
		for _, m := range all {
			if m.To == to {
				last = append(last, m)
			}
		}
		if len(last) == 1 && ok(last[0]) {
			return last[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("outbox: no mail to %s %s within %s; got %+v", to, what, waitTimeout, last)
	return store.Mail{}
}

func isState(state string) func(store.Mail) bool {
	return func(m store.Mail) bool { return m.State == state }
}
