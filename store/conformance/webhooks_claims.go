package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// ClaimsStore is one node's store in the webhook claims suite.
type ClaimsStore interface {
	WebhooksStore
	MailStore
	Close() error
}

// ClaimNodes makes a new, empty database for one test and returns how to
// open a node's store on it, with the given lease (each closes with the test
// at the latest; closing one earlier is a node's death). Only a store that
// several processes may share (the PostgreSQL one) runs the suite.
type ClaimNodes func(t *testing.T) func(lease time.Duration) ClaimsStore

// WebhookClaims runs the rules of webhook deliveries claimed by the nodes of
// a cluster (contract section 12): each attempt is made by one node, a dead
// node's claims are taken over once its lease runs out, recording an attempt
// ends its lease, and a company's leases count on every node.
func WebhookClaims(t *testing.T, nodes ClaimNodes) {
	t.Run("ClaimedOnce", func(t *testing.T) { t.Parallel(); claimsOnce(t, nodes) })
	t.Run("DeadNodeTakenOver", func(t *testing.T) { t.Parallel(); claimsTakeover(t, nodes) })
	t.Run("RecordEndsLease", func(t *testing.T) { t.Parallel(); claimsRecordEnds(t, nodes) })
	t.Run("CompanyLeasesCounted", func(t *testing.T) { t.Parallel(); claimsCompanyLeases(t, nodes) })
	t.Run("EntryLeasesCounted", func(t *testing.T) { t.Parallel(); claimsEntryLeases(t, nodes) })
	t.Run("MailClaimedOnce", func(t *testing.T) { t.Parallel(); claimsMailOnce(t, nodes) })
	t.Run("MailDeadNodeTakenOver", func(t *testing.T) { t.Parallel(); claimsMailTakeover(t, nodes) })
	t.Run("LateRecordKeepsTheNewLease", func(t *testing.T) { t.Parallel(); claimsLateRecord(t, nodes) })
	t.Run("MailLateRecordKeepsTheNewLease", func(t *testing.T) { t.Parallel(); claimsMailLateRecord(t, nodes) })
}

// webhookClaim: on one node a claim answers what DueWebhookDeliveries
// answers (the embedded store's claim is that read; PostgreSQL's also
// leases), with no company's deliveries leased elsewhere.
func webhookClaim(t *testing.T, s WebhooksStore) {
	w := webhookCompany(t, s, 3)
	mustAdd(t, s, w, T0)
	mustAdd(t, s, w, T0.Add(time.Hour))
	want, wantNext, err := s.DueWebhookDeliveries(T0, 2, store.SkipIf(func(d store.WebhookDue) bool { return d.WebhookID == w.set.Entries[1].ID }))
	if err != nil {
		t.Fatal(err)
	}
	got, next, err := s.ClaimWebhookDeliveries(T0, 2, store.SkipIf(func(d store.WebhookDue) bool { return d.WebhookID == w.set.Entries[1].ID }))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got, want) || !next.Equal(wantNext) || !next.Equal(T0.Add(time.Hour)) {
		t.Fatalf("claimed %+v (next %s), want %+v (next %s)", got, next, want, wantNext)
	}
}

// claimIDs claims up to limit deliveries due at now on s.
func claimIDs(t *testing.T, s ClaimsStore, now time.Time, limit int) []store.WebhookDue {
	t.Helper()
	due, _, err := s.ClaimWebhookDeliveries(now, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	return due
}

// claimsOnce: two nodes, each with two workers claiming small batches at
// once, attempt every due delivery exactly once between them.
func claimsOnce(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b := open(time.Minute), open(time.Minute)
	w := webhookCompany(t, a, 4)
	const events = 15
	for range events {
		mustAdd(t, a, w, T0)
	}
	want := events * len(w.set.Entries)
	var mu sync.Mutex
	attempts := map[uint64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, s := range []ClaimsStore{a, b, a, b} {
		wg.Go(func() {
			// Bounded: every pass claims at least one delivery until none is
			// left, so want passes are enough.
			for range want + 1 {
				due, _, err := s.ClaimWebhookDeliveries(T0.Add(time.Minute), 3, nil)
				if err != nil {
					errs <- err
					return
				}
				if len(due) == 0 {
					return
				}
				for _, d := range due {
					mu.Lock()
					attempts[d.ID]++
					mu.Unlock()
					if _, err := s.RecordWebhookAttempt(d.ID, 0, outcome(store.WebhookDelivered, T0.Add(time.Minute))); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	onceEach(t, "delivery", attempts, want, errs)
	if left := claimIDs(t, b, T0.Add(time.Hour), 100); len(left) != 0 {
		t.Fatalf("%d deliveries left after every one was delivered", len(left))
	}
}

// claimsTakeover: a node that dies holding claims keeps them until its
// lease runs out; then another node claims them, each once.
func claimsTakeover(t *testing.T, nodes ClaimNodes) {
	const lease = 500 * time.Millisecond
	open := nodes(t)
	a, b := open(lease), open(lease)
	w := webhookCompany(t, a, 3)
	mustAdd(t, a, w, T0)
	held := claimIDs(t, a, T0, 10)
	if len(held) != 3 {
		t.Fatalf("the first node claimed %d, want 3", len(held))
	}
	if err := a.Close(); err != nil { // dies mid-attempt: nothing recorded
		t.Fatal(err)
	}
	// b polls until a's lease runs out, as its dispatcher does on a cluster.
	var taken []store.WebhookDue
	deadline := time.Now().Add(10 * time.Second)
	for len(taken) < len(held) && time.Now().Before(deadline) {
		taken = append(taken, claimIDs(t, b, T0, 10)...)
		if len(taken) < len(held) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(taken) != len(held) {
		t.Fatalf("the second node took over %d of the dead node's %d claims within 10 s", len(taken), len(held))
	}
	seen := map[uint64]bool{}
	for _, d := range taken {
		if seen[d.ID] {
			t.Fatalf("delivery %d taken over twice", d.ID)
		}
		seen[d.ID] = true
	}
	if again := claimIDs(t, b, T0, 10); len(again) != 0 {
		t.Fatalf("claimed %d again while the second node's lease holds them", len(again))
	}
}

// claimsRecordEnds: a pending line ends the lease, so the delivery's next
// attempt is claimed when due by any node, without waiting for the lease;
// an ended delivery is gone for every node.
func claimsRecordEnds(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b := open(time.Hour), open(time.Hour)
	w := webhookCompany(t, a, 2)
	mustAdd(t, a, w, T0)
	due := claimIDs(t, a, T0, 10)
	if len(due) != 2 {
		t.Fatalf("claimed %d, want 2", len(due))
	}
	if _, err := a.RecordWebhookAttempt(due[0].ID, 0, outcome(store.WebhookPending, T0)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RecordWebhookAttempt(due[1].ID, 0, outcome(store.WebhookFailed, T0)); err != nil {
		t.Fatal(err)
	}
	got := claimIDs(t, b, T0.Add(2*time.Hour), 10)
	if len(got) != 1 || got[0].ID != due[0].ID {
		t.Fatalf("the other node claimed %+v after the records, want delivery %d alone", got, due[0].ID)
	}
	if _, err := b.RecordWebhookAttempt(due[1].ID, 0, outcome(store.WebhookFailed, T0)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("recording an ended delivery: %v, want ErrNotFound", err)
	}
}

// claimsCompanyLeases: a node's claim says how many of the company's
// deliveries other nodes lease, not counting its own.
func claimsCompanyLeases(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b := open(time.Hour), open(time.Hour)
	w := webhookCompany(t, a, 5)
	mustAdd(t, a, w, T0)
	if got := claimIDs(t, a, T0, 3); len(got) != 3 || got[0].CompanyLeased != 0 {
		t.Fatalf("first claim: %+v, want 3 with no other lease", got)
	}
	if got := claimIDs(t, a, T0, 1); len(got) != 1 || got[0].CompanyLeased != 0 {
		t.Fatalf("a node's own leases counted: %+v", got)
	}
	got := claimIDs(t, b, T0, 10)
	if len(got) != 1 || got[0].CompanyLeased != 4 {
		t.Fatalf("the other node's claim: %+v, want one delivery with 4 leased elsewhere", got)
	}
}

// claimsEntryLeases: a node's claim says how many of the entry's
// deliveries other nodes lease, apart from the rest of the company's.
func claimsEntryLeases(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b := open(time.Hour), open(time.Hour)
	w := webhookCompany(t, a, 2)
	mustAdd(t, a, w, T0)
	mustAdd(t, a, w, T0) // two deliveries per entry
	first := w.set.Entries[0].ID
	got, _, err := a.ClaimWebhookDeliveries(T0, 1, store.SkipIf(func(d store.WebhookDue) bool { return d.WebhookID != first }))
	if err != nil || len(got) != 1 || got[0].EntryLeased != 0 {
		t.Fatalf("first claim: %+v (%v), want one of the first entry with no other lease", got, err)
	}
	rest := claimIDs(t, b, T0, 10)
	if len(rest) != 3 {
		t.Fatalf("the other node claimed %+v, want the other 3", rest)
	}
	for _, d := range rest {
		want := 0
		if d.WebhookID == first {
			want = 1
		}
		if d.EntryLeased != want || d.CompanyLeased != 1 {
			t.Errorf("delivery %d of entry %d: %d of its entry and %d of its company leased elsewhere, want %d and 1",
				d.ID, d.WebhookID, d.EntryLeased, d.CompanyLeased, want)
		}
	}
}

// claimsMailOnce: two nodes claiming every pending mail at once each get
// a mail the other does not, until it is recorded.
func claimsMailOnce(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b := open(time.Minute), open(time.Minute)
	const mails = 20
	for i := range mails {
		m := store.Mail{To: fmt.Sprintf("u%d@example.com", i), Subject: "Welcome", Text: "Hi", State: store.MailPending, CreatedAt: T0, NextAttemptAt: T0}
		if err := a.AppendMail(&m); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := a.Mails(true)
	if err != nil || len(pending) != mails {
		t.Fatalf("pending: %d (%v)", len(pending), err)
	}
	var mu sync.Mutex
	sent := map[uint64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range []ClaimsStore{a, b} {
		wg.Go(func() {
			for _, m := range pending { // each node walks the whole list, as its worker does
				_, ok, err := s.ClaimMail(m.ID)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					continue
				}
				mu.Lock()
				sent[m.ID]++
				mu.Unlock()
				if _, err := s.UpdateMail(m.ID, func(r *store.Mail) { r.State, r.Attempts = store.MailSent, r.Attempts+1 }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	onceEach(t, "mail", sent, mails, errs)
}

// claimsMailTakeover: a mail claimed by a node that dies is claimed by
// another once the lease runs out; a recorded attempt's lease
// ends at once.
func claimsMailTakeover(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b := open(500*time.Millisecond), open(time.Hour)
	m := store.Mail{To: "a@example.com", Subject: "Welcome", Text: "Hi", State: store.MailPending, CreatedAt: T0, NextAttemptAt: T0}
	if err := a.AppendMail(&m); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.ClaimMail(m.ID); err != nil || !ok {
		t.Fatalf("the first node's claim: %v (%v)", ok, err)
	}
	if err := a.Close(); err != nil { // dies mid-attempt
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	taken := false
	for !taken && time.Now().Before(deadline) {
		_, ok, err := b.ClaimMail(m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if taken = ok; !taken {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !taken {
		t.Fatal("the dead node's mail was not taken over within 10 s")
	}
	// b failed the attempt and retries later: its lease (an hour) ends with
	// the record, so any node may claim the retry.
	if _, err := b.UpdateMail(m.ID, func(r *store.Mail) { r.Attempts++; r.NextAttemptAt = T0.Add(time.Minute) }); err != nil {
		t.Fatal(err)
	}
	c := open(time.Minute)
	if _, ok, err := c.ClaimMail(m.ID); err != nil || !ok {
		t.Fatalf("a retry claimed after the record: %v (%v), want true", ok, err)
	}
}

// claimsLateRecord: a node whose lease ran out during its attempt (its
// beats stopped) and whose delivery another node took over records its
// attempt late: the line is logged, but the new holder's lease stands, so
// no third node attempts the delivery beside the second, and the holder's
// record ends its lease as before.
func claimsLateRecord(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b, c := open(300*time.Millisecond), open(time.Hour), open(time.Hour)
	w := webhookCompany(t, a, 1)
	mustAdd(t, a, w, T0)
	held := claimIDs(t, a, T0, 10)
	if len(held) != 1 {
		t.Fatalf("the first node claimed %d, want 1", len(held))
	}
	var taken []store.WebhookDue
	for deadline := time.Now().Add(10 * time.Second); len(taken) == 0 && time.Now().Before(deadline); {
		if taken = claimIDs(t, b, T0, 10); len(taken) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(taken) != 1 || taken[0].ID != held[0].ID {
		t.Fatalf("the second node took over %+v once the first's lease ran out, want delivery %d", taken, held[0].ID)
	}
	if _, err := a.RecordWebhookAttempt(held[0].ID, 0, outcome(store.WebhookPending, T0)); err != nil {
		t.Fatalf("the late record: %v", err)
	}
	if got := claimIDs(t, c, T0.Add(2*time.Hour), 10); len(got) != 0 {
		t.Fatalf("a third node claimed %+v after the late record, while the second node's lease holds it", got)
	}
	lines, err := a.WebhookAttempts(w.company.ID, 0, 10)
	if err != nil || len(lines) != 1 || lines[0].DeliveryID == "" || lines[0].State != store.WebhookPending {
		t.Fatalf("the deliveries log after the late record: %+v (%v), want its one pending line", lines, err)
	}
	if _, err := b.RecordWebhookAttempt(taken[0].ID, 0, outcome(store.WebhookPending, T0)); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, c, T0.Add(2*time.Hour), 10); len(got) != 1 {
		t.Fatalf("the holder's record ended its lease, but a third node claimed %+v when due, want the delivery", got)
	}
}

// claimsMailLateRecord: as claimsLateRecord, for a mail: the late record
// leaves the new holder's lease (and the mail) as they are.
func claimsMailLateRecord(t *testing.T, nodes ClaimNodes) {
	open := nodes(t)
	a, b, c := open(300*time.Millisecond), open(time.Hour), open(time.Hour)
	m := store.Mail{To: "a@example.com", Subject: "Welcome", Text: "Hi", State: store.MailPending, CreatedAt: T0, NextAttemptAt: T0}
	if err := a.AppendMail(&m); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.ClaimMail(m.ID); err != nil || !ok {
		t.Fatalf("the first node's claim: %v (%v)", ok, err)
	}
	taken := false
	for deadline := time.Now().Add(10 * time.Second); !taken && time.Now().Before(deadline); {
		_, ok, err := b.ClaimMail(m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if taken = ok; !taken {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !taken {
		t.Fatal("the second node did not take the mail over within 10 s")
	}
	if _, err := a.UpdateMail(m.ID, func(r *store.Mail) { r.Attempts++; r.NextAttemptAt = T0.Add(time.Minute) }); err != nil {
		t.Fatalf("the late record: %v", err)
	}
	if _, ok, err := c.ClaimMail(m.ID); err != nil || ok {
		t.Fatalf("a third node's claim after the late record: %v (%v), want false while the second node's lease holds it", ok, err)
	}
	if _, err := b.UpdateMail(m.ID, func(r *store.Mail) { r.Attempts++; r.NextAttemptAt = T0.Add(time.Minute) }); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.ClaimMail(m.ID); err != nil || !ok {
		t.Fatalf("a third node's claim after the holder's record: %v (%v), want true", ok, err)
	}
}

// onceEach fails t with the first error the racing nodes sent on errs (which
// it closes), unless want things were done, each exactly once (done counts
// them by id).
func onceEach(t *testing.T, what string, done map[uint64]int, want int, errs chan error) {
	t.Helper()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(done) != want {
		t.Fatalf("%d %ss done, want %d", len(done), what, want)
	}
	for id, n := range done {
		if n != 1 {
			t.Fatalf("%s %d done %d times, want once", what, id, n)
		}
	}
}
