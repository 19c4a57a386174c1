package account_test

import (
	"testing"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store/boltstore"
)

// TestMain stops the PostgreSQL cluster the shared-count tests start.
func TestMain(m *testing.M) { pgtest.Main(m) }

// openStore opens a bbolt store in the test's directory, closed when the
// test ends.
func openStore(t *testing.T) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
