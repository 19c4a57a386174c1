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
