package boltstore

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestAgentReleaseOfNothingWrites: an agent's hello that releases nothing
// (every send handed to it named in its jobs, or none handed to it) makes
// no write: the company's queue is read outside the single writer, and no
// commit is paid for it. A hello that does release a send writes it.
func TestAgentReleaseOfNothingWrites(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c := Company{Name: "Acme", APIKeyHash: []byte("k")}
	if err := s.CreateCompany(&c, &User{Email: "a@acme.test", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	devs := []Device{
		{Fingerprint: "release-agent", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t1")},
		{Fingerprint: "release-idle", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t2")},
	}
	if err := s.ProvisionDevices(devs); err != nil {
		t.Fatal(err)
	}
	agent, err := s.Device("release-agent")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := s.Device("release-idle")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	nums, err := s.AnnounceNumbers(c.ID, agent.ID, ChannelNameWhatsApp, []string{"+15550101111"}, now, 0)
	if err != nil || len(nums) != 1 {
		t.Fatalf("announce: %+v (%v)", nums, err)
	}
	m := Message{UUID: "release-held", CompanyID: c.ID, Channel: ChannelNameWhatsApp, NumberRef: nums[0].PublicID, Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
	sent, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, time.Now, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.AgentHandOut(c.ID, agent.ID, sent.ID); err != nil || !ok {
		t.Fatalf("hand out: %v (%v)", ok, err)
	}

	writes := func() int64 { st := s.db.Stats().TxStats; return st.GetWrite() }
	for _, r := range []struct {
		name   string
		device uint64
		held   []string
	}{
		{"the agent naming its send", agent.ID, []string{sent.UUID}},
		{"an agent handed nothing", idle.ID, nil},
	} {
		before := writes()
		got, err := s.AgentRelease(c.ID, r.device, r.held)
		if err != nil || len(got) != 0 {
			t.Fatalf("%s: released %+v (%v), want nothing", r.name, got, err)
		}
		if after := writes(); after != before {
			t.Fatalf("%s: %d writes to the file, want none", r.name, after-before)
		}
	}
	if m, err := s.MessageByUUID(c.ID, sent.UUID); err != nil || m.HandedTo != agent.ID {
		t.Fatalf("the send named: handed to %d (%v), want %d", m.HandedTo, err, agent.ID)
	}

	before := writes()
	got, err := s.AgentRelease(c.ID, agent.ID, nil)
	if err != nil || len(got) != 1 || got[0].ID != nums[0].ID {
		t.Fatalf("a release naming nothing: %+v (%v), want the number %d", got, err, nums[0].ID)
	}
	if writes() == before {
		t.Fatal("a release that released a send wrote nothing")
	}
	if m, err := s.MessageByUUID(c.ID, sent.UUID); err != nil || m.HandedTo != 0 {
		t.Fatalf("the send released: handed to %d (%v), want none", m.HandedTo, err)
	}
}

// TestAgentReleaseChecksAgainInTheWriter: the sends AgentRelease read as
// lost outside the writer are checked again in it: one settled since the
// read (reported sending), or handed to another agent, is left as it is;
// only one lost still is released, and its number comes back once.
func TestAgentReleaseChecksAgainInTheWriter(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c := Company{Name: "Acme", APIKeyHash: []byte("k")}
	if err := s.CreateCompany(&c, &User{Email: "a@acme.test", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ProvisionDevices([]Device{
		{Fingerprint: "recheck-agent", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t1")},
		{Fingerprint: "recheck-other", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t2")},
	}); err != nil {
		t.Fatal(err)
	}
	agent, err := s.Device("recheck-agent")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Device("recheck-other")
	if err != nil {
		t.Fatal(err)
	}
	nums, err := s.AnnounceNumbers(c.ID, agent.ID, ChannelNameWhatsApp, []string{"+15550102222"}, time.Now(), 0)
	if err != nil || len(nums) != 1 {
		t.Fatalf("announce: %+v (%v)", nums, err)
	}
	var sends []Message
	var ids [][]byte
	for _, text := range []string{"settled", "moved", "lost"} {
		m := Message{UUID: "recheck-" + text, CompanyID: c.ID, Channel: ChannelNameWhatsApp, NumberRef: nums[0].PublicID, Phone: "+15557654321", Text: text, ContentType: "text", Segments: 1}
		out, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, time.Now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := s.AgentHandOut(c.ID, agent.ID, out.ID); err != nil || !ok {
			t.Fatalf("hand out %s: %v (%v)", text, ok, err)
		}
		sends, ids = append(sends, out), append(ids, itob(out.ID))
	}
	settled, moved, lost := sends[0], sends[1], sends[2]
	// Since the read: settled is reported sending, moved is handed to the
	// other agent.
	if _, _, err := s.Transition(c.ID, agent.ID, settled.UUID, MsgSending, "", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.grouped(func(tx *bolt.Tx) error {
		var m Message
		if err := getJSON(tx.Bucket(bucketMessages), itob(moved.ID), &m); err != nil {
			return err
		}
		m.HandedTo = other.ID
		return putJSON(tx.Bucket(bucketMessages), itob(moved.ID), m)
	}); err != nil {
		t.Fatal(err)
	}

	var got []AgentNumber
	if err := s.grouped(func(tx *bolt.Tx) error {
		var err error
		got, err = releaseLost(tx, c.ID, ids, lostTo(c.ID, agent.ID, nil))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != nums[0].ID {
		t.Fatalf("numbers released: %+v, want %d once", got, nums[0].ID)
	}
	for _, w := range []struct {
		m      Message
		to     uint64
		status string
	}{{settled, agent.ID, MsgSending}, {moved, other.ID, MsgQueued}, {lost, 0, MsgQueued}} {
		m, err := s.MessageByUUID(c.ID, w.m.UUID)
		if err != nil || m.HandedTo != w.to || m.Status != w.status {
			t.Fatalf("send %q: handed to %d, %s (%v), want %d, %s", w.m.Text, m.HandedTo, m.Status, err, w.to, w.status)
		}
	}
}
