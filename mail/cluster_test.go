package mail

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
)

// TestMain stops the PostgreSQL cluster the cluster tests start.
func TestMain(m *testing.M) { pgtest.Main(m) }

// node opens a PostgreSQL store on url: one node's outbox.
func node(t *testing.T, url string) *postgres.Store { return nodeWith(t, url, postgres.Options{}) }

// nodeWith is node with the store's options.
func nodeWith(t *testing.T, url string, opt postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// written is how many times the log shows mail id written out (no SMTP:
// the log is the delivery).
func written(log string, id uint64) int {
	return strings.Count(log, fmt.Sprintf("mail_id=%d ", id))
}

// Two nodes' workers on one outbox: each mail, whichever node queued it,
// is delivered (here: written to the log) by one node, once.
func TestClusterSendsEachMailOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var svcs []*Service
	var logs []fmt.Stringer
	for range 2 {
		log, buf := newLogger()
		svc := newService(t, Config{PublicURL: "https://sms.example.com", Poll: 50 * time.Millisecond}, node(t, url), log)
		startWorker(t, svc)
		svcs, logs = append(svcs, svc), append(logs, buf)
	}
	const mails = 30
	for i := range mails {
		if err := svcs[i%2].Send(context.Background(), Message{To: fmt.Sprintf("u%d@example.com", i), Subject: "Hi", Text: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	outbox := svcs[0].outbox
	poll.Until(t, "no mail pending", func() bool {
		pending, err := outbox.Mails(true)
		return err == nil && len(pending) == 0
	})
	all, err := outbox.Mails(false)
	if err != nil || len(all) != mails {
		t.Fatalf("%d mails in the outbox (%v), want %d", len(all), err, mails)
	}
	for _, m := range all {
		if n := written(logs[0].String(), m.ID) + written(logs[1].String(), m.ID); n != 1 || m.State != store.MailLogged {
			t.Errorf("mail %d (%s) written %d times, want once", m.ID, m.State, n)
		}
	}
}

// racedOutbox is one node's real outbox; before its first claim, another
// node (other) attempts the mail and fails: what happens when that node's
// worker gets there between this worker's list and its claim. updated is
// closed at this node's first UpdateMail.
type racedOutbox struct {
	Outbox
	t       *testing.T
	other   *postgres.Store
	raced   sync.Once
	updated chan struct{}
	update  sync.Once
}

func (r *racedOutbox) ClaimMail(id uint64) (store.Mail, bool, error) {
	r.raced.Do(func() {
		if _, ok, err := r.other.ClaimMail(id); !ok || err != nil {
			r.t.Errorf("the other node's claim: %v, %v", ok, err)
		}
		if _, err := r.other.UpdateMail(id, func(m *store.Mail) {
			m.Attempts++
			m.LastError = "421 try again later"
			m.NextAttemptAt = time.Now().Add(time.Hour)
		}); err != nil {
			r.t.Error(err)
		}
	})
	return r.Outbox.ClaimMail(id)
}

func (r *racedOutbox) UpdateMail(id uint64, fn func(*store.Mail)) (store.Mail, error) {
	defer r.update.Do(func() { close(r.updated) })
	return r.Outbox.UpdateMail(id, fn)
}

// A mail another node attempted (and failed) since this worker listed the
// outbox is not attempted again at once: its next attempt waits for its
// time, and the claim is given back.
func TestClusterMailAttemptedMeanwhileWaits(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	a, b := node(t, url), node(t, url)
	m := store.Mail{To: "u@example.com", Subject: "Hi", Text: "hello", State: store.MailPending, CreatedAt: time.Now()}
	if err := a.AppendMail(&m); err != nil {
		t.Fatal(err)
	}
	log, buf := newLogger()
	raced := &racedOutbox{Outbox: a, t: t, other: b, updated: make(chan struct{})}
	startWorker(t, newService(t, Config{PublicURL: "https://sms.example.com"}, raced, log))
	select {
	case <-raced.updated: // the claim given back, or (wrongly) the mail written out
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not write to the outbox within 10 s")
	}
	all, err := a.Mails(false)
	if err != nil || len(all) != 1 || all[0].State != store.MailPending || all[0].Attempts != 1 || written(buf.String(), m.ID) != 0 {
		t.Fatalf("outbox %+v (%v), written %d times; want the mail pending after the other node's one attempt, not written",
			all, err, written(buf.String(), m.ID))
	}
	if _, ok, err := b.ClaimMail(m.ID); !ok || err != nil {
		t.Fatalf("the other node's claim after the worker's pass: %v, %v; want the claim given back", ok, err)
	}
}
