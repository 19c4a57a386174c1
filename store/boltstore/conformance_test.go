package boltstore

import (
	"testing"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestConformance runs every suite of package conformance on bbolt.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.All(t, func(t *testing.T, budget int64) store.Backend {
		s, err := Open(t.TempDir(), Options{CompanyDailyStorage: budget})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
