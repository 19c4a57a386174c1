package conformance

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// MailStore is what the mail suite calls.
type MailStore interface {
	Base
	AppendMail(m *store.Mail) error
	UpdateMail(id uint64, fn func(*store.Mail)) (store.Mail, error)
	Mails(pendingOnly bool) ([]store.Mail, error)
	ClaimMail(id uint64) (store.Mail, bool, error)
	PruneMail(doneCutoff, unsentCutoff time.Time) (done int, unsent []store.Mail, err error)
}

// Mail runs the suite of the e-mail outbox.
func Mail(t *testing.T, open Opener[MailStore]) {
	t.Run("Outbox", func(t *testing.T) { t.Parallel(); mailOutbox(t, open(t)) })
	t.Run("UpdatesConcurrent", func(t *testing.T) { t.Parallel(); mailUpdatesConcurrent(t, open(t)) })
	t.Run("Prune", func(t *testing.T) { t.Parallel(); mailPrune(t, open(t)) })
	t.Run("Claim", func(t *testing.T) { t.Parallel(); mailClaim(t, open(t)) })
}

// mailClaim: a pending mail is claimed as stored; a sent one, or one that
// is gone, is not (and is no error).
func mailClaim(t *testing.T, s MailStore) {
	m := store.Mail{To: "a@example.com", Subject: "Welcome", Text: "Hi", State: store.MailPending, CreatedAt: T0, NextAttemptAt: T0}
	if err := s.AppendMail(&m); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.ClaimMail(m.ID); err != nil || !ok || got.ID != m.ID || got.Text != "Hi" {
		t.Fatalf("claim a pending mail: %+v, %v (%v)", got, ok, err)
	}
	if _, err := s.UpdateMail(m.ID, func(r *store.Mail) { r.State = store.MailSent }); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.ClaimMail(m.ID); err != nil || ok {
		t.Fatalf("claim a sent mail: %v (%v), want false", ok, err)
	}
	if _, ok, err := s.ClaimMail(m.ID + 1000); err != nil || ok {
		t.Fatalf("claim an unknown mail: %v (%v), want false", ok, err)
	}
}

// mailOutbox: appended mails get rising ids and read back whole, oldest
// first; an update changes the mail it names and keeps its id; the pending
// list is the mails still waiting; an unknown id is ErrNotFound.
func mailOutbox(t *testing.T, s MailStore) {
	if all, err := s.Mails(false); err != nil || len(all) != 0 {
		t.Fatalf("an empty outbox: %+v (%v)", all, err)
	}
	first := store.Mail{To: "a@example.com", Subject: "Welcome", Text: "Hi <a>", HTML: "<p>Hi &lt;a&gt;</p>", State: store.MailPending, CreatedAt: T0, NextAttemptAt: T0}
	second := store.Mail{To: "b@example.com", Subject: "Reset", Text: "Link", State: store.MailPending, CreatedAt: T0.Add(time.Second)}
	for _, m := range []*store.Mail{&first, &second} {
		if err := s.AppendMail(m); err != nil || m.ID == 0 {
			t.Fatalf("append: id %d (%v)", m.ID, err)
		}
	}
	if second.ID <= first.ID {
		t.Fatalf("ids %d then %d, want rising", first.ID, second.ID)
	}
	sent := T0.Add(time.Minute)
	got, err := s.UpdateMail(first.ID, func(m *store.Mail) {
		if m.To != first.To || m.Subject != first.Subject {
			t.Errorf("update got %+v, want the first mail", m)
		}
		m.State, m.Attempts, m.SentAt, m.NextAttemptAt, m.ID = store.MailSent, 1, sent, time.Time{}, 999
	})
	if err != nil || got.ID != first.ID || got.State != store.MailSent || got.Attempts != 1 || !got.SentAt.Equal(sent) {
		t.Fatalf("update: %+v (%v), want the first mail sent, its id kept", got, err)
	}
	if _, err := s.UpdateMail(second.ID+1000, func(*store.Mail) { t.Error("update ran for an unknown id") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown mail: %v, want ErrNotFound", err)
	}
	all, err := s.Mails(false)
	if err != nil || len(all) != 2 || all[0].ID != first.ID || all[1].ID != second.ID {
		t.Fatalf("all: %+v (%v), want both, oldest first", all, err)
	}
	want := first
	want.State, want.Attempts, want.SentAt, want.NextAttemptAt = store.MailSent, 1, sent, time.Time{}
	if m := all[0]; m.ID != want.ID || m.To != want.To || m.Subject != want.Subject || m.Text != want.Text || m.HTML != want.HTML ||
		m.State != want.State || m.Attempts != 1 || !m.CreatedAt.Equal(T0) || !m.SentAt.Equal(sent) || !m.NextAttemptAt.IsZero() {
		t.Fatalf("read back %+v, want %+v", m, want)
	}
	pending, err := s.Mails(true)
	if err != nil || len(pending) != 1 || pending[0].ID != second.ID {
		t.Fatalf("pending: %+v (%v), want the second only", pending, err)
	}
}

// mailUpdatesConcurrent: updates of one mail at once each see the one
// before (none is lost).
func mailUpdatesConcurrent(t *testing.T, s MailStore) {
	m := store.Mail{To: "a@example.com", Subject: "hi", State: store.MailPending, CreatedAt: T0}
	if err := s.AppendMail(&m); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := s.UpdateMail(m.ID, func(m *store.Mail) { m.Attempts++ }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if all, _ := s.Mails(false); len(all) != 1 || all[0].Attempts != n {
		t.Fatalf("after %d updates at once: %+v", n, all)
	}
}

// mailPrune: sent or logged mails older than the done cutoff go; pending
// or failed ones older than the unsent cutoff go too and are returned,
// oldest first, without their text; the rest stay.
func mailPrune(t *testing.T, s MailStore) {
	day := 24 * time.Hour
	mails := []store.Mail{
		{To: "a@x.test", State: store.MailSent, CreatedAt: T0.Add(-8 * day)},                                  // dropped
		{To: "b@x.test", State: store.MailLogged, CreatedAt: T0.Add(-8 * day)},                                // dropped
		{To: "c@x.test", State: store.MailSent, CreatedAt: T0.Add(-6 * day)},                                  // kept
		{To: "d@x.test", State: store.MailFailed, CreatedAt: T0.Add(-8 * day)},                                // kept: unsent, younger than 30 days
		{To: "e@x.test", State: store.MailPending, CreatedAt: T0.Add(-31 * day), Subject: "Reset"},            // dropped, returned
		{To: "f@x.test", State: store.MailFailed, CreatedAt: T0.Add(-31 * day), Text: "link", HTML: "<a>"},    // dropped, returned
		{To: "g@x.test", State: store.MailPending, CreatedAt: T0},                                             // kept
		{To: "h@x.test", State: store.MailSent, CreatedAt: T0.Add(-7 * day)},                                  // kept: not before the cutoff
		{To: "i@x.test", State: store.MailFailed, CreatedAt: T0.Add(-30 * day), Text: "kept", Subject: "Old"}, // kept: not before the cutoff
	}
	for i := range mails {
		if err := s.AppendMail(&mails[i]); err != nil {
			t.Fatal(err)
		}
	}
	done, unsent, err := s.PruneMail(T0.Add(-7*day), T0.Add(-30*day))
	if err != nil || done != 2 || len(unsent) != 2 {
		t.Fatalf("prune: %d done, unsent %+v (%v); want 2 and 2", done, unsent, err)
	}
	if e, f := unsent[0], unsent[1]; e.To != "e@x.test" || e.Subject != "Reset" || e.ID != mails[4].ID || f.To != "f@x.test" || f.Text != "" || f.HTML != "" || f.State != store.MailFailed {
		t.Fatalf("unsent: %+v, want e then f, without their text", unsent)
	}
	left, _ := s.Mails(false)
	var to []string
	for _, m := range left {
		to = append(to, m.To)
	}
	if len(left) != 5 || to[0] != "c@x.test" || to[1] != "d@x.test" || to[2] != "g@x.test" || to[3] != "h@x.test" || to[4] != "i@x.test" || left[4].Text != "kept" {
		t.Fatalf("left: %v, want c, d, g, h, i whole", to)
	}
	if done, unsent, err := s.PruneMail(T0.Add(-7*day), T0.Add(-30*day)); err != nil || done != 0 || len(unsent) != 0 {
		t.Fatalf("a second prune: %d, %+v (%v), want nothing", done, unsent, err)
	}
}
