package mail

import (
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
)

// cutAtRecord is one node's real outbox whose database goes away as the
// worker records its first attempt, and comes back a moment later.
type cutAtRecord struct {
	Outbox
	relay *pgtest.Relayed
	once  sync.Once
}

func (c *cutAtRecord) UpdateMail(id uint64, fn func(*store.Mail)) (store.Mail, error) {
	c.once.Do(func() {
		c.relay.Cut()
		time.AfterFunc(300*time.Millisecond, c.relay.Resume)
	})
	return c.Outbox.UpdateMail(id, fn)
}

// A mail written out whose record the database did not take, because it was
// away for a moment, is recorded once it is back: the other node, which
// would claim the mail once the lease ran out, never writes it again.
// Nothing crashed, so it goes out once (contract section 12).
func TestMailRecordedWhenTheDatabaseReturns(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	relay := pgtest.Relay(t, url)
	// A short lease, so the other node would claim the mail again within
	// the test.
	opt := postgres.Options{Lease: 3 * time.Second}
	a, b := nodeWith(t, relay.URL, opt), nodeWith(t, url, opt)
	m := store.Mail{To: "u@example.com", Subject: "Hi", Text: "hello", State: store.MailPending, CreatedAt: time.Now()}
	if err := a.AppendMail(&m); err != nil {
		t.Fatal(err)
	}
	logA, bufA := newLogger()
	startWorker(t, newService(t, Config{PublicURL: "https://sms.example.com", Poll: 50 * time.Millisecond}, &cutAtRecord{Outbox: a, relay: relay}, logA))
	poll.Until(t, "the mail written out", func() bool { return written(bufA.String(), m.ID) == 1 })
	logB, bufB := newLogger()
	startWorker(t, newService(t, Config{PublicURL: "https://sms.example.com", Poll: 50 * time.Millisecond}, b, logB))

	poll.Until(t, "no mail pending", func() bool {
		pending, err := b.Mails(true)
		return err == nil && len(pending) == 0
	})
	if n := written(bufA.String(), m.ID) + written(bufB.String(), m.ID); n != 1 {
		t.Fatalf("the mail was written out %d times, want once", n)
	}
}
