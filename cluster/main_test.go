package cluster

import (
	"testing"

	"github.com/simrelay/simrelay/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
