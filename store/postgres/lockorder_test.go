package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestPoolSendsLockDevicesInOrder: two sends through different pools that
// share devices A and B (ids rising A, B, C) look at them in opposite
// orders: the first, a single send through pool one (A, C, B), is refused
// A's and C's SIM by its check and takes B; the second, a bulk send
// through pool two (B, A), is refused B's SIM and takes A. A held lock on
// C makes the first wait there. Locking each device as its strategy looks
// at it and keeping it, the first would hold A and wait for C, then for B,
// which the second holds while it waits for A, and the database would
// break the deadlock. The single send lets each member it cannot use go
// before it looks at the next (a savepoint), so it waits for C holding no
// device, and the bulk send, which locks its members' devices in id order,
// runs on past it and commits while C is still held; the database breaks
// no deadlock.
func TestPoolSendsLockDevicesInOrder(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	url := migrated(t)
	s, other := openURL(t, url, Options{Tracer: dl}), openURL(t, url, Options{Tracer: dl}) // two nodes
	c, _ := conformance.Company(t, s)
	devs := map[string]store.Device{}
	for _, fp := range []string{"pool-a", "pool-b", "pool-c"} {
		devs[fp] = conformance.Device(t, s, c.ID, fp)
	}
	if a, b, cc := devs["pool-a"].ID, devs["pool-b"].ID, devs["pool-c"].ID; a >= b || b >= cc {
		t.Fatalf("device ids %d, %d, %d: want them rising", a, b, cc)
	}
	pool := func(name, slot string, fps ...string) {
		t.Helper()
		var members []store.PoolMemberInput
		for _, fp := range fps {
			members = append(members, store.PoolMemberInput{Device: fp, SIMSlot: slot})
		}
		if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, Members: members}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	pool("one", "SIM1", "pool-a", "pool-c", "pool-b")
	pool("two", "SIM2", "pool-b", "pool-a")
	refused := map[string]bool{"pool-a/SIM1": true, "pool-c/SIM1": true, "pool-b/SIM2": true}
	check := func(d store.Device, slot string) error {
		if refused[d.Fingerprint+"/"+slot] {
			return errors.New("refused by the test")
		}
		return nil
	}
	msg := func(poolName string) store.Message {
		return store.Message{UUID: "via-" + poolName, CompanyID: c.ID, Pool: poolName, Channel: "sms", Phone: "+15550100000", Text: "hi"}
	}
	clock := func() time.Time { return conformance.T0 }
	var got [2]store.Message
	var errs [2]error
	ctx := context.Background()
	hold, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // released below; this lets the send go on a failure
	if _, err := hold.Exec(ctx, lockDevice, int64(devs["pool-c"].ID)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m := msg("one")
		got[0], _, errs[0] = s.Enqueue(&m, store.IdempotencyKey{}, clock, check, nil)
	}()
	waitLocks(t, s, 1)
	out, _, err := other.EnqueueBulk([]store.Message{msg("two")}, store.IdempotencyKey{}, clock, check, nil)
	if errs[1] = err; len(out) == 1 {
		got[1] = out[0]
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	for i, want := range []string{"pool-b/SIM1", "pool-a/SIM2"} {
		if errs[i] != nil || got[i].Device+"/"+got[i].SIMSlot != want || got[i].Status != store.MsgQueued {
			t.Errorf("send %d: %s/%s %s (%v), want queued on %s", i, got[i].Device, got[i].SIMSlot, got[i].Status, errs[i], want)
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks between the sends, in %q", n, dl.sql)
	}
}

// TestFailoverTakesPoolTurnsFirst: a failover moves jobs of two pools off
// device X (ids rising X, B, A; pool one X and A, pool two X, B and A)
// beside a send through pool two, which takes pool two's member B and
// waits for B's device, held by another transaction. Opening each pool as
// its first job came, the failover would take pool one's turn, lock A for
// the job of pool one, and wait for pool two's member B, which the send
// holds while it waits for A once B's device is refused, and the database
// would break the deadlock; taking both pools' member rows first, in pool
// id order, and their devices after, the failover waits behind the send
// holding no device, and the database breaks none. The send lets B go
// when its check refuses it and takes the next turn, A, or, when the
// failover took A first, X, the turn after A.
func TestFailoverTakesPoolTurnsFirst(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	url := migrated(t)
	s, other := openURL(t, url, Options{Tracer: dl}), openURL(t, url, Options{Tracer: dl}) // two nodes
	c, _ := conformance.Company(t, s)
	devs := map[string]store.Device{}
	for _, fp := range []string{"fo-x", "fo-b", "fo-a"} {
		devs[fp] = conformance.Device(t, s, c.ID, fp)
	}
	if x, b, a := devs["fo-x"].ID, devs["fo-b"].ID, devs["fo-a"].ID; x >= b || b >= a {
		t.Fatalf("device ids %d, %d, %d: want them rising", x, b, a)
	}
	pools := map[string]uint64{}
	for _, p := range []struct {
		name string
		fps  []string
	}{{"one", []string{"fo-x", "fo-a"}}, {"two", []string{"fo-x", "fo-b", "fo-a"}}} {
		var members []store.PoolMemberInput
		for _, fp := range p.fps {
			members = append(members, store.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
		}
		got, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: p.name, Strategy: store.PoolRoundRobin, Members: members}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pools[p.name] = got.ID
	}
	clock := func() time.Time { return conformance.T0 }
	send := func(st *Store, poolName string, check store.DeviceCheck) (store.Message, error) {
		m := store.Message{UUID: fmt.Sprintf("fo-%s-%d", poolName, time.Now().UnixNano()), CompanyID: c.ID, Pool: poolName,
			Channel: "sms", Phone: "+15550100000", Text: "hi"}
		out, _, err := st.Enqueue(&m, store.IdempotencyKey{}, clock, check, nil)
		return out, err
	}
	for _, p := range []string{"one", "two"} { // each pool's first turn: X
		if m, err := send(s, p, nil); err != nil || m.Device != "fo-x" {
			t.Fatalf("send through %s: %s (%v), want it on fo-x", p, m.Device, err)
		}
	}
	notB := func(d store.Device, _ string) error {
		if d.Fingerprint == "fo-b" {
			return errors.New("refused by the test")
		}
		return nil
	}
	var sent store.Message
	var moved []store.Message
	var sendErr, moveErr error
	raceBehindLock(t, s, lockDevice, devs["fo-b"].ID,
		func() { sent, sendErr = send(s, "two", notB) },
		func() {
			moved, _, moveErr = other.Failover(store.FailoverInput{CompanyID: c.ID, DeviceID: devs["fo-x"].ID, Reason: store.FailoverOffline,
				Pools: map[uint64]bool{pools["one"]: true, pools["two"]: true}, Limit: 10}, notB, conformance.T0)
		})
	if sendErr != nil || sent.Device != "fo-a" && sent.Device != "fo-x" {
		t.Errorf("the send through two: %s (%v), want it on fo-a, or fo-x after the failover's move to fo-a", sent.Device, sendErr)
	}
	if moveErr != nil || len(moved) != 2 {
		t.Fatalf("the failover moved %d jobs (%v), want both", len(moved), moveErr)
	}
	for _, m := range moved {
		if m.Device != "fo-a" || m.Status != store.MsgQueued {
			t.Errorf("job %s moved to %s, %s: want queued on fo-a", m.UUID, m.Device, m.Status)
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks between the failover and the send, in %q", n, dl.sql)
	}
}

// TestFailoverLocksJobsInIDOrder: a failover moves device X's three jobs
// of a pool beside the deletion of X. The jobs' queue places run against
// their ids (the two older ones were scheduled and released later, the
// oldest last), and a held lock on the middle job makes both wait there,
// the failover first. Locking the jobs in queue order, the failover would
// hold the newest and then the middle one and wait for the oldest, which
// the deletion holds (its jobs in id order) while it waits for the middle
// one, and the database would break the deadlock; locked in id order,
// the deletion waits behind the failover and the database breaks none.
func TestFailoverLocksJobsInIDOrder(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	url := migrated(t)
	s, other := openURL(t, url, Options{Tracer: dl}), openURL(t, url, Options{Tracer: dl}) // two nodes
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	x, y := conformance.Device(t, s, c.ID, "jobs-x"), conformance.Device(t, s, c.ID, "jobs-y")
	p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "jobs", Strategy: store.PoolRoundRobin, Members: []store.PoolMemberInput{
			{Device: "jobs-x", SIMSlot: "SIM1"}, {Device: "jobs-y", SIMSlot: "SIM1"}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	onX := func(d store.Device, _ string) error {
		if d.ID != x.ID {
			return errors.New("refused by the test")
		}
		return nil
	}
	var jobs []store.Message
	for i, due := range []time.Duration{2 * time.Minute, time.Minute, 0} { // oldest due last, newest queued now
		m := store.Message{UUID: fmt.Sprintf("job-%d", i), CompanyID: c.ID, Pool: "jobs", Channel: "sms", Phone: "+15550100000", Text: "hi"}
		if due > 0 {
			m.SendAt = conformance.T0.Add(due)
		}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, onX, nil)
		if err != nil || got.DeviceID != x.ID {
			t.Fatalf("job %d on device %d (%v), want it on X", i, got.DeviceID, err)
		}
		jobs = append(jobs, got)
	}
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute} {
		if got, err := s.ReleaseDue(conformance.T0.Add(at), 10); err != nil || len(got) != 1 {
			t.Fatalf("release at +%s: %d jobs (%v), want one", at, len(got), err)
		}
	}
	places := make([]int64, len(jobs))
	for i, m := range jobs {
		if err := s.pool.QueryRow(ctx, "SELECT queue_place FROM messages WHERE id = $1", int64(m.ID)).Scan(&places[i]); err != nil {
			t.Fatal(err)
		}
	}
	if places[0] <= places[1] || places[1] <= places[2] {
		t.Fatalf("queue places %v of jobs in id order: want them falling", places)
	}
	now := conformance.T0.Add(time.Hour)
	var moved []store.Message
	var moveErr, delErr error
	raceBehindLock(t, s, "SELECT 1 FROM messages WHERE id = $1 FOR UPDATE", jobs[1].ID,
		func() {
			moved, _, moveErr = s.Failover(store.FailoverInput{CompanyID: c.ID, DeviceID: x.ID, Reason: store.FailoverOffline,
				Pools: map[uint64]bool{p.ID: true}, Limit: 10}, nil, now)
		},
		func() { _, delErr = other.DeleteDevice(c.ID, "jobs-x", now) })
	if moveErr != nil || len(moved) != 3 {
		t.Fatalf("the failover moved %d jobs (%v), want all three", len(moved), moveErr)
	}
	for i, m := range moved {
		if m.DeviceID != y.ID || m.Status != store.MsgQueued || (i > 0 && m.QueueSeq <= moved[i-1].QueueSeq) {
			t.Errorf("job %s moved to device %d, %s at place %d: want queued on Y, in queue order", m.UUID, m.DeviceID, m.Status, m.QueueSeq)
		}
	}
	if delErr != nil {
		t.Fatalf("delete device: %v", delErr)
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks between the failover and the deletion, in %q", n, dl.sql)
	}
}
