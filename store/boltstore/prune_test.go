package boltstore

import (
	"testing"
	"time"
)

// PruneTokenFamilies takes the user_families entries of the families it
// drops with them (the suite's PruneTokens case holds what it drops).
func TestPruneTokenFamiliesIndex(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.StartRefreshFamily([]byte("h-done"), RefreshToken{UserID: 1, Family: "done", ExpiresAt: now.Add(-48 * time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.StartRefreshFamily([]byte("h-live"), RefreshToken{UserID: 1, Family: "live", ExpiresAt: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneTokens(now.Add(-24 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneTokenFamilies(); err != nil || n != 1 {
		t.Fatalf("got %d families pruned (%v), want 1", n, err)
	}
	if fams, idx := countBucket(t, s, bucketTokenFamilies), countBucket(t, s, bucketUserFamilies); fams != 1 || idx != 1 {
		t.Fatalf("got %d families and %d user_families entries left, want 1 and 1", fams, idx)
	}
}

func TestPruneMail(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	mails := []Mail{
		{To: "a@x.test", State: MailSent, CreatedAt: now.Add(-8 * 24 * time.Hour)},                  // dropped
		{To: "b@x.test", State: MailLogged, CreatedAt: now.Add(-8 * 24 * time.Hour)},                // dropped
		{To: "c@x.test", State: MailSent, CreatedAt: now.Add(-6 * 24 * time.Hour)},                  // kept
		{To: "d@x.test", State: MailFailed, CreatedAt: now.Add(-8 * 24 * time.Hour)},                // kept: unsent, younger than 30 days
		{To: "e@x.test", State: MailPending, CreatedAt: now.Add(-31 * 24 * time.Hour)},              // dropped, returned
		{To: "f@x.test", State: MailFailed, CreatedAt: now.Add(-31 * 24 * time.Hour), Text: "link"}, // dropped, returned
		{To: "g@x.test", State: MailPending, CreatedAt: now},                                        // kept
	}
	for i := range mails {
		if err := s.AppendMail(&mails[i]); err != nil {
			t.Fatal(err)
		}
	}
	done, unsent, err := s.PruneMail(now.Add(-7*24*time.Hour), now.Add(-30*24*time.Hour))
	if err != nil || done != 2 || len(unsent) != 2 || unsent[0].To != "e@x.test" || unsent[1].To != "f@x.test" || unsent[1].Text != "" {
		t.Fatalf("got %d done, unsent %+v (%v); want 2 and e, f without their text", done, unsent, err)
	}
	left, _ := s.Mails(false)
	if len(left) != 3 {
		t.Fatalf("got %d mails left, want 3", len(left))
	}
}
