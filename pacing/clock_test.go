package pacing

import (
	"time"

	"github.com/simrelay/simrelay/internal/testclock"
)

// newFakeClock is the injected clock of the tests: time moves only when a
// test says so, so nothing depends on how fast the machine runs.
func newFakeClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 11, 22, 10, 4, 5, 0, time.UTC))
}
