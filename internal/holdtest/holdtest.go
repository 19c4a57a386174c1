// Package holdtest is for tests: a failover's hold of a device
// (gateway.Hub's HoldDevice) that the test keeps open while it looks at
// what the device's link, and the requests about it, do meanwhile.
package holdtest

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
)

// Holder is what holds a device for a failover: gateway.Hub, or the API's
// view of it.
type Holder interface {
	HoldDevice(fingerprint string, deviceID uint64, fn func(dispatchedUpTo uint64, online bool) error) error
}

// Hold has a failover's hold of the device begin on h (the hub holds it:
// its link's pump waits until the hold ends) and returns once it has
// begun, held open until the test calls let (or ends). let returns once
// the hold ended, failing the test when HoldDevice did.
func Hold(t testing.TB, h Holder, fingerprint string, deviceID uint64) (let func()) {
	t.Helper()
	holding, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- h.HoldDevice(fingerprint, deviceID, func(uint64, bool) error {
			close(holding)
			<-release
			return nil
		})
	}()
	released := false
	let = func() {
		if !released {
			released = true
			close(release)
			if err := <-held; err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(let)
	select {
	case <-holding:
	case err := <-held: // HoldDevice returned without running fn
		released = true
		t.Fatalf("the hold did not begin: %v", err)
	case <-time.After(poll.Timeout):
		t.Fatal("the hold did not begin")
	}
	return let
}
