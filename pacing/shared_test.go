package pacing

import (
	"errors"
	"testing"
	"time"
)

// cluster are shared windows in memory whose database can be taken away.
type cluster struct {
	w    *Windows
	down bool
}

var errNoDatabase = errors.New("no database")

func (c *cluster) Take(key string) (Result, error) {
	if c.down {
		return Result{}, errNoDatabase
	}
	return c.w.Take(key), nil
}

// A shared count without a cluster (one node, the embedded store) counts
// in the node's memory and reports no failure.
func TestSharedWithoutClusterCountsInMemory(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	var failed []error
	s := Shared[ClusterWindows]{Local: New(Rate{2, time.Minute}, clock.Now), Failed: func(err error) { failed = append(failed, err) }}
	if s.Clustered() {
		t.Fatal("Clustered without a Cluster")
	}
	for i, want := range []bool{true, true, false} {
		res, inCluster := s.Take("k")
		if res.Allowed != want || inCluster {
			t.Fatalf("take %d: allowed %v, in cluster %v; want allowed %v, in memory", i+1, res.Allowed, inCluster, want)
		}
	}
	if len(failed) != 0 {
		t.Errorf("failures heard without a cluster: %v", failed)
	}
}

// With a cluster that answers, the cluster counts and the node's memory
// holds nothing; while it does not answer, Failed hears each error and the
// node's memory counts, on its own limit; once it answers again, the
// cluster counts again from where it was.
func TestSharedFallsBackToMemoryWhileClusterFails(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := &cluster{w: New(Rate{3, time.Minute}, clock.Now)}
	var failed []error
	s := Shared[ClusterWindows]{Local: New(Rate{3, time.Minute}, clock.Now), Cluster: c, Failed: func(err error) { failed = append(failed, err) }}
	if !s.Clustered() {
		t.Fatal("not Clustered with a Cluster")
	}
	if res, inCluster := s.Take("k"); !res.Allowed || !inCluster || res.Remaining != 2 {
		t.Fatalf("cluster up: %+v, in cluster %v; want allowed in the cluster, 2 left", res, inCluster)
	}
	if n := s.Local.Len(); n != 0 {
		t.Fatalf("cluster up: %d keys in memory, want 0", n)
	}
	c.down = true
	for i, want := range []bool{true, true, true, false} {
		res, inCluster := s.Take("k")
		if res.Allowed != want || inCluster {
			t.Fatalf("cluster down, take %d: allowed %v, in cluster %v; want allowed %v, in memory", i+1, res.Allowed, inCluster, want)
		}
	}
	if len(failed) != 4 || !errors.Is(failed[0], errNoDatabase) {
		t.Fatalf("cluster down: failures heard %v, want 4 of %v", failed, errNoDatabase)
	}
	c.down = false
	if res, inCluster := s.Take("k"); !res.Allowed || !inCluster || res.Remaining != 1 {
		t.Fatalf("cluster back: %+v, in cluster %v; want allowed in the cluster, 1 left", res, inCluster)
	}
	if len(failed) != 4 {
		t.Errorf("cluster back: %d failures heard, want still 4", len(failed))
	}
}

// Without Failed, a cluster's failure still falls back to memory; Fail
// tells Failed of a caller's own call's error.
func TestSharedFailWithoutFailed(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := Shared[ClusterWindows]{Local: New(Rate{1, time.Minute}, clock.Now), Cluster: &cluster{down: true}}
	if res, inCluster := s.Take("k"); !res.Allowed || inCluster {
		t.Fatalf("cluster down, no Failed: %+v, in cluster %v; want allowed in memory", res, inCluster)
	}
	s.Fail(errNoDatabase) // nothing to hear it: no panic
	var heard error
	s.Failed = func(err error) { heard = err }
	s.Fail(errNoDatabase)
	if heard != errNoDatabase {
		t.Errorf("Fail: Failed heard %v, want %v", heard, errNoDatabase)
	}
}

// refundable is a cluster that also takes a request back, and whose
// refunds can fail on their own.
type refundable struct {
	cluster
	refundDown bool
}

func (c *refundable) Refund(key string, end time.Time) error {
	if c.down || c.refundDown {
		return errNoDatabase
	}
	c.w.Refund(key, end)
	return nil
}

// TakeRefundable's refund takes the request back where it was counted: in
// the cluster while it answers, in the node's memory while it does not;
// a cluster's refused refund is heard and leaves the request counted.
func TestTakeRefundableRefundsWhereCounted(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := &refundable{cluster: cluster{w: New(Rate{2, time.Minute}, clock.Now)}}
	s := Shared[RefundableWindows]{Local: New(Rate{2, time.Minute}, clock.Now), Cluster: c}
	var refundsFailed []error
	refundFailed := func(err error) { refundsFailed = append(refundsFailed, err) }

	res, refund := TakeRefundable(s, "k", refundFailed)
	if !res.Allowed || res.Remaining != 1 {
		t.Fatalf("cluster up: %+v, want allowed, 1 left", res)
	}
	refund()
	if res := c.w.Take("k"); res.Remaining != 1 {
		t.Fatalf("after a cluster refund, the cluster's next take leaves %d, want 1 (the refund given back)", res.Remaining)
	}

	c.down = true
	res, refund = TakeRefundable(s, "m", refundFailed)
	if !res.Allowed || res.Remaining != 1 {
		t.Fatalf("cluster down: %+v, want allowed in memory, 1 left", res)
	}
	c.down = false // the refund goes where the take was counted, not to the cluster now back
	refund()
	if res := s.Local.Take("m"); res.Remaining != 1 {
		t.Fatalf("after a memory refund, memory's next take leaves %d, want 1", res.Remaining)
	}
	if res := c.w.Take("m"); res.Remaining != 1 {
		t.Fatalf("a memory refund reached the cluster: its first take of m leaves %d, want 1", res.Remaining)
	}
	if len(refundsFailed) != 0 {
		t.Fatalf("refund failures heard: %v, want none", refundsFailed)
	}

	c.refundDown = true
	_, refund = TakeRefundable(s, "n", refundFailed)
	refund()
	if len(refundsFailed) != 1 || !errors.Is(refundsFailed[0], errNoDatabase) {
		t.Fatalf("refused refund: heard %v, want %v", refundsFailed, errNoDatabase)
	}
	if res := c.w.Take("n"); res.Remaining != 0 {
		t.Fatalf("after a refused refund, the cluster's next take leaves %d, want 0 (still counted)", res.Remaining)
	}
	_, refund = TakeRefundable(s, "o", nil)
	refund() // nothing to hear it: no panic
}
