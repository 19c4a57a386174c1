//go:build !linux && !darwin

package agent

import "time"

// bootClock is the wall clock where no boot clock is read.
func bootClock() time.Duration { return wallSince() }
