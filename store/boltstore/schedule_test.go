package boltstore

import (
	"errors"
	"testing"
	"time"
)

// Scheduled messages wait in the due-time index: NextDue reads its first
// key, ReleaseDue takes only what is due, and a released message is placed
// in the queue after every id handed out, so a link's cursor past its id
// still finds it. A canceled one leaves the index and is never released.
func TestScheduleIndexAndQueuePlace(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "k")
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	enqueue := func(text string, sendAt time.Time) Message {
		t.Helper()
		m := Message{UUID: "u-" + text, CompanyID: c.ID, Device: "fp", Channel: "sms", Phone: "+15551234567", Text: text, SIMSlot: "SIM1", SendAt: sendAt}
		out, _, err := s.Enqueue(&m, IdempotencyKey{}, now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("an empty store has something due")
	}
	late := enqueue("late", t0.Add(3*time.Hour))
	first := enqueue("first", t0.Add(time.Hour))
	canceled := enqueue("canceled", t0.Add(2*time.Hour))
	plain := enqueue("plain", time.Time{})
	if first.Status != MsgScheduled || plain.Status != MsgQueued {
		t.Fatalf("got %s and %s, want scheduled and queued", first.Status, plain.Status)
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("NextDue: got %v %v, want %v", at, ok, t0.Add(time.Hour))
	}
	if _, err := s.Cancel(c.ID+1, canceled.UUID, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another company's cancel: got %v, want ErrNotFound", err)
	}
	if m, err := s.Cancel(c.ID, canceled.UUID, t0); err != nil || m.Status != MsgCanceled {
		t.Fatalf("cancel: %v %v", m.Status, err)
	}
	pending, err := s.Pending(c.ID, 1, 0, 10, t0, nil)
	if err != nil || len(pending) != 1 || pending[0].ID != plain.ID {
		t.Fatalf("pending before any send_at: %v %v", pending, err)
	}
	cursor := pending[0].QueuePlace() // a link took the plain one

	released, err := s.ReleaseDue(t0.Add(2*time.Hour+time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(released) != 1 || released[0].ID != first.ID || released[0].Status != MsgQueued || released[0].QueuePlace() <= plain.ID {
		t.Fatalf("released %+v, want only the first, queued after id %d", released, plain.ID)
	}
	pending, err = s.Pending(c.ID, 1, cursor, 10, t0, nil)
	if err != nil || len(pending) != 1 || pending[0].ID != first.ID {
		t.Fatalf("pending after the cursor: %v %v, want the released message", pending, err)
	}
	if m, _ := s.MessageByUUID(c.ID, canceled.UUID); m.Status != MsgCanceled {
		t.Fatalf("the canceled message: %s", m.Status)
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(late.SendAt) {
		t.Fatalf("NextDue after the release: got %v, want %v", at, late.SendAt)
	}
	// Canceling the released (queued) message takes it out of the queue.
	if _, err := s.Cancel(c.ID, first.UUID, t0); err != nil {
		t.Fatal(err)
	}
	if pending, _ := s.Pending(c.ID, 1, 0, 10, t0, nil); len(pending) != 1 || pending[0].ID != plain.ID {
		t.Fatalf("pending after canceling the released one: %v", pending)
	}
	// Sending or later cannot be canceled.
	if _, _, err := s.Transition(c.ID, 1, plain.UUID, MsgSending, "", "", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(c.ID, plain.UUID, t0); !errors.Is(err, ErrNotCancelable) {
		t.Fatalf("cancel of a sending message: got %v", err)
	}
	// A report for a scheduled message changes nothing.
	if m, moved, err := s.Transition(c.ID, 1, late.UUID, MsgSending, "", "", t0); err != nil || moved || m.Status != MsgScheduled {
		t.Fatalf("ack of a scheduled message: %s moved %v err %v", m.Status, moved, err)
	}
}
