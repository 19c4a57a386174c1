package boltstore

import (
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
