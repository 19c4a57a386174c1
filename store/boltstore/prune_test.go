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

func TestPruneStorageCounters(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	dev := deviceOf(t, s, c.ID, "fp-a@example.com")
	for d := range 3 {
		at := now.Add(-time.Duration(d) * 24 * time.Hour)
		m := Message{UUID: "u" + at.String(), CompanyID: c.ID, DeviceID: dev.ID, Channel: "sms", Phone: "+15550100001", Text: "hi", SIMSlot: "SIM1", ClientID: at.String()}
		if _, _, err := s.StoreInbound(&m, func() time.Time { return at }, nil); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PruneStorageCounters(now.Add(-24 * time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("got %d pruned (%v), want 1 (the day before yesterday)", n, err)
	}
	for d, want := range []bool{true, true, false} {
		used, _ := s.StorageUsed(c.ID, now.Add(-time.Duration(d)*24*time.Hour))
		if (used > 0) != want {
			t.Errorf("%d days ago: %d bytes counted, want kept %v", d, used, want)
		}
	}
}
