package boltstore

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// An answer kept before keys had routes (company id and key alone) is
// still found on every route and replays as it did then, so no retry is
// queued twice across an upgrade; pruning drops it like any other.
func TestIdempotencyOldAnswers(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "k")
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bucketIdempotency), append(itob(c.ID), "order-old"...), Idempotent{Status: 202, Body: []byte("old"), CreatedAt: t0.Add(-time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	for _, route := range []string{"/chat/send", "/imessage/send"} {
		m := Message{UUID: "u-" + route, CompanyID: c.ID, Device: "fp", Channel: "sms", Phone: "+15551234567", Text: "hi", SIMSlot: "SIM1"}
		_, prior, err := s.Enqueue(&m, IdempotencyKey{Key: "order-old", Route: route, Digest: "any"}, now, nil, func(m Message) (int, []byte) { return 200, []byte(m.UUID) })
		if err != nil || prior == nil || string(prior.Body) != "old" || prior.Digest != "" {
			t.Fatalf("an answer kept before routes, on %s: got %+v (%v), want it replayed", route, prior, err)
		}
	}
	if n, err := s.PruneIdempotency(t0); err != nil || n != 1 {
		t.Fatalf("prune: got %d (%v), want the old-layout answer dropped", n, err)
	}
}

// The prune reads the answers in transactions of a bounded size, each from
// where the last stopped, so the writes of the group commit go between
// them; old answers anywhere in the bucket go and new ones stay.
func TestPruneIdempotencyInShortTransactions(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	const answers, batch = 20, 3
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for i := range answers {
			at := t0 // every third answer is new, the rest a day old
			if i%3 != 0 {
				at = t0.Add(-25 * time.Hour)
			}
			key := idempotencyRecordKey(uint64(i%4+1), IdempotencyKey{Route: "/chat/send", Key: fmt.Sprintf("k-%02d", i)})
			if err := putJSON(tx.Bucket(bucketIdempotency), key, Idempotent{Status: 200, Body: []byte("{}"), CreatedAt: at}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Generation()
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.pruneIdempotency(t0.Add(-24*time.Hour), batch)
	if err != nil || n != 13 {
		t.Fatalf("prune: dropped %d (%v), want the 13 old answers", n, err)
	}
	after, _ := s.Generation()
	if want := uint64((answers + batch - 1) / batch); after-before < want {
		t.Fatalf("the prune of %d answers committed %d transaction(s), want at least %d of at most %d answers each", answers, after-before, want, batch)
	}
	left := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketIdempotency).ForEach(func(_, v []byte) error {
			var rec Idempotent
			if err := jsonUnmarshal(v, &rec); err != nil {
				return err
			}
			if !rec.CreatedAt.Equal(t0) {
				t.Errorf("an old answer (%v) outlived the prune", rec.CreatedAt)
			}
			left++
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if left != 7 {
		t.Fatalf("%d answers left, want the 7 new ones", left)
	}
}
