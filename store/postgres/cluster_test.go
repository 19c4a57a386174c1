package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Nodes on one database: a second one without a bus is refused whichever
// starts first, a live name is refused to another instance, and a node
// that stopped beating stops counting once its beat is older than the
// live window.
func TestRegisterNodeRules(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	a, b := open(t, url), open(t, url)
	const live = 10 * time.Second
	if err := a.RegisterNode(Node{Name: "a", Instance: "a1"}, live); err != nil {
		t.Fatalf("first node without a bus: %v", err)
	}
	for _, c := range []struct {
		n    Node
		want string
	}{
		{Node{Name: "b", Instance: "b1"}, `node "a" runs on this database without a bus, and so would this one`},
		{Node{Name: "b", Instance: "b1", Bus: true}, `node "a" runs on this database without a bus: restart it`},
		{Node{Name: "a", Instance: "a2", Bus: true}, `a live node is named "a" already`},
	} {
		err := b.RegisterNode(c.n, live)
		var refused *NodeRefused
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, c.want) {
			t.Errorf("register %+v: got %v, want a refusal saying %q", c.n, err, c.want)
		}
	}
	if err := a.RegisterNode(Node{Name: "a", Instance: "a1"}, live); err != nil {
		t.Errorf("the same instance registering again: %v", err)
	}
	var refused *NodeRefused
	if err := b.RegisterNode(Node{Name: "a", Instance: "a2"}, live); !errors.As(err, &refused) || !refused.NameLive {
		t.Errorf("another instance of a live name: got %v, want a refusal with NameLive", err)
	}
	if err := a.LeaveNode("a", "a1"); err != nil {
		t.Fatal(err)
	}
	// With buses, three nodes share the database; a fourth without one is refused.
	for i, n := range []string{"n1", "n2", "n3"} {
		if err := a.RegisterNode(Node{Name: n, Instance: n, Bus: true, Version: fmt.Sprintf("v1.%d", i)}, live); err != nil {
			t.Fatalf("node %s with a bus: %v", n, err)
		}
	}
	err := b.RegisterNode(Node{Name: "n4", Instance: "n4"}, live)
	if !errors.As(err, &refused) || refused.NameLive || !strings.Contains(refused.Reason, "this one has none") {
		t.Errorf("a node without a bus beside nodes with one: got %v", err)
	}
	nodes, err := b.LiveNodes(live)
	if err != nil || len(nodes) != 3 || nodes[0].Name != "n1" || !nodes[2].Bus || nodes[0].Version != "v1.0" || nodes[2].Version != "v1.2" {
		t.Fatalf("live nodes %+v (%v), want n1..n3 with buses and the versions they registered", nodes, err)
	}
	// A beat of another instance is refused; a node silent for longer
	// than the window stops counting.
	if ok, err := b.NodeBeat("n1", "other"); err != nil || ok {
		t.Errorf("beat of another instance: ok=%v err=%v, want refused", ok, err)
	}
	if ok, err := b.NodeBeat("n1", "n1"); err != nil || !ok {
		t.Errorf("beat: ok=%v err=%v", ok, err)
	}
	if _, err := a.pool.Exec(a.ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'n3'`); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := b.LiveNodes(live); len(nodes) != 2 {
		t.Errorf("live nodes after n3's beat aged: %+v, want n1 and n2", nodes)
	}
	if err := b.RegisterNode(Node{Name: "n3", Instance: "n3-restarted", Bus: true}, live); err != nil {
		t.Errorf("n3 restarted after its beat aged: %v", err)
	}
	seen, now, err := b.NodeSeen("n3")
	if err != nil || seen.IsZero() || now.Sub(seen) > live {
		t.Errorf("n3 seen %v at %v (%v)", seen, now, err)
	}
	if seen, _, err := b.NodeSeen("nobody"); err != nil || !seen.IsZero() {
		t.Errorf("unknown node seen %v (%v), want zero", seen, err)
	}
}

// Links: each claim fences out every older link of the device; the link
// is reported where its node is live, and orphaned when the node died.
func TestLinkEpochs(t *testing.T) {
	t.Parallel()
	s := open(t, migrated(t))
	const live = 10 * time.Second
	for _, n := range []string{"a", "c"} {
		if err := s.RegisterNode(Node{Name: n, Instance: n, Bus: true}, live); err != nil {
			t.Fatal(err)
		}
	}
	e1, err := s.ClaimLink(7, "a")
	if err != nil || e1 != 1 {
		t.Fatalf("first claim: epoch %d (%v), want 1", e1, err)
	}
	if node, ok, err := s.Linked(7, live); err != nil || !ok || node != "a" {
		t.Errorf("linked: %q %v %v, want a", node, ok, err)
	}
	e2, err := s.ClaimLink(7, "c")
	if err != nil || e2 != 2 {
		t.Fatalf("second claim: epoch %d (%v), want 2", e2, err)
	}
	// The old link's end does not end the new one.
	if err := s.EndLink(7, e1); err != nil {
		t.Fatal(err)
	}
	if node, ok, _ := s.Linked(7, live); !ok || node != "c" {
		t.Errorf("after the old link ended: %q %v, want c", node, ok)
	}
	if _, err := s.ClaimLink(8, "a"); err != nil {
		t.Fatal(err)
	}
	got, err := s.LinkEpochs([]uint64{7, 8, 9})
	if err != nil || len(got) != 2 || got[7] != 2 || got[8] != 1 {
		t.Errorf("epochs %v (%v), want 7:2 8:1", got, err)
	}
	// a dies: its link of device 8 is an orphan, c's link of 7 is not.
	if _, err := s.pool.Exec(s.ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Linked(8, live); ok {
		t.Error("device 8 linked through a dead node")
	}
	if ids, err := s.OrphanLinks(live); err != nil || len(ids) != 1 || ids[0] != 8 {
		t.Errorf("orphans %v (%v), want [8]", ids, err)
	}
	if err := s.EndLink(7, e2); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Linked(7, live); ok {
		t.Error("device 7 linked after its link ended")
	}
	// A clean stop ends the node's links.
	if _, err := s.ClaimLink(9, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.LeaveNode("c", "c"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.OrphanLinks(live); len(ids) != 1 || ids[0] != 8 {
		t.Errorf("orphans after c left %v, want [8] only", ids)
	}
}
