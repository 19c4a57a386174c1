package account_test

import (
	"testing"

	"github.com/simrelay/simrelay/internal/pgtest"
)

// TestMain stops the PostgreSQL cluster the shared-count tests start.
func TestMain(m *testing.M) { pgtest.Main(m) }
