package webhook

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// An attempt whose line the database did not take, because it was away for
// a moment just after the receiver answered, is recorded once it is back:
// the delivery ends, and the other node, which would claim it once the
// lease ran out, never attempts it again. Nothing crashed, so the receiver
// gets it once (contract section 12: never twice but across a crash).
func TestAttemptRecordedWhenTheDatabaseReturns(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	relay := pgtest.Relay(t, url)
	// A short lease, so the other node would claim the delivery again
	// within the test; the attempt's timeout stays well within it.
	const lease = 3 * time.Second
	a, b := pgNode(t, relay.URL, postgres.Options{Lease: lease}), pgNode(t, url, postgres.Options{Lease: lease})
	f, fb := twoNodes(t, a, b)

	// The database goes away as the receiver answers the first attempt,
	// and comes back a moment later.
	answered := make(chan struct{})
	first := sync.OnceFunc(func() {
		relay.Cut()
		time.AfterFunc(300*time.Millisecond, relay.Resume)
		close(answered)
	})
	recv := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int {
		first()
		return http.StatusNoContent
	})
	cfg := Config{AllowPrivate: true, RootCAs: recv.Pool(), Workers: 2, Poll: 50 * time.Millisecond, Timeout: time.Second}
	svcA, _ := f.start(cfg, nil)
	f.configure(svcA, EntryInput{URL: recv.URL + "/a"})
	f.inbound(svcA, f.device, "SIM1", time.Now())
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no attempt within 10 s")
	}
	fb.start(cfg, nil) // the other node, claiming what has no live lease

	eventually(t, "the delivery ended", func() bool {
		due, _, err := b.DueWebhookDeliveries(time.Now().Add(time.Hour), 10, nil)
		return err == nil && len(due) == 0
	})
	if n := len(recv.Requests()); n != 1 {
		t.Fatalf("the receiver got the delivery %d times, want once", n)
	}
}

// countedLines is one node's real store that counts the attempt lines
// handed to it.
type countedLines struct {
	*postgres.Store
	lines atomic.Int64
}

func (c *countedLines) RecordWebhookAttemptLater(id uint64, keep int, decide func(store.WebhookDelivery, *store.WebhookEntry) store.WebhookAttempt) store.AttemptRecord {
	c.lines.Add(1)
	return c.Store.RecordWebhookAttemptLater(id, keep, decide)
}

// A line that waited its turn behind others past its retries (twice the
// attempt's timeout since it was handed over) is not written again when
// the database is still away: the retries are timed from the attempt, so a
// queue of lines during an outage ends within one retry span, not one span
// per line (at shutdown too).
func TestLineRetriesTimedFromTheAttempt(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	relay := pgtest.Relay(t, url)
	st := &countedLines{Store: pgNode(t, relay.URL, postgres.Options{})}
	const timeout = time.Second
	svc, err := New(Config{Timeout: timeout}, st, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	relay.Cut()
	decide := func(store.WebhookDelivery, *store.WebhookEntry) store.WebhookAttempt { return store.WebhookAttempt{} }
	r := recording{d: store.WebhookDue{ID: 1}, decide: decide, disabled: new(string),
		rec: st.Store.RecordWebhookAttemptLater(1, 10, decide), made: time.Now().Add(-3 * timeout)}
	if _, err := svc.recorded(r); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("the line with the database away: got %v, want store.ErrUnavailable", err)
	}
	if n := st.lines.Load(); n != 0 {
		t.Fatalf("the line was written again %d times past its retries, want none", n)
	}
}
