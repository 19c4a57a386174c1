package cluster

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/retention"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/store/conformance"
)

// The links of dead nodes that this node took over are remembered for the
// jobs' life, not the node's: past JobLife their entries are dropped (at
// most one scan an hour), the failover holds nothing back for them, and a
// device whose dead node's link ended that long ago is not taken over again.
func TestTakenOverLinksForgottenAfterJobLife(t *testing.T) {
	t.Parallel()
	const live, jobLife = 10 * time.Second, 48 * time.Hour
	clock := testclock.New(time.Now())
	st, g, url := gatewayWith(t, GatewayConfig{Live: live, JobLife: jobLife, Now: clock.Now}, "a", "b")
	c, _ := conformance.Company(t, st)
	exec := sqlExec(t, url)
	// held answers the queue place up to which the failover may not move
	// the device's jobs here, and whether it may move any.
	held := func(fp string, id uint64) (upTo uint64, moves bool) {
		t.Helper()
		if err := g.HoldDevice(fp, id, func(u uint64, _ bool) error { upTo, moves = u, true; return nil }); err != nil {
			t.Fatal(err)
		}
		return upTo, moves
	}
	remembered := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.orphans)
	}

	// Jobs were queued before b died: the sequence has moved.
	exec(`SELECT nextval('queue_places') FROM generate_series(1, 3)`)
	place, err := st.MessageSequence()
	if err != nil || place == 0 {
		t.Fatalf("queue place %d (%v), want above 0", place, err)
	}
	// One device linked on b when it died (the sweep ends its link), one
	// whose link ended cleanly on b before (the failover takes it over).
	ended := conformance.Device(t, st, c.ID, "forget-open")
	if _, err := st.ClaimLink(ended.ID, "b"); err != nil {
		t.Fatal(err)
	}
	gone := conformance.Device(t, st, c.ID, "forget-gone")
	e, err := st.ClaimLink(gone.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EndLink(gone.ID, e); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'b'`)
	g.sweep()
	for _, d := range []struct {
		fp string
		id uint64
	}{{ended.Fingerprint, ended.ID}, {gone.Fingerprint, gone.ID}} {
		if upTo, moves := held(d.fp, d.id); !moves || upTo != place {
			t.Errorf("%s taken over: moves %v up to %d, want held up to %d", d.fp, moves, upTo, place)
		}
		if g.OfflineSince(d.fp, d.id).IsZero() {
			t.Errorf("%s taken over, yet not offline since then", d.fp)
		}
	}
	if n := remembered(); n != 2 {
		t.Fatalf("remembered %d links of the dead node, want 2", n)
	}

	// Within the jobs' life both are kept, and the scan runs at most once
	// an hour: just past JobLife, the scan a minute before still stands.
	clock.Advance(jobLife - time.Minute)
	g.sweep()
	clock.Advance(2 * time.Minute)
	g.sweep()
	if n := remembered(); n != 2 {
		t.Fatalf("remembered %d links within the hour of the last scan, want 2", n)
	}
	clock.Advance(retention.ScanEvery)
	g.sweep()
	if n := remembered(); n != 0 {
		t.Fatalf("remembered %d links past the jobs' life, want none", n)
	}

	// The database's clock has moved as far: every link b held ended more
	// than JobLife ago. Nothing is held back, and neither device is taken
	// over afresh (which would hold the jobs queued since until they expire).
	exec(`UPDATE device_links SET ended_at = ended_at - make_interval(secs => $1) WHERE device_id IN ($2, $3)`,
		(jobLife + time.Hour).Seconds(), int64(ended.ID), int64(gone.ID))
	for _, d := range []struct {
		fp string
		id uint64
	}{{ended.Fingerprint, ended.ID}, {gone.Fingerprint, gone.ID}} {
		if upTo, moves := held(d.fp, d.id); !moves || upTo != 0 {
			t.Errorf("%s past the jobs' life: moves %v up to %d, want every job", d.fp, moves, upTo)
		}
		if !g.OfflineSince(d.fp, d.id).IsZero() {
			t.Errorf("%s past the jobs' life: offline since %v, want no end time", d.fp, g.OfflineSince(d.fp, d.id))
		}
	}
	if n := remembered(); n != 0 {
		t.Errorf("remembered %d links after the failover looked again, want none", n)
	}
}
