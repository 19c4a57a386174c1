// Package poll is for tests: wait for a condition with a deadline rather
// than sleep and hope.
package poll

import (
	"testing"
	"time"
)

// Timeout is how long Until waits.
const Timeout = 10 * time.Second

// Until checks cond every few milliseconds and fails the test when it has
// not held within Timeout.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is Until with its own deadline, for conditions that take a real
// binary's restart or a device's reconnect backoff; it asserts no speed.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
