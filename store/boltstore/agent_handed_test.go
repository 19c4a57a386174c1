package boltstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// handedFixture is a company with two agents, each holding a WhatsApp
// number of its own, and send, which queues a send on a number.
type handedFixture struct {
	s           *Store
	c           Company
	agent, idle Device
	nums        map[uint64]AgentNumber // by device id
}

func newHandedFixture(t *testing.T, dir string) *handedFixture {
	t.Helper()
	s := open(t, dir)
	c := Company{Name: "Acme", APIKeyHash: []byte("k")}
	if err := s.CreateCompany(&c, &User{Email: "a@acme.test", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ProvisionDevices([]Device{
		{Fingerprint: "handed-agent", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t1")},
		{Fingerprint: "handed-other", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t2")},
	}); err != nil {
		t.Fatal(err)
	}
	f := &handedFixture{s: s, c: c, nums: map[uint64]AgentNumber{}}
	var err error
	if f.agent, err = s.Device("handed-agent"); err != nil {
		t.Fatal(err)
	}
	if f.idle, err = s.Device("handed-other"); err != nil {
		t.Fatal(err)
	}
	for i, d := range []Device{f.agent, f.idle} {
		nums, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameWhatsApp, []string{fmt.Sprintf("+1555010%04d", i)}, time.Now(), 0)
		if err != nil || len(nums) != 1 {
			t.Fatalf("announce: %+v (%v)", nums, err)
		}
		f.nums[d.ID] = nums[0]
	}
	return f
}

// send queues a send on the number of the device, handed to it when hand.
func (f *handedFixture) send(t *testing.T, d Device, uuid string, ttl time.Duration, hand bool) Message {
	t.Helper()
	m := Message{UUID: uuid, CompanyID: f.c.ID, Channel: ChannelNameWhatsApp, NumberRef: f.nums[d.ID].PublicID, Phone: "+15557654321", Text: uuid, ContentType: "text", Segments: 1}
	if ttl > 0 {
		m.ExpiresAt = time.Now().Add(ttl)
	}
	out, _, err := f.s.EnqueueAgent(&m, IdempotencyKey{}, time.Now, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if hand {
		if ok, err := f.s.AgentHandOut(f.c.ID, d.ID, out.ID); err != nil || !ok {
			t.Fatalf("hand out %s: %v (%v)", uuid, ok, err)
		}
	}
	return out
}

// handedIndex lists agent_handed as "device:message" pairs, in key order.
func handedIndex(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	if err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAgentHanded).ForEach(func(k, _ []byte) error {
			out = append(out, fmt.Sprintf("%d:%d", btoi(k[8:16]), btoi(k[16:])))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func pairs(ps ...any) []string {
	var out []string
	for i := 0; i < len(ps); i += 2 {
		out = append(out, fmt.Sprintf("%d:%d", ps[i], ps[i+1]))
	}
	return out
}

// TestAgentReleaseReadsTheAgentsSendsOnly: the read of an agent's hello
// that names its jobs (AgentRelease) reads the sends handed to the agent,
// one record each, however large the company's queue of other sends
// (another agent's backlog, handed to it or to none): the company's whole
// queue was read before, once per agent hello.
func TestAgentReleaseReadsTheAgentsSendsOnly(t *testing.T) {
	t.Parallel()
	f := newHandedFixture(t, t.TempDir())
	for i := range 300 {
		f.send(t, f.idle, fmt.Sprint("backlog-", i), 0, i%2 == 0)
	}
	var mine []string
	for i := range 3 {
		mine = append(mine, f.send(t, f.agent, fmt.Sprint("mine-", i), 0, true).UUID)
	}
	for _, c := range []struct {
		name string
		held []string
		lost int
	}{{"naming them all", mine, 0}, {"naming one", mine[:1], 2}} {
		var ids [][]byte
		read := 0
		if err := f.s.view(func(tx *bolt.Tx) error {
			var err error
			ids, read, err = lostSends(tx, f.c.ID, f.agent.ID, lostTo(f.c.ID, f.agent.ID, c.held))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if read != len(mine) || len(ids) != c.lost {
			t.Errorf("%s: %d records read, %d to release; want %d read (the sends handed to the agent), %d to release", c.name, read, len(ids), len(mine), c.lost)
		}
	}
	got, err := f.s.AgentRelease(f.c.ID, f.agent.ID, mine[:1])
	if err != nil || len(got) != 1 || got[0].ID != f.nums[f.agent.ID].ID {
		t.Fatalf("release: %+v (%v), want the agent's number once", got, err)
	}
}

// TestAgentHandedIndexFollowsTheSends: agent_handed names a send while it
// is queued and handed to a registration: the hand-out puts it (moving it
// off a registration since deleted), and a release, an ack, a report of
// a queued send and an expiry take it out, in their own transactions.
func TestAgentHandedIndexFollowsTheSends(t *testing.T) {
	t.Parallel()
	f := newHandedFixture(t, t.TempDir())
	s, a := f.s, f.agent.ID
	acked := f.send(t, f.agent, "acked", 0, true)
	failed := f.send(t, f.agent, "failed", 0, true)
	expiring := f.send(t, f.agent, "expiring", 50*time.Millisecond, true)
	released := f.send(t, f.agent, "released", 0, true)
	kept := f.send(t, f.agent, "kept", 0, true)
	f.send(t, f.agent, "not-handed", 0, false)
	if got, want := handedIndex(t, s), pairs(a, acked.ID, a, failed.ID, a, expiring.ID, a, released.ID, a, kept.ID); !slices.Equal(got, want) {
		t.Fatalf("after the hand-outs: %v, want %v", got, want)
	}
	if _, _, err := s.Transition(f.c.ID, a, acked.UUID, MsgSending, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(f.c.ID, a, failed.UUID, MsgFailed, "no", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ExpireQueued(time.Now().Add(time.Second), 10); err != nil || len(n) != 1 {
		t.Fatalf("expire: %+v (%v), want one", n, err)
	}
	if _, err := s.AgentRelease(f.c.ID, a, []string{kept.UUID}); err != nil {
		t.Fatal(err)
	}
	if got, want := handedIndex(t, s), pairs(a, kept.ID); !slices.Equal(got, want) {
		t.Fatalf("after an ack, a report, an expiry and a release: %v, want %v", got, want)
	}

	// The agent deleted: its key stays until the send is handed to the
	// number's next holder, which moves it.
	if _, err := s.DeleteDevice(f.c.ID, f.agent.Fingerprint, time.Now()); err != nil {
		t.Fatal(err)
	}
	n := f.nums[a]
	if _, err := s.AnnounceNumbers(f.c.ID, f.idle.ID, ChannelNameWhatsApp, []string{f.nums[f.idle.ID].Address, n.Address}, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.AgentHandOut(f.c.ID, f.idle.ID, kept.ID); err != nil || !ok {
		t.Fatalf("hand out to the new holder: %v (%v)", ok, err)
	}
	if got, want := handedIndex(t, s), pairs(f.idle.ID, kept.ID); !slices.Equal(got, want) {
		t.Fatalf("handed to the new holder: %v, want %v", got, want)
	}
	if _, _, err := s.Transition(f.c.ID, f.idle.ID, kept.UUID, MsgSent, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := handedIndex(t, s); len(got) != 0 {
		t.Fatalf("after the last send's report: %v, want none", got)
	}
}

// TestMigrateV13IndexesHandedSends: the migration to schema 13 indexes the
// queued sends of a store written before agent_handed by the registration
// each was handed to, and leaves out those settled or handed to none; an
// agent's release then finds them.
func TestMigrateV13IndexesHandedSends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := newHandedFixture(t, dir)
	s := f.s
	a, o := f.agent.ID, f.idle.ID
	lost := f.send(t, f.agent, "lost", 0, true)
	other := f.send(t, f.idle, "other", 0, true)
	f.send(t, f.agent, "free", 0, false)
	settled := f.send(t, f.agent, "settled", 0, true)
	if _, _, err := s.Transition(f.c.ID, a, settled.UUID, MsgSending, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	want := pairs(a, lost.ID, o, other.ID)
	if got := handedIndex(t, s); !slices.Equal(got, want) {
		t.Fatalf("before: %v, want %v", got, want)
	}
	// Back to schema 12: no index.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketAgentHanded); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(12))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if v, err := s.Version(); err != nil || v != SchemaVersion() || v < 13 {
		t.Fatalf("version %d (%v) after the migration, want %d", v, err, SchemaVersion())
	}
	if got := handedIndex(t, s); !slices.Equal(got, want) {
		t.Fatalf("after the migration: %v, want %v", got, want)
	}
	got, err := s.AgentRelease(f.c.ID, a, nil)
	if err != nil || len(got) != 1 || got[0].ID != f.nums[a].ID {
		t.Fatalf("release after the migration: %+v (%v), want the agent's number", got, err)
	}
	if m, err := s.MessageByUUID(f.c.ID, lost.UUID); err != nil || m.HandedTo != 0 {
		t.Fatalf("the lost send: handed to %d (%v), want none", m.HandedTo, err)
	}
}
