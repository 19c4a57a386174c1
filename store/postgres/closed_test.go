package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// The statements that run outside the transaction helper (the load, the
// rate-limit windows, the stream leases, the pings) answer store.ErrClosed
// after Close, as the transactions do (conformance.Closed), not the pool's
// "context canceled" or "closed pool".
func TestClosedOutsideTransactions(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	w, err := s.Windows("general", pacing.Rate{Limit: 5, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.StreamLeases("node-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Load", func() error {
			return s.Load(func(put func(store.CopyRecord) error) error { return nil })
		}},
		{"Windows.Take", func() error { _, err := w.Take("ip:1"); return err }},
		{"Windows.Spent", func() error { _, _, err := w.Spent("ip:1"); return err }},
		{"Windows.Refund", func() error { return w.Refund("ip:1", time.Now()) }},
		{"Windows.Sweep", w.Sweep},
		{"StreamLeases", func() error { _, err := s.StreamLeases("node-b"); return err }},
		{"StreamLeases.Take", func() error { _, _, err := l.Take(context.Background(), 1, 1, "s", 1, 1, 1); return err }},
		{"StreamLeases.Give", func() error { return l.Give(context.Background(), 1) }},
		{"StreamLeases.Renew", l.Renew},
		{"Ping", func() error { return s.Ping(context.Background()) }},
		{"SchemaVersion", func() error { _, err := s.SchemaVersion(context.Background()); return err }},
	}
	for _, tc := range calls {
		if err := tc.call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want store.ErrClosed", tc.name, err)
		}
	}
}
