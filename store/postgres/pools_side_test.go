package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/multitracer"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestPoolSendsCommitSideBySide: a send through a round-robin pool of
// three, held inside its transaction after it took its member (before its
// writes), and a second send through the pool on another node meanwhile.
// The second takes the next member and commits without waiting for the
// first; the turns stay exact: the first took A, the second B, and the two
// after them take C and then A. Before, every send through a pool locked
// the pool's turn (and every member's device) until its commit, so the
// second waited for the first.
func TestPoolSendsCommitSideBySide(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	dl := &deadlocks{}
	s := openURL(t, url, Options{Tracer: dl})
	pause := newPauseAt("INSERT INTO plan_usage")
	held := openURL(t, url, Options{Tracer: multitracer.New(sqlTracer(pause.check), dl)}) // another node, held once
	t.Cleanup(pause.free)
	c, _ := conformance.Company(t, s)
	for _, fp := range []string{"side-a", "side-b", "side-c"} {
		conformance.Device(t, s, c.ID, fp)
	}
	if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "side", Strategy: store.PoolRoundRobin, Members: []store.PoolMemberInput{
			{Device: "side-a", SIMSlot: "SIM1"}, {Device: "side-b", SIMSlot: "SIM1"}, {Device: "side-c", SIMSlot: "SIM1"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return conformance.T0 }
	n := 0
	send := func(st *Store) (string, error) {
		n++
		m := store.Message{UUID: fmt.Sprintf("side-%d", n), CompanyID: c.ID, Pool: "side", Channel: "sms",
			Phone: fmt.Sprintf("+1555010%04d", n), Text: "hi"}
		out, _, err := st.Enqueue(&m, store.IdempotencyKey{}, clock, nil, nil)
		return out.Device, err
	}
	type result struct {
		dev string
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		dev, err := send(held)
		first <- result{dev, err}
	}()
	<-pause.reached
	go func() {
		dev, err := send(s)
		second <- result{dev, err}
	}()
	waitLocksOrEnd(t, s, 1, func() bool { return len(second) > 0 })
	if len(second) == 0 {
		pause.free()
		t.Fatal("the second send through the pool waits for a lock the first holds")
	}
	pause.free()
	r1, r2 := <-first, <-second
	if r1.err != nil || r1.dev != "side-a" || r2.err != nil || r2.dev != "side-b" {
		t.Fatalf("the held send on %s (%v), the other on %s (%v): want side-a and side-b", r1.dev, r1.err, r2.dev, r2.err)
	}
	for _, want := range []string{"side-c", "side-a"} {
		if dev, err := send(s); err != nil || dev != want {
			t.Fatalf("the next send on %s (%v), want %s", dev, err, want)
		}
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks, in %q", n, dl.sql)
	}
}
