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
	AppendCompanyMail(m *store.Mail, lim store.MailLimits) error
	MailOutboxSize(companyID uint64) (pending int, bytes int64, err error)
	StorageUsed(companyID uint64, t time.Time) (int64, error)
}

// Mail runs the suite of the e-mail outbox.
func Mail(t *testing.T, open Opener[MailStore]) {
	t.Run("Outbox", func(t *testing.T) { t.Parallel(); mailOutbox(t, open(t)) })
	t.Run("UpdatesConcurrent", func(t *testing.T) { t.Parallel(); mailUpdatesConcurrent(t, open(t)) })
	t.Run("Prune", func(t *testing.T) { t.Parallel(); mailPrune(t, open(t)) })
	t.Run("Claim", func(t *testing.T) { t.Parallel(); mailClaim(t, open(t)) })
	t.Run("CompanyBound", func(t *testing.T) { t.Parallel(); mailCompanyBound(t, open(t)) })
	t.Run("CompanyBoundConcurrent", func(t *testing.T) { t.Parallel(); mailCompanyBoundConcurrent(t, open(t)) })
}

// mailCompanyBoundConcurrent: mails of one company queued at the same
// moment take turns with the bound, so exactly the bound's number go in.
func mailCompanyBoundConcurrent(t *testing.T, s MailStore) {
	c, _ := Company(t, s)
	const writers, each, bound = 8, 3, 5
	lim := store.MailLimits{MaxPending: bound}
	var mu sync.Mutex
	queued, refused := 0, 0
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				m := store.Mail{CompanyID: c.ID, To: "ops@x.test", Subject: "s", Text: string(rune('a' + w*each + i)), State: store.MailPending, CreatedAt: T0}
				err := s.AppendCompanyMail(&m, lim)
				mu.Lock()
				switch {
				case err == nil:
					queued++
				case errors.Is(err, store.ErrMailOutboxFull):
					refused++
				default:
					t.Errorf("append: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if queued != bound || refused != writers*each-bound {
		t.Fatalf("%d mails queued, %d refused; want %d and %d", queued, refused, bound, writers*each-bound)
	}
	if n, _, err := s.MailOutboxSize(c.ID); err != nil || n != bound {
		t.Fatalf("the company's mail outbox: %d (%v), want %d", n, err, bound)
	}
}

// mailCompanyBound: a company's mails (AppendCompanyMail) are counted while
// they are pending, by number and bytes, apart from other companies' and
// from the server's account mails; one that would go over the bound is not
// stored (*MailOutboxFullError) and costs nothing, an account mail is never
// refused, and a mail that is sent, fails or is pruned frees its place.
// Each queued mail counts against its company's storage budget.
func mailCompanyBound(t *testing.T, s MailStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	lim := store.MailLimits{MaxPending: 2}
	mail := func(companyID uint64, text string, at time.Time) *store.Mail {
		return &store.Mail{CompanyID: companyID, To: "ops@x.test", Subject: "SMS from +15550100001", Text: text, State: store.MailPending, CreatedAt: at, NextAttemptAt: at}
	}
	size := func(companyID uint64, wantN int, wantBytes int64) {
		t.Helper()
		if n, bytes, err := s.MailOutboxSize(companyID); err != nil || n != wantN || bytes != wantBytes {
			t.Fatalf("company %d's mail outbox: %d mails, %d bytes (%v); want %d, %d", companyID, n, bytes, err, wantN, wantBytes)
		}
	}
	m1, m2 := mail(a.ID, "one", T0), mail(a.ID, "second", T0)
	for _, m := range []*store.Mail{m1, m2} {
		if err := s.AppendCompanyMail(m, lim); err != nil || m.ID == 0 {
			t.Fatalf("append company mail: id %d, %v", m.ID, err)
		}
	}
	size(a.ID, 2, store.MailSize(*m1)+store.MailSize(*m2))
	size(b.ID, 0, 0)

	m3 := mail(a.ID, "third", T0)
	err := s.AppendCompanyMail(m3, lim)
	var full *store.MailOutboxFullError
	if !errors.Is(err, store.ErrMailOutboxFull) || !errors.As(err, &full) || full.CompanyID != a.ID || full.Pending != 2 || full.Limits != lim || m3.ID != 0 {
		t.Fatalf("a third mail of a's: %v (%+v, id %d), want *MailOutboxFullError for 2 pending", err, full, m3.ID)
	}
	if all, _ := s.Mails(false); len(all) != 2 {
		t.Fatalf("outbox after the refusal: %d mails, want 2", len(all))
	}
	// Another company's and the server's own mails are not a's.
	if err := s.AppendCompanyMail(mail(b.ID, "b's", T0), lim); err != nil {
		t.Fatalf("b's mail while a's outbox is full: %v", err)
	}
	account := &store.Mail{To: "ana@x.test", Subject: "Reset your password", Text: "link", State: store.MailPending, CreatedAt: T0, NextAttemptAt: T0}
	if err := s.AppendMail(account); err != nil {
		t.Fatalf("an account mail while a's outbox is full: %v", err)
	}
	size(a.ID, 2, store.MailSize(*m1)+store.MailSize(*m2))
	size(b.ID, 1, store.MailSize(*mail(b.ID, "b's", T0)))
	if err := s.AppendCompanyMail(&store.Mail{To: "x@x.test", Subject: "s", Text: "t", State: store.MailPending, CreatedAt: T0}, lim); err == nil {
		t.Fatal("a company mail without a company was stored")
	}

	// Each queued mail, and only those, counts against the budget.
	want := store.MailSize(*m1) + store.MailSize(*m2) + 2*store.MailRowCost
	if used, err := s.StorageUsed(a.ID, T0); err != nil || used != want {
		t.Fatalf("a's storage used: %d (%v), want %d", used, err, want)
	}

	// Sent (its body dropped, as the worker does) and failed mails leave
	// the count; a retry still pending stays in it.
	if _, err := s.UpdateMail(m1.ID, func(r *store.Mail) { r.Attempts++; r.NextAttemptAt = T0.Add(time.Minute) }); err != nil {
		t.Fatal(err)
	}
	size(a.ID, 2, store.MailSize(*m1)+store.MailSize(*m2))
	if _, err := s.UpdateMail(m1.ID, func(r *store.Mail) { r.State, r.Text = store.MailSent, "" }); err != nil {
		t.Fatal(err)
	}
	size(a.ID, 1, store.MailSize(*m2))
	if err := s.AppendCompanyMail(m3, lim); err != nil {
		t.Fatalf("a's third mail once one was sent: %v", err)
	}
	if _, err := s.UpdateMail(m2.ID, func(r *store.Mail) { r.State = store.MailFailed }); err != nil {
		t.Fatal(err)
	}
	size(a.ID, 1, store.MailSize(*m3))

	// The bound in bytes: a mail that would go over it is refused whatever
	// the count.
	byBytes := store.MailLimits{MaxBytes: 2 * store.MailSize(*m3)}
	if err := s.AppendCompanyMail(mail(a.ID, "more than ten bytes of text", T0), byBytes); !errors.Is(err, store.ErrMailOutboxFull) {
		t.Fatalf("a mail over the bytes bound: %v, want ErrMailOutboxFull", err)
	}
	if err := s.AppendCompanyMail(mail(a.ID, "", T0), byBytes); err != nil {
		t.Fatalf("a mail within the bytes bound: %v", err)
	}
	size(a.ID, 2, 2*store.MailSize(*m3)-int64(len("third")))

	// A pending mail pruned after 30 days leaves the count.
	old := mail(b.ID, "old", T0.Add(-31*24*time.Hour))
	if err := s.AppendCompanyMail(old, store.MailLimits{}); err != nil {
		t.Fatal(err)
	}
	size(b.ID, 2, 2*store.MailSize(*old)-int64(len("old"))+int64(len("b's")))
	if _, unsent, err := s.PruneMail(T0.Add(-7*24*time.Hour), T0.Add(-30*24*time.Hour)); err != nil || len(unsent) != 1 || unsent[0].ID != old.ID {
		t.Fatalf("prune: %+v (%v), want the old mail", unsent, err)
	}
	size(b.ID, 1, store.MailSize(*mail(b.ID, "b's", T0)))
	got, err := s.Mails(true)
	if err != nil || len(got) != 4 || got[0].CompanyID != b.ID || got[1].CompanyID != 0 || got[2].ID != m3.ID || got[2].CompanyID != a.ID {
		t.Fatalf("pending mails: %+v (%v), want b's, the account mail's, then a's, each with its company", got, err)
	}
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
