package boltstore

import (
	"errors"
	"testing"
	"time"
)

func TestPrunePairings(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	codes := map[string]Pairing{
		"old":      {CompanyID: 1, ExpiresAt: now.Add(-2 * time.Hour)},
		"old-used": {CompanyID: 1, ExpiresAt: now.Add(-2 * time.Hour), UsedAt: now.Add(-3 * time.Hour)},
		"recent":   {CompanyID: 1, ExpiresAt: now.Add(-30 * time.Minute)},
		"live":     {CompanyID: 1, ExpiresAt: now.Add(5 * time.Minute)},
	}
	for k, p := range codes {
		if err := s.PutPairing([]byte(k), p, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PrunePairings(now.Add(-time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("got %d pruned (%v), want 2", n, err)
	}
	for k := range codes {
		_, err := s.Pairing([]byte(k))
		if gone := errors.Is(err, ErrNotFound); gone != (k == "old" || k == "old-used") {
			t.Errorf("code %s: gone %v", k, gone)
		}
	}
}

func TestPruneTokenFamilies(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// Family "done": its one token was used and expired long ago.
	if err := s.StartRefreshFamily([]byte("h-done"), RefreshToken{UserID: 1, Family: "done", ExpiresAt: now.Add(-48 * time.Hour)}, now.Add(-31*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Family "live": a token still valid.
	if err := s.StartRefreshFamily([]byte("h-live"), RefreshToken{UserID: 1, Family: "live", ExpiresAt: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	// Family "revoked": revoked, but its token is not expired yet: it stays
	// so that the token is still refused as revoked.
	if err := s.StartRefreshFamily([]byte("h-rev"), RefreshToken{UserID: 2, Family: "revoked", ExpiresAt: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeUserSessions(2); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneTokens(now.Add(-24 * time.Hour)); err != nil || n != 1 {
		t.Fatalf("PruneTokens: got %d (%v), want 1", n, err)
	}
	n, err := s.PruneTokenFamilies()
	if err != nil || n != 1 {
		t.Fatalf("got %d families pruned (%v), want 1", n, err)
	}
	if got := countBucket(t, s, bucketTokenFamilies); got != 2 {
		t.Fatalf("got %d families left, want 2", got)
	}
	if got := countBucket(t, s, bucketUserFamilies); got != 2 {
		t.Fatalf("got %d user_families entries left, want 2", got)
	}
	if _, err := s.RotateRefreshToken([]byte("h-rev"), []byte("h-rev2"), now.Add(time.Hour), now); !errors.Is(err, ErrTokenRevoked) {
		t.Fatalf("the revoked family's token: got %v, want ErrTokenRevoked", err)
	}
	if _, err := s.RotateRefreshToken([]byte("h-live"), []byte("h-live2"), now.Add(time.Hour), now); err != nil {
		t.Fatalf("the live family's token: %v", err)
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
