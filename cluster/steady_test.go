package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store/conformance"
)

// A clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A node's beat is current right after it was written, a run however
// short (the others read it live), and no longer after a failed beat or
// once more than half the window passed without one.
func TestBeatsCurrent(t *testing.T) {
	const live, every = 10 * time.Second, 2 * time.Second
	c := &clock{t: time.Unix(1e9, 0)}
	b := NewBeats(live, every, c.now)
	if b.Current() {
		t.Fatal("current before any beat")
	}
	b.Beat(true)
	if !b.Current() || b.Steady() {
		t.Fatalf("one beat: current %v steady %v, want current, not steady", b.Current(), b.Steady())
	}
	c.add(live/2 + time.Second)
	if b.Current() {
		t.Fatal("current more than half a window after the last beat")
	}
	b.Beat(true)
	b.Beat(false)
	if b.Current() {
		t.Fatal("current after a failed beat")
	}
}

// A node's beats are steady once they ran unbroken for the live window, and
// no longer after a beat that failed, a gap of half the window between two
// beats (a database that did not answer, though no beat failed), or when
// they stopped.
func TestBeatsSteadyOnlyAfterAnUnbrokenWindow(t *testing.T) {
	const live, every = 10 * time.Second, 2 * time.Second
	c := &clock{t: time.Unix(1e9, 0)}
	b := NewBeats(live, every, c.now)
	beats := func(n int) {
		for range n {
			b.Beat(true)
			c.add(every)
		}
	}
	if b.Steady() {
		t.Fatal("steady before any beat")
	}
	beats(5) // 0s to 8s: a run of 8 s
	if b.Steady() {
		t.Fatal("steady after a run shorter than the window")
	}
	beats(1) // the run reaches 10 s
	if !b.Steady() {
		t.Fatal("not steady after a run of the whole window")
	}

	b.Beat(false)
	if b.Steady() {
		t.Fatal("steady after a failed beat")
	}
	beats(5)
	if b.Steady() {
		t.Fatal("steady again before a new run of the window")
	}
	beats(1)
	if !b.Steady() {
		t.Fatal("not steady after a new run of the window")
	}

	// A beat that hung for 9 s and then was written: the database did not
	// answer meanwhile, for anyone.
	c.add(9 * time.Second)
	b.Beat(true)
	if b.Steady() {
		t.Fatal("steady after a gap of 9 s between beats")
	}
	beats(6)
	if !b.Steady() {
		t.Fatal("not steady after a run of the window past the gap")
	}
	c.add(live) // the beats stopped
	if b.Steady() {
		t.Fatal("steady while no beat is written")
	}
}

// After the database was gone for everyone, a node's sweep does not end the
// links of the other nodes, whose beats aged with its own: the devices stay
// online everywhere. Once its own beats ran steady through the window, a
// node that is still silent is dead, and its links end.
func TestSweepEndsNoLinksUntilItsOwnBeatsAreSteady(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	ctx := context.Background()
	st, g, url := gatewayOnNodes(t, live, 0, "a", "b")
	var steady bool
	g.cfg.Steady = func() bool { return steady }
	c, _ := conformance.Company(t, st)
	d := conformance.Device(t, st, c.ID, "steady-phone")
	if _, err := st.ClaimLink(d.ID, "b"); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	// Both nodes were silent: the database was gone. a beats first.
	if _, err := db.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '12 seconds'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() WHERE name = 'a'`); err != nil {
		t.Fatal(err)
	}
	g.sweep()
	var open bool
	if err := db.QueryRow(ctx, `SELECT ended_at IS NULL FROM device_links WHERE device_id = $1`, int64(d.ID)).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if !open || !g.OfflineSince(d.Fingerprint, d.ID).IsZero() {
		t.Fatal("the sweep of a node whose own beats just broke ended the link of b")
	}
	// b beats again: its device is online on a.
	if _, err := db.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() WHERE name = 'b'`); err != nil {
		t.Fatal(err)
	}
	if !g.Online(d.Fingerprint, d.ID) {
		t.Fatal("the device linked on b reads offline on a once b beats again")
	}

	// b falls silent while a's beats are steady: b is dead.
	if _, err := db.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '12 seconds' WHERE name = 'b'`); err != nil {
		t.Fatal(err)
	}
	steady = true
	g.sweep()
	if g.OfflineSince(d.Fingerprint, d.ID).IsZero() || g.Online(d.Fingerprint, d.ID) {
		t.Fatal("b is silent through a's steady window, yet its link was not ended")
	}
}
