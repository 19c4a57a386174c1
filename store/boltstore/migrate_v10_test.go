package boltstore

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMigrateV10CountsAgentMessages: the migration to schema 10 counts each
// number's stored messages, so that a store written before the counts
// answers its numbers' totals; sends after it add to the count.
func TestMigrateV10CountsAgentMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	c, _ := newCompany(t, s, "admin@alpha.example", "key-alpha")
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	ns, err := s.AnnounceNumbers(c.ID, 1, ChannelNameWhatsApp, []string{"+15550001111", "+15550002222"}, time.Now(), 10)
	if err != nil || len(ns) != 2 {
		t.Fatalf("announce: %v (%v)", ns, err)
	}
	send := func(n AgentNumber) {
		t.Helper()
		m := Message{UUID: fmt.Sprintf("u-%d-%d", n.ID, time.Now().UnixNano()), CompanyID: c.ID, Channel: n.Channel, NumberRef: n.PublicID, Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
		if _, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, time.Now, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		send(ns[0])
	}
	send(ns[1])
	totals := func(what string, want ...int) {
		t.Helper()
		for i, n := range ns {
			msgs, total, err := s.AgentMessages(c.ID, n.ID, 1, 2)
			if err != nil || total != want[i] || len(msgs) != min(2, want[i]) {
				t.Fatalf("%s: number %d has %d messages on its first page of %d (%v), want %d", what, i, len(msgs), total, err, want[i])
			}
		}
	}
	totals("before the migration", 3, 1)

	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketAgentMsgCounts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(9))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if v, err := s.Version(); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d (%v) after the migration, want %d", v, err, SchemaVersion())
	}
	totals("after the migration", 3, 1)
	send(ns[1])
	totals("after another send", 3, 2)
}
