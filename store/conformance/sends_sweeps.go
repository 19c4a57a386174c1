package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// queueMixedRelease: one release meets every case at once, over two
// companies and three devices: due messages queue behind every place
// handed out, in due order within each device; one to a number opted out
// since fails (recipient_opted_out) and is its device's newest failure;
// one whose window is closed is held until it opens, one whose window is
// open queues; a canceled one, one whose device was deleted (failed by
// the deletion) and one not yet due are left where they are. A second
// release at the same time moves nothing.
func queueMixedRelease(t *testing.T, s SendsQueueStore) {
	x, y := newSender(t, s), newSender(t, s)
	dev2 := Device(t, s, x.c.ID, fmt.Sprintf("fp-%d", unique()))
	dev3 := Device(t, s, x.c.ID, fmt.Sprintf("fp-%d", unique()))
	closed := &window.Window{Days: []string{"mon"}, From: "09:00", To: "10:00", TimeZone: "UTC"} // T0 is a Thursday
	opens := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	open := &window.Window{Days: []string{"thu"}, From: "09:00", To: "17:00", TimeZone: "UTC"}
	at := func(z *sender, dev store.Device, phone string, minutes int, w *window.Window) store.Message {
		t.Helper()
		m := z.msg(phone, fmt.Sprintf("at %d", minutes))
		m.Device, m.SendAt, m.Window = dev.Fingerprint, T0.Add(time.Duration(minutes)*time.Minute), w
		return z.mustSend(m)
	}
	gone := at(x, dev3, "+15551230009", 5, nil)
	a1 := at(x, x.dev, "+15551230001", 10, nil)
	canceled := at(x, x.dev, "+15551230001", 15, nil)
	b1 := at(y, y.dev, "+15551230001", 20, nil)
	opted := at(x, dev2, "+15551230002", 30, nil)
	held := at(x, x.dev, "+15551230003", 40, closed)
	inWindow := at(x, dev2, "+15551230004", 50, open)
	a2 := at(x, dev2, "+15551230005", 55, nil)
	later := at(x, x.dev, "+15551230006", 120, nil)
	before := x.mustSend(x.msg("+15551230007", "queued before"))
	if _, err := s.Cancel(x.c.ID, canceled.UUID, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AddOptOut(x.c.ID, opted.Phone, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AddOptOut(y.c.ID, opted.Phone, T0); err != nil { // another company's list: nothing to x
		t.Fatal(err)
	}
	if _, err := s.DeleteDevice(x.c.ID, dev3.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	now := T0.Add(time.Hour)
	released, err := s.ReleaseDue(now, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		m      store.Message
		status string
		errTxt string
		held   time.Time
	}{
		{a1, store.MsgQueued, "", time.Time{}},
		{b1, store.MsgQueued, "", time.Time{}},
		{opted, store.MsgFailed, "recipient_opted_out", time.Time{}},
		{held, store.MsgQueued, "", opens},
		{inWindow, store.MsgQueued, "", time.Time{}},
		{a2, store.MsgQueued, "", time.Time{}},
	}
	if len(released) != len(want) {
		t.Fatalf("released %d: %+v, want %d", len(released), released, len(want))
	}
	for i, w := range want {
		got := released[i]
		if got.ID != w.m.ID || got.Status != w.status || got.Error != w.errTxt || !got.HeldUntil.Equal(w.held) || !got.UpdatedAt.Equal(now) {
			t.Fatalf("released %d: %s %s %q held until %v at %v, want %s %s %q held until %v at %v",
				i, got.UUID, got.Status, got.Error, got.HeldUntil, got.UpdatedAt, w.m.UUID, w.status, w.errTxt, w.held, now)
		}
		stored := x.stored
		if w.m.CompanyID == y.c.ID {
			stored = y.stored
		}
		if m := stored(got.UUID); m.Status != got.Status || m.Error != got.Error || !m.HeldUntil.Equal(got.HeldUntil) || m.QueuePlace() != got.QueuePlace() {
			t.Fatalf("read back %s: %+v, want %+v", got.UUID, m, got)
		}
	}
	// The devices' queues: x's first device has its queued one behind the
	// send queued before; the second has its two in due order.
	if p, err := pendingSettled(t, s, x.c.ID, x.dev.ID, 0, 10, now); err != nil || len(p) != 2 || p[0].ID != before.ID || p[1].ID != a1.ID {
		t.Fatalf("pending of the first device: %+v (%v), want the one queued before, then %s", p, err, a1.UUID)
	}
	if p, err := pendingSettled(t, s, x.c.ID, dev2.ID, 0, 10, now); err != nil || len(p) != 2 || p[0].ID != inWindow.ID || p[1].ID != a2.ID {
		t.Fatalf("pending of the second device: %+v (%v), want %s then %s", p, err, inWindow.UUID, a2.UUID)
	}
	if p, err := pendingSettled(t, s, y.c.ID, y.dev.ID, 0, 10, now); err != nil || len(p) != 1 || p[0].ID != b1.ID {
		t.Fatalf("pending of the other company's device: %+v (%v), want %s", p, err, b1.UUID)
	}
	fs, err := s.DeviceFailures(x.c.ID, dev2.ID)
	if err != nil || len(fs) != 1 || fs[0].QueueID != opted.UUID || fs[0].Error != "recipient_opted_out" || !fs[0].At.Equal(now) {
		t.Fatalf("failures of the second device: %+v (%v), want %s failed at the release", fs, err, opted.UUID)
	}
	if m := x.stored(canceled.UUID); m.Status != store.MsgCanceled {
		t.Fatalf("the canceled one: %s", m.Status)
	}
	if m := x.stored(gone.UUID); m.Status != store.MsgFailed || m.Error != "device_deleted" {
		t.Fatalf("the deleted device's one: %s %q, want failed device_deleted", m.Status, m.Error)
	}
	if m := x.stored(later.UUID); m.Status != store.MsgScheduled {
		t.Fatalf("the later one: %s, want scheduled", m.Status)
	}
	if again, err := s.ReleaseDue(now, 10); err != nil || len(again) != 0 {
		t.Fatalf("a second release: %+v (%v), want none", again, err)
	}
	if due, ok, err := s.NextDue(); err != nil || !ok || !due.Equal(later.SendAt) {
		t.Fatalf("NextDue: %v %v (%v), want the later one's %v", due, ok, err, later.SendAt)
	}
}
