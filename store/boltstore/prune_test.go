package boltstore

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store/conformance"
)

// PruneTokenFamilies takes the user_families entries of the families it
// drops with them (the suite's PruneTokens case holds what it drops).
func TestPruneTokenFamiliesIndex(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	_, u := conformance.Company(t, s)
	if err := s.StartRefreshFamily([]byte("h-done"), RefreshToken{UserID: u.ID, Family: "done", ExpiresAt: now.Add(-48 * time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.StartRefreshFamily([]byte("h-live"), RefreshToken{UserID: u.ID, Family: "live", ExpiresAt: now.Add(time.Hour)}, now); err != nil {
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
