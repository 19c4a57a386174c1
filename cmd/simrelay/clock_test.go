package main

import (
	"testing"
	"time"
)

// skewedDB is a database whose server's clock is an hour ahead of this
// machine's.
type skewedDB struct{ backend }

func (skewedDB) DatabaseTime() (time.Time, error) { return time.Now().Add(time.Hour), nil }

// An admin command on PostgreSQL stamps by the database server's clock, as
// the nodes time their work (a plan's period, a deletion's events); on the
// embedded store, by the machine's own.
func TestAdminCommandsUseTheDatabaseClock(t *testing.T) {
	t.Parallel()
	if d := time.Until(backendClock(skewedDB{})()); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("on a database an hour ahead: the command's clock is %s off this machine's, want an hour", d)
	}
	var embedded struct{ backend } // no DatabaseTime: the embedded store
	if d := time.Until(backendClock(embedded)()); d > time.Second || d < -time.Second {
		t.Errorf("on the embedded store: %s off this machine's clock, want none", d)
	}
}
