package postgres

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// The gateway's reads of device_links: linked by device id only through
// a live node, one device or many at once; a dead node's links ended once, by one sweeping node, which
// takes them over; and a held row makes a claim on another store wait
// until the hold ends.
func TestGatewayLinks(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s, other := openURL(t, url, Options{}), openURL(t, url, Options{})
	const live = 10 * time.Second
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "gw-phone")
	registerNodes(t, s, live, "a", "b")
	if _, ok, err := s.LinkedSince(d.ID, live); err != nil || ok {
		t.Fatalf("never linked: ok %v (%v)", ok, err)
	}
	if _, err := s.ClaimLink(d.ID, "a"); err != nil {
		t.Fatal(err)
	}
	if seen, ok, err := s.LinkedSince(d.ID, live); err != nil || !ok || seen.IsZero() {
		t.Fatalf("linked on a: %v %v (%v)", seen, ok, err)
	}
	never := conformance.Device(t, s, c.ID, "gw-never")
	if many, err := s.LinkedSinceMany([]uint64{d.ID, never.ID, 1 << 40}, live); err != nil || len(many) != 1 || many[d.ID].IsZero() {
		t.Fatalf("linked of three, one on a: %v (%v), want gw-phone alone", many, err)
	}
	if devs, err := s.EndOrphanLinks(live, 10, "b"); err != nil || len(devs) != 0 {
		t.Fatalf("no dead node yet: %v (%v)", devs, err)
	}

	// a dies: b ends its link, once, and holds it.
	if _, err := s.pool.Exec(s.ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.LinkedSince(d.ID, live); ok {
		t.Error("linked through a dead node")
	}
	if many, err := s.LinkedSinceMany([]uint64{d.ID}, live); err != nil || len(many) != 0 {
		t.Errorf("linked of the device on a dead node: %v (%v), want none", many, err)
	}
	devs, err := s.EndOrphanLinks(live, 10, "b")
	if err != nil || len(devs) != 1 || devs[0].Fingerprint != "gw-phone" {
		t.Fatalf("orphans ended: %v (%v), want gw-phone", devs, err)
	}
	if devs, err := other.EndOrphanLinks(live, 10, "a"); err != nil || len(devs) != 0 {
		t.Fatalf("ended twice: %v (%v)", devs, err)
	}
	if _, err := s.pool.Exec(s.ctx, `UPDATE device_links SET ended_at = now() - interval '1 hour' WHERE device_id = $1`, int64(d.ID)); err != nil {
		t.Fatal(err)
	}
	if err := s.HoldLink(d.ID, live, func(node string, _ uint64, open, nodeLive bool, endedAgo time.Duration) error {
		if node != "b" || open || !nodeLive {
			t.Errorf("held: node %q open %v live %v, want b's ended link", node, open, nodeLive)
		}
		if endedAgo < time.Hour || endedAgo > 2*time.Hour {
			t.Errorf("held: the link ended %v ago, want an hour", endedAgo)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A device never linked: its hold inserts a row that a claim waits on.
	d2 := conformance.Device(t, s, c.ID, "gw-new")
	claimed := make(chan uint64, 1)
	err = s.HoldLink(d2.ID, live, func(node string, _ uint64, open, _ bool, _ time.Duration) error {
		if node != "" || open {
			t.Errorf("never linked: node %q open %v", node, open)
		}
		go func() {
			e, err := other.ClaimLink(d2.ID, "a")
			if err != nil {
				t.Error(err)
			}
			claimed <- e
		}()
		// The claim waits on the held row's lock.
		poll.Within(t, 10*time.Second, "the claim waits on the held row", func() bool {
			var n int
			_ = s.pool.QueryRow(s.ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO device_links%'`).Scan(&n)
			return n == 1
		})
		select {
		case e := <-claimed:
			t.Errorf("claimed epoch %d while held", e)
		default:
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-claimed:
		if e != 1 {
			t.Errorf("first claim after the hold: epoch %d, want 1", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the claim still waits after the hold ended")
	}
}

// A node whose link another node ended while it was silent records it open
// again, on itself, only while its epoch is still the device's newest: a
// link claimed since (a newer epoch) is not reopened, nor one that is open.
func TestReopenLinks(t *testing.T) {
	t.Parallel()
	s := openURL(t, migrated(t), Options{})
	const live = 10 * time.Second
	c, _ := conformance.Company(t, s)
	registerNodes(t, s, live, "a", "b")
	kept, moved := conformance.Device(t, s, c.ID, "ro-kept"), conformance.Device(t, s, c.ID, "ro-moved")
	epochs := map[uint64]uint64{}
	for _, d := range []uint64{kept.ID, moved.ID} {
		e, err := s.ClaimLink(d, "a")
		if err != nil {
			t.Fatal(err)
		}
		epochs[d] = e
	}
	if got, err := s.ReopenLinks("a", epochs); err != nil || len(got) != 0 {
		t.Fatalf("open links reopened: %v (%v), want none", got, err)
	}
	if _, err := s.pool.Exec(s.ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'a'`); err != nil {
		t.Fatal(err)
	}
	if devs, err := s.EndOrphanLinks(live, 10, "b"); err != nil || len(devs) != 2 {
		t.Fatalf("b ends a's links: %v (%v), want both", devs, err)
	}
	if _, err := s.ClaimLink(moved.ID, "b"); err != nil { // the phone linked to b since
		t.Fatal(err)
	}
	if ok, err := s.NodeBeat("a", "a"); err != nil || !ok { // a runs again
		t.Fatalf("a's beat: %v (%v)", ok, err)
	}
	got, err := s.ReopenLinks("a", epochs)
	if err != nil || len(got) != 1 || got[0] != kept.ID {
		t.Fatalf("reopened %v (%v), want %d alone", got, err, kept.ID)
	}
	if node, ok, err := s.Linked(kept.ID, live); err != nil || !ok || node != "a" {
		t.Errorf("the reopened link: on %q open %v (%v), want open on a", node, ok, err)
	}
	if node, ok, err := s.Linked(moved.ID, live); err != nil || !ok || node != "b" {
		t.Errorf("the link claimed since: on %q open %v (%v), want open on b", node, ok, err)
	}
}

// A node's name taken by a new process (its previous run killed, its beat
// aged): the links recorded under the name are the previous run's, ended
// as the new one registers, not open on it for ever; and the previous run,
// should it stop after finding its name taken, leaves the new one's links
// open.
func TestNodeNameTakenOverEndsThePreviousRunsLinks(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s := openURL(t, url, Options{})
	const live = 10 * time.Second
	c, _ := conformance.Company(t, s)
	if err := s.RegisterNode(Node{Name: "a", Instance: "a", Bus: true}, live); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterNode(Node{Name: "b", Instance: "b-first", Bus: true}, live); err != nil {
		t.Fatal(err)
	}
	before := conformance.Device(t, s, c.ID, "nt-before")
	if _, err := s.ClaimLink(before.ID, "b"); err != nil {
		t.Fatal(err)
	}
	onA := conformance.Device(t, s, c.ID, "nt-on-a")
	if _, err := s.ClaimLink(onA.ID, "a"); err != nil {
		t.Fatal(err)
	}
	// b's first run is killed; its beat ages; b starts again.
	if _, err := s.pool.Exec(s.ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'b'`); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterNode(Node{Name: "b", Instance: "b-second", Bus: true}, live); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LinkedSince(before.ID, live); err != nil || ok {
		t.Errorf("the previous run's link: linked %v (%v), want ended as b registered again", ok, err)
	}
	if _, ok, err := s.LinkedSince(onA.ID, live); err != nil || !ok {
		t.Errorf("a's link: linked %v (%v), want open", ok, err)
	}
	after := conformance.Device(t, s, c.ID, "nt-after")
	if _, err := s.ClaimLink(after.ID, "b"); err != nil {
		t.Fatal(err)
	}
	// The first run was paused, not dead: it wakes, finds its name taken
	// (its beat answers false) and stops.
	if ok, err := s.NodeBeat("b", "b-first"); err != nil || ok {
		t.Fatalf("the first run's beat: %v (%v), want refused", ok, err)
	}
	if err := s.LeaveNode("b", "b-first"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LinkedSince(after.ID, live); err != nil || !ok {
		t.Errorf("the second run's link after the first run left: linked %v (%v), want open", ok, err)
	}
}

// A dead node's link ended by another's sweep leaves the device last seen
// at the dead node's last beat (the link was live then), as a read through
// another node showed it while the node lived: not at the link's hello,
// which for a phone linked for days was days before. A later last seen
// stored already stays.
func TestOrphanLinkKeepsItsLastSeen(t *testing.T) {
	t.Parallel()
	s := openURL(t, migrated(t), Options{})
	const live = 10 * time.Second
	c, _ := conformance.Company(t, s)
	registerNodes(t, s, live, "a", "b")
	hello := time.Now().Add(-72 * time.Hour).UTC()
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	stale, fresh := conformance.Device(t, s, c.ID, "ls-stale"), conformance.Device(t, s, c.ID, "ls-fresh")
	for d, at := range map[uint64]time.Time{stale.ID: hello, fresh.ID: later} {
		if _, err := s.UpdateDeviceByID(c.ID, d, func(d *store.Device) error { d.LastSeenAt = at; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimLink(d, "a"); err != nil {
			t.Fatal(err)
		}
	}
	var beat time.Time
	if err := s.pool.QueryRow(s.ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'a' RETURNING seen_at`).Scan(&beat); err != nil {
		t.Fatal(err)
	}
	devs, err := s.EndOrphanLinks(live, 10, "b")
	if err != nil || len(devs) != 2 {
		t.Fatalf("b ends a's links: %v (%v), want both", devs, err)
	}
	want := map[string]time.Time{"ls-stale": beat, "ls-fresh": later}
	for _, d := range devs {
		if !d.LastSeenAt.Equal(want[d.Fingerprint]) {
			t.Errorf("%s answered last seen %v, want %v", d.Fingerprint, d.LastSeenAt, want[d.Fingerprint])
		}
		got, err := s.Device(d.Fingerprint)
		if err != nil {
			t.Fatal(err)
		}
		if !got.LastSeenAt.Equal(want[d.Fingerprint]) {
			t.Errorf("%s stored last seen %v, want %v", d.Fingerprint, got.LastSeenAt, want[d.Fingerprint])
		}
	}
}

// A device still reported online whose last link ended on a node that is
// not live (its offline check was in that node's memory) is answered by
// LeftOnline; one whose link ended on a live node (which holds the check),
// one linked, one reported offline or deleted is not.
func TestLeftOnline(t *testing.T) {
	t.Parallel()
	s := openURL(t, migrated(t), Options{})
	const live = 10 * time.Second
	c, _ := conformance.Company(t, s)
	registerNodes(t, s, live, "a", "b")
	dev := func(fp, node string, open bool, presence string) store.Device {
		d := conformance.Device(t, s, c.ID, fp)
		if _, err := s.UpdateDeviceByID(c.ID, d.ID, func(d *store.Device) error {
			d.Health = &store.DeviceHealth{Presence: presence}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		e, err := s.ClaimLink(d.ID, node)
		if err != nil {
			t.Fatal(err)
		}
		if !open {
			if err := s.EndLink(d.ID, e); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	left := dev("lo-left", "a", false, store.PresenceOnline)
	dev("lo-live-node", "b", false, store.PresenceOnline)
	dev("lo-linked", "a", true, store.PresenceOnline)
	dev("lo-offline", "a", false, store.PresenceOffline)
	deleted := dev("lo-deleted", "a", false, store.PresenceOnline)
	if _, err := s.pool.Exec(s.ctx, `UPDATE devices SET deleted_at = now() WHERE id = $1`, int64(deleted.ID)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LeftOnline(live, 10); err != nil || len(got) != 0 {
		t.Fatalf("every node live: %v (%v), want none", got, err)
	}
	if _, err := s.pool.Exec(s.ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'a'`); err != nil {
		t.Fatal(err)
	}
	got, err := s.LeftOnline(live, 10)
	if err != nil || len(got) != 1 || got[0].ID != left.ID {
		t.Fatalf("a dead: %v (%v), want %s alone", got, err, left.Fingerprint)
	}
}

// registerNodes registers live nodes of the given names (each its own
// instance, on the bus) with s.
func registerNodes(t *testing.T, s *Store, live time.Duration, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := s.RegisterNode(Node{Name: n, Instance: n, Bus: true}, live); err != nil {
			t.Fatal(err)
		}
	}
}
