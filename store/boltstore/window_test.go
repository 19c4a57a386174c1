package boltstore

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/window"
)

// A queued job a link reaches outside its window is held: it leaves the
// queue for the due-time index at the window's opening, which NextDue
// names, and keeps its expiry. A scheduled job due while its window is
// closed is held the same way. At the opening ReleaseDue queues both
// behind every place handed out; a held job that expires, is canceled, or
// whose device is deleted leaves every index.
func TestHeldJobsWaitForTheirWindow(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "a@example.com", "k")
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a Sunday
	opens := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	w := &window.Window{Days: []string{"mon"}, From: "09:00", To: "10:00", TimeZone: "UTC"}
	now := func() time.Time { return t0 }
	enqueue := func(text string, sendAt, expires time.Time) Message {
		t.Helper()
		m := Message{UUID: "u-" + text, CompanyID: c.ID, Device: "fp", Channel: "sms", Phone: "+15551234567", Text: text, SIMSlot: "SIM1", SendAt: sendAt, ExpiresAt: expires, Window: w}
		out, _, err := s.Enqueue(&m, IdempotencyKey{}, now, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	held := enqueue("held", time.Time{}, opens.Add(time.Hour))
	short := enqueue("short", time.Time{}, t0.Add(time.Hour))
	canceled := enqueue("canceled", time.Time{}, opens.Add(time.Hour))
	scheduled := enqueue("scheduled", t0.Add(time.Hour), opens.Add(time.Hour))

	pending, err := pendingSettled(t, s, c.ID, 1, 0, 10, t0)
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending: %v %v, want 3 jobs", pending, err)
	}
	cursor := pending[2].QueuePlace()
	for _, m := range pending {
		if m.Status != MsgQueued || !m.HeldUntil.Equal(opens) {
			t.Fatalf("pending outside the window: got %s held until %v, want queued held until %v", m.Status, m.HeldUntil, opens)
		}
	}
	if again, _ := pendingSettled(t, s, c.ID, 1, 0, 10, t0); len(again) != 0 {
		t.Fatalf("pending after the hold: got %d jobs, want none (held jobs leave the queue)", len(again))
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("NextDue: got %v %v, want the scheduled one's send_at", at, ok)
	}
	if _, err := s.Cancel(c.ID, canceled.UUID, t0); err != nil {
		t.Fatal(err)
	}
	// The scheduled one falls due while the window is closed: held too.
	released, err := s.ReleaseDue(t0.Add(time.Hour), 10)
	if err != nil || len(released) != 1 || released[0].Status != MsgQueued || !released[0].HeldUntil.Equal(opens) {
		t.Fatalf("release of the scheduled one: %+v %v, want queued, held until the opening", released, err)
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(opens) {
		t.Fatalf("NextDue: got %v %v, want the opening %v", at, ok, opens)
	}
	// The short one expires while held.
	expired, err := s.ExpireQueued(t0.Add(2*time.Hour), 10)
	if err != nil || len(expired) != 1 || expired[0].ID != short.ID || expired[0].Status != MsgExpired {
		t.Fatalf("expire: %+v %v, want the short one expired", expired, err)
	}
	if released, _ := s.ReleaseDue(opens.Add(-time.Nanosecond), 10); len(released) != 0 {
		t.Fatalf("before the opening: released %d", len(released))
	}
	released, err = s.ReleaseDue(opens, 10)
	if err != nil || len(released) != 2 {
		t.Fatalf("at the opening: %+v %v, want the held and the scheduled one", released, err)
	}
	for _, m := range released {
		if m.Status != MsgQueued || !m.HeldUntil.IsZero() || m.QueuePlace() <= cursor {
			t.Fatalf("released %+v, want queued, not held, placed after %d", m, cursor)
		}
	}
	pending, err = pendingSettled(t, s, c.ID, 1, cursor, 10, opens)
	if err != nil || len(pending) != 2 || pending[0].ID != held.ID || pending[1].ID != scheduled.ID || !pending[0].HeldUntil.IsZero() {
		t.Fatalf("pending at the opening: %+v %v, want held then scheduled, to send", pending, err)
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("NextDue: something still waits")
	}
	// Held again past the window, then the device goes: the job fails and leaves every index.
	if _, err := pendingSettled(t, s, c.ID, 1, 0, 10, opens.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.MessageByUUID(c.ID, held.UUID); m.HeldUntil.IsZero() {
		t.Fatal("past the window: the job is not held")
	}
	if _, err := s.DeleteDevice(c.ID, "fp", opens.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.MessageByUUID(c.ID, held.UUID); m.Status != MsgFailed || m.Error != "device_deleted" {
		t.Fatalf("after the device's deletion: got %s %q, want failed device_deleted", m.Status, m.Error)
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("NextDue after the deletion: a key was left behind")
	}
	if expired, _ := s.ExpireQueued(opens.Add(48*time.Hour), 10); len(expired) != 0 {
		t.Fatalf("after the deletion: %d expiry keys were left behind", len(expired))
	}
}

// pendingSettled is Pending that waits for the shared commit holding (or
// failing) the jobs it returned so, as a link's next read would see it.
func pendingSettled(t *testing.T, s *Store, companyID, deviceID, after uint64, limit int, now time.Time) ([]Message, error) {
	t.Helper()
	told := make(chan []Message, 1)
	got, err := s.Pending(companyID, deviceID, after, limit, now, func(ms []Message) { told <- ms })
	for _, m := range got {
		if !m.HeldUntil.IsZero() || m.Status != MsgQueued {
			select {
			case <-told:
			case <-time.After(10 * time.Second):
				t.Fatal("the jobs held at dispatch were not committed")
			}
			break
		}
	}
	return got, err
}
