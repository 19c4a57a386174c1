package boltstore

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// An Idempotency-Key is the company's and the route's: the same key on
// another route stores its own message and answer. An answer kept before
// keys had routes (company id and key alone) is still found on every route
// and replays as it did then, so no retry is queued twice across an upgrade.
func TestIdempotencyKeysByRouteAndOldAnswers(t *testing.T) {
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "k")
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	send := func(key IdempotencyKey, text string) (Message, *Idempotent) {
		t.Helper()
		m := Message{UUID: "u-" + text, CompanyID: c.ID, Device: "fp", Channel: "sms", Phone: "+15551234567", Text: text, SIMSlot: "SIM1"}
		out, prior, err := s.Enqueue(&m, key, now, nil, func(m Message) (int, []byte) { return 200, []byte(m.UUID) })
		if err != nil {
			t.Fatal(err)
		}
		return out, prior
	}

	chat := IdempotencyKey{Key: "order-1", Route: "/chat/send", Digest: "d1"}
	if _, prior := send(chat, "first"); prior != nil {
		t.Fatalf("a fresh key: got prior %+v", prior)
	}
	_, prior := send(chat, "again")
	if prior == nil || string(prior.Body) != "u-first" || prior.Route != "/chat/send" || prior.Digest != "d1" {
		t.Fatalf("the same key and route: got prior %+v, want the first answer with its route and digest", prior)
	}
	alias := IdempotencyKey{Key: "order-1", Route: "/automation/send-sms", Digest: "d1"}
	if m, prior := send(alias, "alias"); prior != nil || m.ID == 0 {
		t.Fatalf("the same key on another route: got prior %+v, want a message of its own", prior)
	}

	// An answer in the layout of earlier versions.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bucketIdempotency), append(itob(c.ID), "order-old"...), Idempotent{Status: 202, Body: []byte("old"), CreatedAt: t0.Add(-time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	for _, route := range []string{"/chat/send", "/imessage/send"} {
		_, prior := send(IdempotencyKey{Key: "order-old", Route: route, Digest: "any"}, "old-"+route)
		if prior == nil || string(prior.Body) != "old" || prior.Digest != "" {
			t.Fatalf("an answer kept before routes, on %s: got %+v, want it replayed", route, prior)
		}
	}
	if n, err := s.PruneIdempotency(t0); err != nil || n != 1 {
		t.Fatalf("prune: got %d (%v), want the old-layout answer dropped", n, err)
	}
}
