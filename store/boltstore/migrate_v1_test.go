package boltstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// testdata/v1/simrelay.db is a store written by schema 1's code (commit
// fb15f35) with testdata/gen-v1, which says how to write it again: company A
// paired "shared-phone" and "a-keep", sent and received on both, deleted
// shared-phone with a job queued and one sending; company B then paired
// shared-phone and sent and received on it. Under schema 1, B saw A's history
// of that fingerprint.
const (
	v1Shared = "shared-phone"
	v1KeepA  = "a-keep"
	v1Peer   = "+15550000001"
	v1Peer2  = "+15550000002"
)

// v1State is what the schema 1 file holds, read with bbolt alone.
type v1State struct {
	messages   map[uint64]Message // by id
	devices    map[string]Device  // by fingerprint
	users      map[uint64]User
	webhooks   map[uint64]WebhookSet // by company
	deliveries map[uint64]WebhookDelivery
	queued     map[uint64]bool // message ids in the old queue index
	sending    map[uint64]bool // message ids in the old sending index
}

// copyV1 copies the fixture into a fresh directory.
func copyV1(t *testing.T) string {
	t.Helper()
	src, err := os.Open(filepath.Join("testdata", "v1", FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := t.TempDir()
	dst, err := os.OpenFile(filepath.Join(dir, FileName), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readV1(t *testing.T, dir string) v1State {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := v1State{messages: map[uint64]Message{}, devices: map[string]Device{}, users: map[uint64]User{},
		webhooks: map[uint64]WebhookSet{}, deliveries: map[uint64]WebhookDelivery{}, queued: map[uint64]bool{}, sending: map[uint64]bool{}}
	err = db.View(func(tx *bolt.Tx) error {
		if v := btoi(tx.Bucket(bucketMeta).Get(keySchemaVersion)); v != 1 {
			t.Fatalf("the fixture has schema version %d, want 1", v)
		}
		each := func(name []byte, fn func(k, v []byte) error) {
			if err := tx.Bucket(name).ForEach(fn); err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
		}
		each(bucketMessages, func(k, v []byte) error {
			var m Message
			err := jsonUnmarshal(v, &m)
			st.messages[btoi(k)] = m
			return err
		})
		each(bucketDevices, func(k, v []byte) error {
			var d Device
			err := jsonUnmarshal(v, &d)
			st.devices[string(k)] = d
			return err
		})
		each(bucketUsers, func(k, v []byte) error {
			var u User
			err := jsonUnmarshal(v, &u)
			st.users[btoi(k)] = u
			return err
		})
		each(bucketWebhookSets, func(k, v []byte) error {
			var w WebhookSet
			err := jsonUnmarshal(v, &w)
			st.webhooks[btoi(k)] = w
			return err
		})
		each(bucketWebhookDeliveries, func(k, v []byte) error {
			var d WebhookDelivery
			err := jsonUnmarshal(v, &d)
			st.deliveries[btoi(k)] = d
			return err
		})
		each(v1Queue, func(k, _ []byte) error { st.queued[btoi(k[len(k)-8:])] = true; return nil })
		each(v1Sending, func(k, _ []byte) error { st.sending[btoi(k[len(k)-8:])] = true; return nil })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.messages) != 14 || len(st.devices) != 2 || len(st.users) != 3 || len(st.webhooks) != 2 || len(st.deliveries) == 0 || len(st.queued) != 2 || len(st.sending) != 2 {
		t.Fatalf("the fixture holds %d messages, %d devices, %d users, %d webhook sets, %d deliveries, %d queued, %d sending: not the state gen-v1 writes",
			len(st.messages), len(st.devices), len(st.users), len(st.webhooks), len(st.deliveries), len(st.queued), len(st.sending))
	}
	return st
}

// TestMigrateV1Store opens a store written by schema 1's code and finds every
// message, device, user, webhook and delivery where it was, with company A's
// history A's alone and none of it visible to company B, which holds A's old
// fingerprint now.
func TestMigrateV1Store(t *testing.T) {
	t.Parallel()
	dir := copyV1(t)
	old := readV1(t, dir)
	s := open(t, dir)
	checkMigratedV1(t, s, old)
}

// TestMigrateV1ResumesAfterACrash moves the messages a few at a time, stops
// half way as a crash would, and lets Open finish: the result is the same.
func TestMigrateV1ResumesAfterACrash(t *testing.T) {
	t.Parallel()
	dir := copyV1(t)
	old := readV1(t, dir)
	db := halfMigrateV1(t, dir)
	// A build whose last migration is 0 -> 1 (schema 1's) refuses the file.
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := migrateStep(tx, migrations[:1])
		return err
	}); err == nil || !strings.Contains(err.Error(), "run a newer simrelay") {
		t.Fatalf("a schema 1 build on a half-migrated file: got %v, want it refused", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	checkMigratedV1(t, s, old)
}

// A stop (OpenContext's ctx ending: a server's Ctrl-C) during a migration
// stops it between two steps: the open fails saying so, having said it
// resumed one, and the next open resumes it where it stopped.
func TestMigrateV1StoppedResumes(t *testing.T) {
	t.Parallel()
	dir := copyV1(t)
	old := readV1(t, dir)
	if err := halfMigrateV1(t, dir).Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var logs bytes.Buffer
	_, err := OpenContext(ctx, dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "the next start resumes it") {
		t.Fatalf("a stopped migration: got %v, want it stopped, saying the next start resumes it", err)
	}
	if !strings.Contains(logs.String(), "migrating the data file") || !strings.Contains(logs.String(), "resumed=true") || strings.Contains(logs.String(), "is migrated") {
		t.Errorf("the stopped migration's log:\n%s", logs.String())
	}
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get(keyMigrating) == nil {
			t.Errorf("the stopped migration is no longer under way: it ran on")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	checkMigratedV1(t, s, old)
}

// halfMigrateV1 moves the v1 store in dir half way to schema 2, three
// messages a step, as a crash or a stop would leave it, and answers the
// file, open.
func halfMigrateV1(t *testing.T, dir string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// This build's migrations, with the 1 -> 2 one moving three messages a step.
	steps := append([]func(*bolt.Tx) (bool, error){}, migrations...)
	steps[1] = func(tx *bolt.Tx) (bool, error) { return migrateDeviceIDsIn(tx, 3) }
	for step := range 4 { // the devices, then three batches of three messages
		var done bool
		if err := db.Update(func(tx *bolt.Tx) error {
			var err error
			done, err = migrateStep(tx, steps)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if done {
			t.Fatalf("step %d finished the migration; want it half way", step)
		}
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if v := btoi(tx.Bucket(bucketMeta).Get(keySchemaVersion)); v != 2 {
			t.Errorf("half way: schema version %d, want 2 already, so that a schema 1 build refuses the file", v)
		}
		if c := tx.Bucket(bucketMeta).Get(keyV2Cursor); c == nil || btoi(c) == 0 {
			t.Errorf("half way: cursor %x, want the last message moved", c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return db
}

func checkMigratedV1(t *testing.T, s *Store, old v1State) {
	t.Helper()
	if v, err := s.Version(); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d (%v), want %d", v, err, SchemaVersion())
	}
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	// The schema 1 state: the shared fingerprint is B's now.
	devA, devB := old.devices[v1KeepA], old.devices[v1Shared]
	compA, compB := devA.CompanyID, devB.CompanyID
	if compA == compB {
		t.Fatalf("fixture: %s and %s both of company %d", v1KeepA, v1Shared, compA)
	}

	// Devices: each where it was, with an id and its token working.
	ids := map[uint64]string{}
	for fp, was := range old.devices {
		d, err := s.CompanyDevice(was.CompanyID, fp)
		if err != nil {
			t.Fatalf("device %s: %v", fp, err)
		}
		if d.ID == 0 || ids[d.ID] != "" {
			t.Fatalf("device %s: id %d, want a new one of its own", fp, d.ID)
		}
		ids[d.ID] = fp
		got := d
		got.ID = 0
		if !reflect.DeepEqual(got, was) {
			t.Errorf("device %s:\n got %+v\nwant %+v", fp, got, was)
		}
		if byToken, err := s.DeviceByTokenHash(was.TokenHash); err != nil || byToken.ID != d.ID {
			t.Errorf("device %s by its token: %+v (%v)", fp, byToken, err)
		}
		if list, err := s.CompanyDevices(was.CompanyID); err != nil || len(list) != 1 || list[0].ID != d.ID {
			t.Errorf("devices of company %d: %+v (%v), want %s alone", was.CompanyID, list, err, fp)
		}
		if d.ID != 0 {
			if devA.Fingerprint == fp {
				devA = d
			} else {
				devB = d
			}
		}
	}

	// Messages: each where it was, with the id of its device. A's messages on
	// the shared fingerprint keep one id of their own, which is not B's.
	byName := map[devName]uint64{}
	var retiredA uint64
	for id, was := range old.messages {
		m, err := s.MessageByUUID(was.CompanyID, was.UUID)
		if err != nil {
			t.Fatalf("message %d: %v", id, err)
		}
		if _, err := s.MessageByUUID(otherCompany(was.CompanyID, compA, compB), was.UUID); !errors.Is(err, ErrNotFound) {
			t.Errorf("message %d found by the other company: %v", id, err)
		}
		name := devName{was.CompanyID, was.Device}
		if byName[name] == 0 {
			byName[name] = m.DeviceID
		}
		if m.DeviceID == 0 || m.DeviceID != byName[name] {
			t.Errorf("message %d of %v: device id %d, want %d", id, name, m.DeviceID, byName[name])
		}
		if name == (devName{compA, v1Shared}) {
			retiredA = m.DeviceID
		}
		got := m
		got.DeviceID = 0
		if !reflect.DeepEqual(got, was) {
			t.Errorf("message %d:\n got %+v\nwant %+v", id, got, was)
		}
	}
	// The migration to schema 2 wrote every message anew: in the compact
	// encoding of schema 7, read above as the JSON it was.
	for id := range old.messages {
		if raw := rawRecord(t, s, bucketMessages, itob(id)); raw[0] != tagMessage {
			t.Errorf("message %d stored as %q after the migrations, want the compact encoding", id, raw)
		}
	}
	if len(byName) != 3 || retiredA == 0 || retiredA == devB.ID || ids[retiredA] != "" || byName[devName{compA, v1KeepA}] != devA.ID || byName[devName{compB, v1Shared}] != devB.ID {
		t.Fatalf("device ids of the messages %v; live devices %v; want A's shared-phone history on an id of its own", byName, ids)
	}

	// B sees its own history of the fingerprint and nothing of A's.
	for _, peer := range []string{v1Peer, v1Peer2} {
		want := 0
		for _, m := range old.messages {
			if m.CompanyID == compB && m.Phone == peer {
				want++
			}
		}
		msgs, total, err := s.History(compB, v1Shared, peer, 1, 100)
		if err != nil || total != want || len(msgs) != want {
			t.Fatalf("B's history with %s: %d of %d (%v), want %d", peer, len(msgs), total, err, want)
		}
		for _, m := range msgs {
			if m.CompanyID != compB {
				t.Errorf("B's history with %s shows %q of company %d", peer, m.Text, m.CompanyID)
			}
		}
		if _, _, err := s.History(compA, v1Shared, peer, 1, 100); !errors.Is(err, ErrDeviceGone) {
			t.Errorf("A's history of B's device: %v, want ErrDeviceGone", err)
		}
	}
	convs, err := s.Conversations(compB, v1Shared, 0)
	if err != nil || len(convs) != 2 {
		t.Fatalf("B's conversations: %+v (%v), want two", convs, err)
	}
	for _, c := range convs {
		want := 0
		for _, m := range old.messages {
			if m.CompanyID == compB && m.Phone == c.Phone {
				want++
			}
		}
		if c.MessageCount != want || c.LastMessage[:2] != "B:" {
			t.Errorf("B's conversation %+v: want %d messages, B's alone", c, want)
		}
	}
	if in, err := s.InboundList(InboundQuery{CompanyID: compB, Device: v1Shared, Limit: 50}); err != nil || len(in) != 1 || in[0].Text != "B: inbound" {
		t.Errorf("B's inbound on the device: %+v (%v), want B's one", in, err)
	}
	if in, err := s.InboundList(InboundQuery{CompanyID: compB, Limit: 50}); err != nil || len(in) != 1 {
		t.Errorf("B's inbound: %+v (%v), want B's one", in, err)
	}
	// A's history on its other phone is whole, and A's inbound list keeps all three.
	if msgs, total, err := s.History(compA, v1KeepA, v1Peer, 1, 100); err != nil || total != 3 || len(msgs) != 3 {
		t.Errorf("A's history on %s: %d of %d (%v), want 3", v1KeepA, len(msgs), total, err)
	}
	if convs, err := s.Conversations(compA, v1KeepA, 0); err != nil || len(convs) != 2 || convs[0].Phone != v1Peer || convs[0].MessageCount != 3 {
		t.Errorf("A's conversations on %s: %+v (%v)", v1KeepA, convs, err)
	}
	if in, err := s.InboundList(InboundQuery{CompanyID: compA, Limit: 50}); err != nil || len(in) != 3 {
		t.Errorf("A's inbound: %d (%v), want 3", len(in), err)
	}

	// Queues: each device's queued jobs are pending for it alone.
	for _, d := range []Device{devA, devB} {
		var want []uint64
		for id := range old.queued {
			if m := old.messages[id]; m.CompanyID == d.CompanyID && m.Device == d.Fingerprint {
				want = append(want, id)
			}
		}
		got, err := s.Pending(d.CompanyID, d.ID, 0, 100, time.Now(), nil)
		if err != nil || len(got) != len(want) || len(want) != 1 || got[0].ID != want[0] {
			t.Errorf("pending of %s (company %d): %+v (%v), want message %v", d.Fingerprint, d.CompanyID, got, err, want)
		}
	}
	if got, err := s.Pending(compA, retiredA, 0, 100, time.Now(), nil); err != nil || len(got) != 0 {
		t.Errorf("pending of A's deleted device: %+v (%v), want none", got, err)
	}

	// Acks and reports: B's phone cannot move A's jobs; each phone moves its own.
	for id, m := range old.messages {
		if m.CompanyID != compA || m.Direction != Outbound {
			continue
		}
		if _, _, err := s.Transition(compB, devB.ID, m.UUID, MsgDelivered, "", "", now); !errors.Is(err, ErrNotFound) {
			t.Errorf("B's phone reported A's message %d: %v, want ErrNotFound", id, err)
		}
	}
	for id := range old.sending {
		m := old.messages[id]
		d := devA
		if m.CompanyID == compB {
			d = devB
		}
		if m.CompanyID == compA && m.Device == v1Shared {
			t.Errorf("message %d of A's deleted device is still in the sending index of the fixture", id)
			continue
		}
		got, _, err := s.Transition(d.CompanyID, d.ID, m.UUID, MsgDelivered, "", "", now)
		if err != nil || got.Status != MsgDelivered {
			t.Errorf("report of sending message %d by its phone: %+v (%v)", id, got, err)
		}
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketSendingIdx).Stats().KeyN; n != 0 {
			t.Errorf("the sending index keeps %d entries after every sending job was reported", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Inbound dedupe: each registration against its own client_ids only.
	clock := func() time.Time { return now }
	dedupe := func(d Device, clientID string) (Message, bool) {
		t.Helper()
		m := Message{UUID: "new-" + d.Fingerprint + "-" + clientID, CompanyID: d.CompanyID, DeviceID: d.ID, Channel: "sms",
			Phone: v1Peer, Text: "again", SIMSlot: "SIM1", ClientID: clientID}
		got, dup, err := s.StoreInbound(&m, clock)
		if err != nil {
			t.Fatalf("inbound %s on %s: %v", clientID, d.Fingerprint, err)
		}
		return got, dup
	}
	if got, dup := dedupe(devB, "client-1"); dup || got.CompanyID != compB {
		t.Errorf("B's inbound with A's client_id: %+v dup=%v, want a new message of B's", got, dup)
	}
	if got, dup := dedupe(devB, "client-9"); !dup || got.Text != "B: inbound" {
		t.Errorf("B's repeated inbound: %+v dup=%v, want B's first one", got, dup)
	}
	if got, dup := dedupe(devA, "client-1"); !dup || got.Text != "A keep: inbound" {
		t.Errorf("A's repeated inbound: %+v dup=%v, want A's first one", got, dup)
	}

	// Users, webhook sets and pending deliveries: untouched.
	for id, was := range old.users {
		if got, err := s.User(id); err != nil || !reflect.DeepEqual(got, was) {
			t.Errorf("user %d: %+v (%v), want %+v", id, got, err, was)
		}
	}
	if got, want := companyEmails(t, s), usersByCompanyEmail(t, s); len(want) != len(old.users) || !maps.Equal(got, want) {
		t.Errorf("the companies' addresses: %v, want %v", got, want)
	}
	for c, was := range old.webhooks {
		if got, err := s.WebhookSet(c); err != nil || !reflect.DeepEqual(got, was) {
			t.Errorf("webhook set of %d: %+v (%v), want %+v", c, got, err, was)
		}
	}
	due, _, err := s.DueWebhookDeliveries(now.Add(24*time.Hour), 100, nil)
	if err != nil || len(due) != len(old.deliveries) {
		t.Fatalf("due deliveries: %d (%v), want %d", len(due), err, len(old.deliveries))
	}
	for _, d := range due {
		job, err := s.WebhookJob(d.ID)
		if err != nil || !reflect.DeepEqual(job.Delivery, old.deliveries[d.ID]) {
			t.Errorf("delivery %d: %+v (%v), want %+v", d.ID, job.Delivery, err, old.deliveries[d.ID])
		}
	}

	// Nothing of schema 1's layout or of the migration is left.
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range append(v1Buckets, bucketV2Retired) {
			if tx.Bucket(name) != nil {
				t.Errorf("bucket %s is still there", name)
			}
		}
		if tx.Bucket(bucketMeta).Get(keyV2Cursor) != nil {
			t.Error("the migration cursor is still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func otherCompany(c, a, b uint64) uint64 {
	if c == a {
		return b
	}
	return a
}
