package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/multitracer"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestPoolMemberRacesItsDeviceDeletion: a PutPool that adds a device as a
// member (a new pool, and an edit of one), held after it read the device
// live, and a DeleteDevice of that device meanwhile. No pool keeps a member
// whose device is deleted, whichever commits first: the pool holds its new
// members' devices until its commit, so the deletion waits for it and then
// takes the device out, as it does of every pool it is in. Unheld, the
// deletion committed first (it found the device in no pool) and the pool
// was written with the deleted device as a member. A deletion held before
// its commit makes the pool wait, then refuse the device as gone.
func TestPoolMemberRacesItsDeviceDeletion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		held      string // the statement before which the first is held
		edit      bool
		deleteFst bool // the deletion is held, not the pool's write
	}{
		{"new pool", "INSERT INTO pools", false, false},
		{"edit", "UPDATE pools SET name_key", true, false},
		{"deletion first, new pool", "INSERT INTO activity", false, true},
		{"deletion first, edit", "INSERT INTO activity", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := migrated(t)
			dl := &deadlocks{}
			s := openURL(t, url, Options{Tracer: dl})
			pause := newPauseAt(tc.held)
			held := openURL(t, url, Options{Tracer: multitracer.New(sqlTracer(pause.check), dl)}) // another node, held once
			t.Cleanup(pause.free)
			c, _ := conformance.Company(t, s)
			conformance.Device(t, s, c.ID, "keep")
			conformance.Device(t, s, c.ID, "gone")
			var poolID uint64
			if tc.edit {
				p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
					return store.PoolInput{Name: "Sales", Strategy: store.PoolRoundRobin, Members: []store.PoolMemberInput{{Device: "keep", SIMSlot: "SIM1"}}}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				poolID = p.ID
			}
			putter, deleter := held, s
			if tc.deleteFst {
				putter, deleter = s, held
			}
			put, deleted := make(chan error, 1), make(chan error, 1)
			putPool := func() {
				_, err := putter.PutPool(c.ID, poolID, conformance.T0, func(store.Pool) (store.PoolInput, error) {
					return store.PoolInput{Name: "Sales", Strategy: store.PoolRoundRobin,
						Members: []store.PoolMemberInput{{Device: "keep", SIMSlot: "SIM1"}, {Device: "gone", SIMSlot: "SIM1"}}}, nil
				})
				put <- err
			}
			deleteDevice := func() {
				_, err := deleter.DeleteDevice(c.ID, "gone", conformance.T0)
				deleted <- err
			}
			first, second, secondDone := putPool, deleteDevice, deleted
			if tc.deleteFst {
				first, second, secondDone = deleteDevice, putPool, put
			}
			pause.race(t, s, first, second, secondDone)
			if err := <-deleted; err != nil {
				t.Fatalf("DeleteDevice: %v", err)
			}
			err := <-put
			var me *store.PoolMemberError
			switch {
			case tc.deleteFst && !(errors.As(err, &me) && me.Index == 1 && errors.Is(me.Err, store.ErrDeviceGone)):
				t.Fatalf("PutPool after the deletion: %v, want member 1's device gone", err)
			case !tc.deleteFst && err != nil:
				t.Fatalf("PutPool: %v", err)
			}
			pools, err := s.Pools(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pools {
				for _, m := range p.Members {
					if m.Device == "gone" {
						t.Errorf("pool %q keeps member %d of the deleted device %q", p.Name, m.ID, m.Device)
					}
				}
			}
			if n := dl.n.Load(); n != 0 {
				t.Errorf("the database broke %d deadlocks between the pool and the deletion, in %q", n, dl.sql)
			}
		})
	}
}
