package agent

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootClock is CLOCK_BOOTTIME (Linux, Android): it counts the time the
// device slept, which CLOCK_MONOTONIC, Go's monotonic clock, does not (a
// phone's CPU sleeps between the server's pings).
func bootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return wallSince()
	}
	return time.Duration(ts.Nano())
}
