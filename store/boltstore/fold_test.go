package boltstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// foldFixture is a company with one SMS device and n queued messages.
func foldFixture(t *testing.T, n int) (*Store, Device, []Message, time.Time) {
	t.Helper()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "k")
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Device("fp")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	msgs := make([]Message, n)
	for i := range msgs {
		m := Message{UUID: fmt.Sprintf("u-%d", i), CompanyID: c.ID, Device: "fp", Channel: "sms", Phone: fmt.Sprintf("+1555123456%d", i), Text: "hi", SIMSlot: "SIM1"}
		if msgs[i], _, err = s.Enqueue(&m, IdempotencyKey{}, func() time.Time { return t0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	return s, d, msgs, t0
}

// holdCommits keeps the committer busy with a write of its own until the
// returned release is called, so that what is queued meanwhile commits in
// one batch.
func holdCommits(t *testing.T, s *Store) (release func()) {
	t.Helper()
	started, hold := make(chan struct{}), make(chan struct{})
	req := s.commit.submit(func(*bolt.Tx) error {
		close(started)
		<-hold
		return nil
	})
	<-started
	return func() {
		close(hold)
		if err := req.wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// indexed says whether m is in its device's queue and in dev_sending.
func indexed(t *testing.T, s *Store, m Message) (queued, sending bool) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		queued = tx.Bucket(bucketQueue).Get(msgDevKey(m, itob(m.QueuePlace()))) != nil
		sending = tx.Bucket(bucketSendingIdx).Get(msgDevKey(m, itob(m.ID))) != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return queued, sending
}

// A job's ack and the reports that follow it in one commit write its record
// once, in its final state; each change still answers as it did alone, and
// the counters count each step once. An ack alone in its commit leaves the
// job in dev_sending, and its report in a later commit takes it out.
func TestFoldedReportsWriteTheRecordOnce(t *testing.T) {
	t.Parallel()
	s, d, msgs, t0 := foldFixture(t, 2)
	a, b := msgs[0], msgs[1]

	release := holdCommits(t, s)
	steps := []Transit{
		s.TransitionLater(a.CompanyID, d.ID, a.UUID, MsgSending, "", "", "", t0),
		s.TransitionLater(b.CompanyID, d.ID, b.UUID, MsgSending, "", "", "", t0),
		s.TransitionLater(a.CompanyID, d.ID, a.UUID, MsgSent, "", "t1", "", t0.Add(time.Second)),
		s.TransitionLater(a.CompanyID, d.ID, "no-such-job", MsgSent, "", "", "", t0),             // fails: the batch runs again without it
		s.TransitionLater(a.CompanyID, d.ID, a.UUID, MsgSent, "", "t1", "", t0.Add(time.Second)), // a repeat
		s.TransitionLater(a.CompanyID, d.ID, a.UUID, MsgDelivered, "", "t2", "", t0.Add(2*time.Second)),
	}
	release()
	want := []struct {
		status string
		moved  bool
	}{{MsgSending, true}, {MsgSending, true}, {MsgSent, true}, {}, {MsgSent, false}, {MsgDelivered, true}}
	for i, st := range steps {
		m, moved, err := st.Wait()
		if i == 3 {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("change of an unknown job: got %v, want ErrNotFound", err)
			}
			continue
		}
		if err != nil || m.Status != want[i].status || moved != want[i].moved {
			t.Fatalf("change %d: got %s moved %v (%v), want %s moved %v", i, m.Status, moved, err, want[i].status, want[i].moved)
		}
	}
	if got := s.FoldedWrites(); got != 2 {
		t.Fatalf("folded writes: got %d, want 2 (a's sent and delivered written with its ack)", got)
	}
	got, err := s.MessageByUUID(a.CompanyID, a.UUID)
	if err != nil || got.Status != MsgDelivered || got.StatusAt != "t2" || !got.UpdatedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("a: got %+v (%v), want delivered at t2", got, err)
	}
	if q, snd := indexed(t, s, a); q || snd {
		t.Fatalf("a: in the queue %v, in dev_sending %v; want neither", q, snd)
	}
	if q, snd := indexed(t, s, b); q || !snd {
		t.Fatalf("b: in the queue %v, in dev_sending %v; want dev_sending only", q, snd)
	}
	if _, _, err := s.Transition(b.CompanyID, d.ID, b.UUID, MsgFailed, "radio_off", "", t0); err != nil {
		t.Fatal(err)
	}
	if q, snd := indexed(t, s, b); q || snd {
		t.Fatalf("b after its report: in the queue %v, in dev_sending %v; want neither", q, snd)
	}
	totals, err := s.StatsTotals(a.CompanyID)
	if err != nil || totals.Sent != 1 || totals.Delivered != 1 || totals.Failed != 1 {
		t.Fatalf("totals: got %+v (%v), want 1 sent, 1 delivered, 1 failed", totals, err)
	}
	if got := s.FoldedWrites(); got != 2 {
		t.Fatalf("folded writes after a lone report: got %d, want 2", got)
	}
}

// Another write between an ack and its report in one commit sees the ack
// written: a device deleted there fails the acked job (device_deleted), and
// the report after it finds no device, as when each committed alone.
func TestDeviceDeletedBetweenAckAndReportFailsTheJob(t *testing.T) {
	t.Parallel()
	s, d, msgs, t0 := foldFixture(t, 1)
	a := msgs[0]

	release := holdCommits(t, s)
	ack := s.TransitionLater(a.CompanyID, d.ID, a.UUID, MsgSending, "", "", "", t0)
	del := s.commit.submit(func(tx *bolt.Tx) error {
		_, err := s.deleteDeviceTx(tx, a.CompanyID, "fp", t0)
		return err
	})
	sent := s.TransitionLater(a.CompanyID, d.ID, a.UUID, MsgSent, "", "", "", t0)
	release()
	if _, _, err := ack.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := del.wait(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sent.Wait(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("report after the delete: got %v, want ErrNotFound", err)
	}
	got, err := s.MessageByUUID(a.CompanyID, a.UUID)
	if err != nil || got.Status != MsgFailed || got.Error != "device_deleted" {
		t.Fatalf("got %s (%s), %v; want failed (device_deleted)", got.Status, got.Error, err)
	}
	if q, snd := indexed(t, s, a); q || snd {
		t.Fatalf("in the queue %v, in dev_sending %v; want neither", q, snd)
	}
	if got := s.FoldedWrites(); got != 0 {
		t.Fatalf("folded writes: got %d, want 0", got)
	}
}

// Taking jobs never waits for a write: a job whose number opted out while it
// waited comes back from Pending failed while the committer is busy, and
// its failure is written by the next shared commit. (What Pending answers
// and writes is the dispatch suite's, store/conformance.)
func TestPendingDoesNotWaitToFailOptedOutJobs(t *testing.T) {
	t.Parallel()
	s, d, msgs, t0 := foldFixture(t, 2)
	stopped := msgs[0]
	if _, _, err := s.AddOptOut(d.CompanyID, stopped.Phone, t0); err != nil {
		t.Fatal(err)
	}
	told := make(chan []Message, 1)
	release := holdCommits(t, s)
	type result struct {
		got []Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := s.Pending(d.CompanyID, d.ID, 0, 10, t0, func(ms []Message) { told <- ms })
		done <- result{got, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("Pending waited for the held commit")
	}
	if r.err != nil || len(r.got) != 2 || r.got[0].Status != MsgFailed {
		t.Fatalf("Pending = %+v, %v; want the opted-out job failed and the other", r.got, r.err)
	}
	select {
	case <-told:
		t.Fatal("the failure was told before its commit")
	default:
	}
	release()
	select {
	case ms := <-told:
		if len(ms) != 1 || ms[0].ID != stopped.ID {
			t.Fatalf("told of %+v, want the opted-out job", ms)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failure was never committed")
	}
	if queued, _ := indexed(t, s, stopped); queued {
		t.Fatal("the failed job is still in the queue")
	}
}
