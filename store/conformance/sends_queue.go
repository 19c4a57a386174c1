package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// SendsQueueStore is what the suite of the send path meeting the dispatch
// calls: the sends' methods, and a device's queue as its link reads it.
type SendsQueueStore interface {
	SendsStore
	Pending(companyID, deviceID uint64, after uint64, limit int, now time.Time, moved func([]store.Message)) ([]store.Message, error)
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (out store.Message, moved bool, err error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
}

// SendsQueue runs the suite of what the send path's changes (scheduling,
// release, windows, cancel, expiry) mean to the device's queue a link
// reads. (The priority queue's order is the Dispatch suite's.)
func SendsQueue(t *testing.T, open Opener[SendsQueueStore]) {
	t.Run("ScheduleAndCursor", func(t *testing.T) { t.Parallel(); queueSchedule(t, open(t)) })
	t.Run("HeldJobs", func(t *testing.T) { t.Parallel(); queueHeld(t, open(t)) })
	t.Run("MixedRelease", func(t *testing.T) { t.Parallel(); queueMixedRelease(t, open(t)) })
}

// pendingSettled is Pending that waits for the write holding (or failing)
// the jobs it returned so, as a link's next read would see it.
func pendingSettled(t *testing.T, s SendsQueueStore, companyID, deviceID, after uint64, limit int, now time.Time) ([]store.Message, error) {
	t.Helper()
	told := make(chan []store.Message, 1)
	got, err := s.Pending(companyID, deviceID, after, limit, now, func(ms []store.Message) { told <- ms })
	for _, m := range got {
		if !m.HeldUntil.IsZero() || m.Status != store.MsgQueued {
			select {
			case <-told:
			case <-time.After(10 * time.Second):
				t.Fatal("the jobs held at dispatch were not written")
			}
			break
		}
	}
	return got, err
}

// queueSchedule: a released message is placed in the queue after every
// place handed out, so a link's cursor past its id still finds it; a
// canceled one is never released; canceling the released one takes it out
// of the queue; a sending one cannot be canceled; a report for a scheduled
// message changes nothing.
func queueSchedule(t *testing.T, s SendsQueueStore) {
	x := newSender(t, s)
	scheduled := func(text string, at time.Time) store.Message {
		m := x.msg("+15551234567", text)
		m.SendAt = at
		return x.mustSend(m)
	}
	late := scheduled("late", T0.Add(3*time.Hour))
	first := scheduled("first", T0.Add(time.Hour))
	canceled := scheduled("canceled", T0.Add(2*time.Hour))
	plain := x.mustSend(x.msg("+15551234567", "plain"))
	if _, err := s.Cancel(x.c.ID, canceled.UUID, T0); err != nil {
		t.Fatal(err)
	}
	pending, err := s.Pending(x.c.ID, x.dev.ID, 0, 10, T0, nil)
	if err != nil || len(pending) != 1 || pending[0].ID != plain.ID {
		t.Fatalf("pending before any send_at: %+v (%v), want the plain one", pending, err)
	}
	cursor := pending[0].QueuePlace() // a link took the plain one
	released, err := s.ReleaseDue(T0.Add(2*time.Hour+time.Minute), 10)
	if err != nil || len(released) != 1 || released[0].ID != first.ID || released[0].QueuePlace() <= cursor {
		t.Fatalf("released %+v (%v), want only the first, placed after %d", released, err, cursor)
	}
	pending, err = s.Pending(x.c.ID, x.dev.ID, cursor, 10, T0, nil)
	if err != nil || len(pending) != 1 || pending[0].ID != first.ID {
		t.Fatalf("pending after the cursor: %+v (%v), want the released message", pending, err)
	}
	if _, err := s.Cancel(x.c.ID, first.UUID, T0); err != nil {
		t.Fatal(err)
	}
	if pending, _ := s.Pending(x.c.ID, x.dev.ID, 0, 10, T0, nil); len(pending) != 1 || pending[0].ID != plain.ID {
		t.Fatalf("pending after canceling the released one: %+v", pending)
	}
	if _, _, err := s.Transition(x.c.ID, x.dev.ID, plain.UUID, store.MsgSending, "", "", T0); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Cancel(x.c.ID, plain.UUID, T0); !errors.Is(err, store.ErrNotCancelable) || m.Status != store.MsgSending {
		t.Fatalf("cancel of a sending message: %s (%v), want ErrNotCancelable", m.Status, err)
	}
	if m, moved, err := s.Transition(x.c.ID, x.dev.ID, late.UUID, store.MsgSending, "", "", T0); err != nil || moved || m.Status != store.MsgScheduled {
		t.Fatalf("ack of a scheduled message: %s moved %v (%v), want it left scheduled", m.Status, moved, err)
	}
}

// queueHeld: a queued job a link reaches outside its window is held: it
// leaves the queue for the schedule at the window's opening, which NextDue
// names, and keeps its expiry. A scheduled job due while its window is
// closed is held the same way. At the opening ReleaseDue queues both
// behind every place handed out; a held job that expires, is canceled, or
// whose device is deleted leaves every index.
func queueHeld(t *testing.T, s SendsQueueStore) {
	x := newSender(t, s)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a Sunday
	opens := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	w := &window.Window{Days: []string{"mon"}, From: "09:00", To: "10:00", TimeZone: "UTC"}
	x.at = t0
	enqueue := func(text string, sendAt, expires time.Time) store.Message {
		m := x.msg("+15551234567", text)
		m.SendAt, m.ExpiresAt, m.Window = sendAt, expires, w
		return x.mustSend(m)
	}
	held := enqueue("held", time.Time{}, opens.Add(time.Hour))
	short := enqueue("short", time.Time{}, t0.Add(time.Hour))
	canceled := enqueue("canceled", time.Time{}, opens.Add(time.Hour))
	scheduled := enqueue("scheduled", t0.Add(time.Hour), opens.Add(time.Hour))

	pending, err := pendingSettled(t, s, x.c.ID, x.dev.ID, 0, 10, t0)
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending: %+v (%v), want 3 jobs", pending, err)
	}
	cursor := pending[2].QueuePlace()
	for _, m := range pending {
		if m.Status != store.MsgQueued || !m.HeldUntil.Equal(opens) {
			t.Fatalf("pending outside the window: %s held until %v, want queued held until %v", m.Status, m.HeldUntil, opens)
		}
	}
	if again, _ := pendingSettled(t, s, x.c.ID, x.dev.ID, 0, 10, t0); len(again) != 0 {
		t.Fatalf("pending after the hold: %d jobs, want none (held jobs leave the queue)", len(again))
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("NextDue: %v %v, want the scheduled one's send_at", at, ok)
	}
	if _, err := s.Cancel(x.c.ID, canceled.UUID, t0); err != nil {
		t.Fatal(err)
	}
	released, err := s.ReleaseDue(t0.Add(time.Hour), 10)
	if err != nil || len(released) != 1 || released[0].Status != store.MsgQueued || !released[0].HeldUntil.Equal(opens) {
		t.Fatalf("release of the scheduled one: %+v (%v), want queued, held until the opening", released, err)
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(opens) {
		t.Fatalf("NextDue: %v %v, want the opening %v", at, ok, opens)
	}
	expired, err := s.ExpireQueued(t0.Add(2*time.Hour), 10)
	if err != nil || len(expired) != 1 || expired[0].ID != short.ID || expired[0].Status != store.MsgExpired {
		t.Fatalf("expire: %+v (%v), want the short one expired", expired, err)
	}
	released, err = s.ReleaseDue(opens, 10)
	if err != nil || len(released) != 2 {
		t.Fatalf("at the opening: %+v (%v), want the held and the scheduled one", released, err)
	}
	for _, m := range released {
		if m.Status != store.MsgQueued || !m.HeldUntil.IsZero() || m.QueuePlace() <= cursor {
			t.Fatalf("released %+v, want queued, not held, placed after %d", m, cursor)
		}
	}
	pending, err = pendingSettled(t, s, x.c.ID, x.dev.ID, cursor, 10, opens)
	if err != nil || len(pending) != 2 || pending[0].ID != held.ID || pending[1].ID != scheduled.ID || !pending[0].HeldUntil.IsZero() {
		t.Fatalf("pending at the opening: %+v (%v), want held then scheduled, to send", pending, err)
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("NextDue: something still waits")
	}
	// Held again past the window, then the device goes: the job fails and leaves every index.
	if _, err := pendingSettled(t, s, x.c.ID, x.dev.ID, 0, 10, opens.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m := x.stored(held.UUID); m.HeldUntil.IsZero() {
		t.Fatal("past the window: the job is not held")
	}
	if _, err := s.DeleteDevice(x.c.ID, x.dev.Fingerprint, opens.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m := x.stored(held.UUID); m.Status != store.MsgFailed || m.Error != "device_deleted" {
		t.Fatalf("after the device's deletion: %s %q, want failed device_deleted", m.Status, m.Error)
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("NextDue after the deletion: the job still waits")
	}
	if expired, _ := s.ExpireQueued(opens.Add(48*time.Hour), 10); len(expired) != 0 {
		t.Fatalf("after the deletion: %d jobs expired, want none", len(expired))
	}
}
