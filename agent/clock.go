package agent

import "time"

// The server's clock (PROTOCOL.md 9.5) is its welcome.server_time plus the
// time passed since the welcome came, measured on the device's boot clock
// (bootClock): a clock that setting the date does not move, and that runs
// while the device sleeps. Measured on the wall clock, as local time plus
// an offset taken at the welcome, a date set after the welcome (a
// Raspberry Pi without a battery clock starts at the date it stopped, and
// NTP sets the right one a little later) would move the server's clock by
// as much, for as long as the link lasts: every job failed as expired, or
// none expiring.

// clocks are what the agent reads time from, for the server's clock.
type clocks struct {
	wall func() time.Time     // the date, before any welcome (time.Now)
	boot func() time.Duration // time since an arbitrary point, sleep included (bootClock)
}

func realClocks() clocks { return clocks{wall: time.Now, boot: bootClock} }

// wallSince is the fallback boot clock where the system has none: the
// wall clock, as the agent read it before.
func wallSince() time.Duration { return time.Duration(time.Now().UnixNano()) }
