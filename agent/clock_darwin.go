package agent

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootClock is macOS's CLOCK_MONOTONIC, which counts the time the Mac
// slept (Go's monotonic clock does not).
func bootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return wallSince()
	}
	return time.Duration(ts.Nano())
}
