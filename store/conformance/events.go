package conformance

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// EventsStore is what the events suite calls: the writes whose webhook
// events the builders registered with the store make (store.InboundEvents,
// store.DeviceEvents), and what shows their outbox.
type EventsStore interface {
	Base
	SetInboundEvents(h store.InboundEvents)
	SetDeviceEvents(h store.DeviceEvents)
	StoreInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
	InboundList(q store.InboundQuery) ([]store.Message, error)
	Device(fingerprint string) (store.Device, error)
	UpdateDeviceWith(companyID, deviceID uint64, fn func(d *store.Device) ([]store.DeviceEvent, error)) (store.Device, error)
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error)
	WebhookOutboxSize(companyID uint64) (deliveries int, bytes int64, err error)
	WebhookAttempts(companyID, webhookID uint64, limit int) ([]store.WebhookAttempt, error)
	StorageUsed(companyID uint64, t time.Time) (int64, error)
	AddOptOut(companyID uint64, phone string, now time.Time) (store.OptOut, bool, error)
	OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error)
}

// Events runs the suite of the webhook events of inbound messages and of
// devices' changes, written by the builders registered with the store.
func Events(t *testing.T, open Opener[EventsStore]) {
	t.Run("Inbound", func(t *testing.T) { t.Parallel(); eventsInbound(t, open(t)) })
	t.Run("InboundRefused", func(t *testing.T) { t.Parallel(); eventsInboundRefused(t, open(t)) })
	t.Run("InboundOutboxFull", func(t *testing.T) { t.Parallel(); eventsInboundOutboxFull(t, open(t)) })
	t.Run("Device", func(t *testing.T) { t.Parallel(); eventsDevice(t, open(t)) })
	t.Run("DeviceRefused", func(t *testing.T) { t.Parallel(); eventsDeviceRefused(t, open(t)) })
}

// EventsBudgetBytes is the daily storage budget EventsBudget's store opens
// with: room for one inbound message, not for its event too.
const EventsBudgetBytes = 2000

// EventsBudget runs the events' cases of the daily storage budget on a store
// whose companies may add EventsBudgetBytes a day.
func EventsBudget(t *testing.T, open Opener[EventsStore]) {
	t.Run("ChargedAfter", func(t *testing.T) { t.Parallel(); eventsChargedAfter(t, open(t)) })
	t.Run("StopOverBudget", func(t *testing.T) { t.Parallel(); eventsStopOverBudget(t, open(t)) })
}

// eventsStopOverBudget: a STOP that comes once the company's day's budget
// is spent is refused as every message then (nothing of it stored; the
// phone sends it again after midnight), but its sender is listed at once,
// so the sends accepted before it stop now; such entries (and an admin's)
// may take the day past the budget by store.OptOutOverdraft, no further. A
// START over the budget waits for its resend; a STOP listed already costs
// nothing again; the resend, stored the next day, finds its entry listed.
func eventsStopOverBudget(t *testing.T, s EventsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("stop-%d", unique()))
	inbound := func(clientID, from, text string) store.Message {
		return store.Message{UUID: fmt.Sprintf("in-%d", unique()), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms",
			Phone: from, Text: text, SIMSlot: "SIM1", ClientID: clientID}
	}
	clock := stoppedAt(T0)
	for i := 0; ; i++ {
		if i > EventsBudgetBytes/store.MessageRowCost {
			t.Fatal("the budget never ran out")
		}
		if _, _, err := s.StoreInbound(new(inbound(fmt.Sprint("fill-", i), "+15557650001", "hi")), clock); errors.Is(err, store.ErrStorageBudget) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	used, _ := s.StorageUsed(c.ID, T0)
	listed := func() map[string]string {
		t.Helper()
		list, err := s.OptOuts(c.ID, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range list {
			out[o.Phone] = o.Source
		}
		return out
	}
	stop := inbound("stop-1", "+15557650002", "STOP")
	if _, _, err := s.StoreInbound(new(stop), clock); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("a STOP over the budget: %v, want the budget's refusal (the phone sends it again)", err)
	}
	if got := listed(); got["+15557650002"] != store.OptOutKeyword {
		t.Fatalf("opt-outs after a STOP over the budget: %v, want its sender listed now", got)
	}
	if now, _ := s.StorageUsed(c.ID, T0); now != used+store.OptOutCost {
		t.Fatalf("%d bytes counted, want %d (the day's and the entry's alone)", now, used+store.OptOutCost)
	}
	used += store.OptOutCost
	for _, again := range []store.Message{stop, inbound("stop-2", "+15557650002", "stop")} {
		if _, _, err := s.StoreInbound(&again, clock); !errors.Is(err, store.ErrStorageBudget) {
			t.Fatalf("a STOP of a listed sender over the budget: %v, want the budget's refusal", err)
		}
	}
	if _, _, err := s.StoreInbound(new(inbound("start-1", "+15557650002", "START")), clock); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("a START over the budget: %v, want the budget's refusal", err)
	}
	if got := listed(); len(got) != 1 || got["+15557650002"] != store.OptOutKeyword {
		t.Fatalf("opt-outs after repeats and a START over the budget: %v, want the one STOP's", got)
	}
	if now, _ := s.StorageUsed(c.ID, T0); now != used {
		t.Fatalf("%d bytes counted after repeats, want %d still", now, used)
	}
	limit := EventsBudgetBytes + store.OptOutOverdraft(EventsBudgetBytes)
	fit := int((limit - used) / store.OptOutCost)
	for i := range fit + 1 {
		from := fmt.Sprintf("+155576510%02d", i)
		if _, _, err := s.StoreInbound(new(inbound(fmt.Sprint("stop-x", i), from, "Stop")), clock); !errors.Is(err, store.ErrStorageBudget) {
			t.Fatalf("STOP %d over the budget: %v, want the budget's refusal", i, err)
		}
		if _, ok := listed()[from]; ok != (i < fit) {
			t.Fatalf("STOP %d over the budget listed %v, want %v: %d fit in the overdraft", i, ok, i < fit, fit)
		}
	}
	if _, _, err := s.AddOptOut(c.ID, "+15557659999", T0); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("an opt-out past the overdraft: %v, want the budget's refusal", err)
	}
	if now, _ := s.StorageUsed(c.ID, T0); now != used+int64(fit)*store.OptOutCost || now > limit {
		t.Fatalf("%d bytes counted, want %d (within the overdraft, %d)", now, used+int64(fit)*store.OptOutCost, limit)
	}
	next := T0.Add(24 * time.Hour)
	if _, _, err := s.StoreInbound(new(stop), stoppedAt(next)); err != nil {
		t.Fatalf("the STOP sent again the next day: %v", err)
	}
	want := store.MessageCost(store.Message{Text: stop.Text, Phone: stop.Phone, ClientID: stop.ClientID})
	if now, _ := s.StorageUsed(c.ID, next); now != want {
		t.Fatalf("the next day: %d bytes counted, want the message's %d alone (its sender is listed)", now, want)
	}
}

// inbound is a new SMS the tenant's device received.
func (w webhookTenant) inbound(clientID string) store.Message {
	return store.Message{UUID: fmt.Sprintf("in-%d", unique()), CompanyID: w.company.ID, DeviceID: w.device.ID, Channel: "sms",
		Phone: "+15557650001", Text: "hi", SIMSlot: "SIM1", ClientID: clientID}
}

// eventsPerEntry builds an event of the body with one delivery, due at
// at, per entry of the set.
func eventsPerEntry(set store.WebhookSet, body string, at time.Time) (store.WebhookEvent, []store.WebhookDelivery) {
	ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d", unique()), Body: []byte(body)}
	var out []store.WebhookDelivery
	for _, e := range set.Entries {
		out = append(out, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d", unique()), EventType: "sms.received",
			WebhookID: e.ID, CreatedAt: at, NextAttemptAt: at})
	}
	return ev, out
}

// eventsLog records what the store asked of a builder: the calls of Build
// (a transaction tried again calls it again) and of Committed.
type eventsLog struct {
	mu        sync.Mutex
	built     []string
	committed []store.OutboxAdd
	seen      []string // what Committed read back from the store
}

func (l *eventsLog) build(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.built = append(l.built, what)
}

func (l *eventsLog) commit(res store.OutboxAdd, seen string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.committed, l.seen = append(l.committed, res), append(l.seen, seen)
}

// reset forgets the calls so far.
func (l *eventsLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.built, l.committed, l.seen = nil, nil, nil
}

// counts returns how many times Build and Committed ran.
func (l *eventsLog) counts() (built, committed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.built), len(l.committed)
}

const eventsBody = `{"type":"sms.received"}`

// eventsInbound: a new inbound message's builder gets the company's set and
// the message as stored, in the message's transaction: the message and its
// deliveries are stored together, and Committed runs once, after the
// commit, with what was queued. A repeat of the message builds nothing; a
// company without entries is not built for; an error of Build refuses the
// message, and nothing of it is stored.
func eventsInbound(t *testing.T, s EventsStore) {
	w := webhookCompany(t, s, 2)
	bare := webhookCompany(t, s, 0)
	var log eventsLog
	boom := errors.New("the builder failed")
	fail := false
	s.SetInboundEvents(store.InboundEvents{
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			log.build(m.ClientID)
			if set.CompanyID != m.CompanyID || len(set.Entries) != 2 || set.Secret != w.set.Secret {
				t.Errorf("build got the set %+v, want the company's", set)
			}
			if m.ID == 0 || m.Direction != store.Inbound || m.Status != store.MsgReceived || !m.CreatedAt.Equal(T0) || m.Device != w.device.Fingerprint {
				t.Errorf("build got %+v, want the message as stored", m)
			}
			if fail {
				return store.WebhookEvent{}, nil, boom
			}
			ev, ds := eventsPerEntry(set, eventsBody, T0)
			return ev, ds, nil
		},
		Committed: func(m store.Message, res store.OutboxAdd) {
			seen := ""
			if msgs, err := s.InboundList(store.InboundQuery{CompanyID: m.CompanyID, Limit: 10}); err == nil && len(msgs) > 0 {
				seen = msgs[0].ClientID
			}
			log.commit(res, seen)
		},
	})
	clock := func() time.Time { return T0 }

	fail = true
	if _, _, err := s.StoreInbound(new(w.inbound("c1")), clock); !errors.Is(err, boom) {
		t.Fatalf("a failing builder: %v, want its error", err)
	}
	if msgs, _ := s.InboundList(store.InboundQuery{CompanyID: w.company.ID, Limit: 10}); len(msgs) != 0 {
		t.Fatalf("after a refused message: %d stored, want none", len(msgs))
	}
	if n, b, err := s.WebhookOutboxSize(w.company.ID); n != 0 || b != 0 || err != nil {
		t.Fatalf("outbox after a refused message: %d deliveries, %d bytes (%v), want none", n, b, err)
	}
	if built, committed := log.counts(); built == 0 || committed != 0 {
		t.Fatalf("a refused message: built %d times, %d commits heard; want a build and no commit", built, committed)
	}

	fail = false
	log.reset()
	stored, dup, err := s.StoreInbound(new(w.inbound("c1")), clock)
	if err != nil || dup {
		t.Fatalf("the message again: dup %v (%v), want it stored", dup, err)
	}
	if n, b, _ := s.WebhookOutboxSize(w.company.ID); n != 2 || b != int64(len(eventsBody)) {
		t.Fatalf("outbox: %d deliveries of %d bytes, want 2 of %d", n, b, len(eventsBody))
	}
	if _, committed := log.counts(); committed != 1 || log.committed[0] != (store.OutboxAdd{Queued: 2, Pending: 2, PendingBytes: int64(len(eventsBody))}) || log.seen[0] != "c1" {
		t.Fatalf("Committed: %+v reading %q; want once, after the commit, with 2 queued", log.committed, log.seen)
	}
	if _, dup, err := s.StoreInbound(new(w.inbound("c1")), clock); err != nil || !dup {
		t.Fatalf("a repeat: dup %v (%v)", dup, err)
	}
	if built, committed := log.counts(); built != 1 || committed != 1 {
		t.Fatalf("a repeat built %d times in all, %d commits heard; want the first message's only", built, committed)
	}
	if n, _, _ := s.WebhookOutboxSize(w.company.ID); n != 2 {
		t.Fatalf("outbox after a repeat: %d deliveries, want 2", n)
	}
	if msgs, _ := s.InboundList(store.InboundQuery{CompanyID: w.company.ID, Limit: 10}); len(msgs) != 1 || msgs[0].ID != stored.ID {
		t.Fatalf("stored: %+v, want the one message", msgs)
	}

	if _, _, err := s.StoreInbound(new(bare.inbound("c1")), clock); err != nil {
		t.Fatal(err)
	}
	if built, committed := log.counts(); built != 1 || committed != 1 {
		t.Fatalf("a company without webhooks: built %d times in all, %d commits heard; want no call", built, committed)
	}
}

// eventsInboundRefused: an inbound message the store refuses (its device
// gone, its company's budget spent) never reaches the builder.
func eventsInboundRefused(t *testing.T, s EventsStore) {
	w := webhookCompany(t, s, 1)
	other := webhookCompany(t, s, 1)
	var log eventsLog
	s.SetInboundEvents(store.InboundEvents{
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			log.build(m.ClientID)
			ev, ds := eventsPerEntry(set, eventsBody, T0)
			return ev, ds, nil
		},
		Committed: func(_ store.Message, res store.OutboxAdd) { log.commit(res, "") },
	})
	gone := w.inbound("c1")
	gone.DeviceID = other.device.ID // another company's device: not this company's
	if _, _, err := s.StoreInbound(&gone, func() time.Time { return T0 }); !errors.Is(err, store.ErrDeviceGone) {
		t.Fatalf("another company's device: %v, want ErrDeviceGone", err)
	}
	if built, committed := log.counts(); built != 0 || committed != 0 {
		t.Fatalf("a refused message: built %d times, %d commits heard; want none", built, committed)
	}
	for _, tn := range []webhookTenant{w, other} {
		if n, _, _ := s.WebhookOutboxSize(tn.company.ID); n != 0 {
			t.Fatalf("company %d: %d deliveries, want none", tn.company.ID, n)
		}
	}
}

// eventsInboundOutboxFull: an event over the company's outbox limits is
// not queued, yet its message is stored: each delivery gets a failed line
// in the deliveries log, and Committed hears how many were refused.
func eventsInboundOutboxFull(t *testing.T, s EventsStore) {
	w := webhookCompany(t, s, 2)
	var log eventsLog
	s.SetInboundEvents(store.InboundEvents{
		Limits: store.OutboxLimits{MaxDeliveries: 3, LogKeep: 10},
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			ev, ds := eventsPerEntry(set, eventsBody, T0)
			return ev, ds, nil
		},
		Committed: func(_ store.Message, res store.OutboxAdd) { log.commit(res, "") },
	})
	for _, id := range []string{"c1", "c2"} {
		if _, _, err := s.StoreInbound(new(w.inbound(id)), func() time.Time { return T0 }); err != nil {
			t.Fatalf("message %s: %v", id, err)
		}
	}
	if msgs, _ := s.InboundList(store.InboundQuery{CompanyID: w.company.ID, Limit: 10}); len(msgs) != 2 {
		t.Fatalf("%d messages stored, want both", len(msgs))
	}
	want := []store.OutboxAdd{{Queued: 2, Pending: 2, PendingBytes: int64(len(eventsBody))}, {Refused: 2, Pending: 2, PendingBytes: int64(len(eventsBody))}}
	if len(log.committed) != 2 || log.committed[0] != want[0] || log.committed[1] != want[1] {
		t.Fatalf("Committed heard %+v, want %+v", log.committed, want)
	}
	if n, _, _ := s.WebhookOutboxSize(w.company.ID); n != 2 {
		t.Fatalf("outbox: %d deliveries, want the first message's 2", n)
	}
	lines, err := s.WebhookAttempts(w.company.ID, 0, 10)
	if err != nil || len(lines) != 2 {
		t.Fatalf("log: %+v (%v), want the 2 refused deliveries", lines, err)
	}
	for _, l := range lines {
		if l.State != store.WebhookFailed || !strings.Contains(l.Error, "outbox is full") {
			t.Errorf("log line %+v, want failed: the outbox is full", l)
		}
	}
}

// eventsDevice: the events a device's change raises are built one by one,
// in order, from the device as the change left it, in the change's
// transaction; each counts on its own time's day, and Committed runs for
// each, after the commit. A change that raises nothing builds nothing.
func eventsDevice(t *testing.T, s EventsStore) {
	w := webhookCompany(t, s, 2)
	var log eventsLog
	s.SetDeviceEvents(store.DeviceEvents{
		Build: func(set store.WebhookSet, d store.Device, ev store.DeviceEvent) (store.WebhookEvent, []store.WebhookDelivery, error) {
			log.build(ev.Type + " " + d.Name)
			if set.CompanyID != w.company.ID || len(set.Entries) != 2 || d.ID != w.device.ID {
				t.Errorf("build got the set %+v and the device %+v, want the company's", set, d)
			}
			e, ds := eventsPerEntry(set, eventsBody, ev.At)
			return e, ds, nil
		},
		Committed: func(d store.Device, ev store.DeviceEvent, res store.OutboxAdd) {
			seen := ""
			if cur, err := s.Device(d.Fingerprint); err == nil {
				seen = ev.Type + " " + cur.Name
			}
			log.commit(res, seen)
		},
	})
	day := T0.Add(48 * time.Hour) // a day of its own, so the events' bytes show
	got, err := s.UpdateDeviceWith(w.company.ID, w.device.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.Name = "Renamed"
		return []store.DeviceEvent{{Type: "device.battery_low", At: day}, {Type: "device.online", At: day}}, nil
	})
	if err != nil || got.Name != "Renamed" {
		t.Fatalf("update: %+v (%v)", got, err)
	}
	if want := []string{"device.battery_low Renamed", "device.online Renamed"}; strings.Join(log.built, ",") != strings.Join(want, ",") {
		t.Fatalf("built %q, want %q", log.built, want)
	}
	if want := []string{"device.battery_low Renamed", "device.online Renamed"}; strings.Join(log.seen, ",") != strings.Join(want, ",") {
		t.Fatalf("Committed ran for %q, want once per event, after the commit: %q", log.seen, want)
	}
	if log.committed[1] != (store.OutboxAdd{Queued: 2, Pending: 4, PendingBytes: 2 * int64(len(eventsBody))}) {
		t.Fatalf("the second event: %+v, want 2 queued behind the first's", log.committed[1])
	}
	if n, _, _ := s.WebhookOutboxSize(w.company.ID); n != 4 {
		t.Fatalf("outbox: %d deliveries, want 4", n)
	}
	if used, _ := s.StorageUsed(w.company.ID, day); used != 2*(int64(len(eventsBody))+2*store.DeliveryRowCost) {
		t.Fatalf("%d bytes counted on the events' day, want both events' bodies and deliveries", used)
	}
	log.reset()
	if _, err := s.UpdateDeviceWith(w.company.ID, w.device.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.Name = "Quiet"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if built, committed := log.counts(); built != 0 || committed != 0 {
		t.Fatalf("a change that raised nothing: built %d times, %d commits heard", built, committed)
	}
}

// eventsDeviceRefused: a change that fails, or whose event the builder
// fails, stores neither the device's change nor any event; another
// company's device is ErrNotFound.
func eventsDeviceRefused(t *testing.T, s EventsStore) {
	w := webhookCompany(t, s, 1)
	other := webhookCompany(t, s, 1)
	var log eventsLog
	boom := errors.New("the builder failed")
	s.SetDeviceEvents(store.DeviceEvents{
		Build: func(set store.WebhookSet, d store.Device, ev store.DeviceEvent) (store.WebhookEvent, []store.WebhookDelivery, error) {
			log.build(ev.Type)
			if ev.Type == "bad" {
				return store.WebhookEvent{}, nil, boom
			}
			e, ds := eventsPerEntry(set, eventsBody, ev.At)
			return e, ds, nil
		},
		Committed: func(_ store.Device, _ store.DeviceEvent, res store.OutboxAdd) { log.commit(res, "") },
	})
	refuse := errors.New("refused")
	if _, err := s.UpdateDeviceWith(w.company.ID, w.device.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.Name = "Rolled back"
		return []store.DeviceEvent{{Type: "device.online", At: T0}}, refuse
	}); !errors.Is(err, refuse) {
		t.Fatalf("a refused change: %v, want its error", err)
	}
	if built, committed := log.counts(); built != 0 || committed != 0 {
		t.Fatalf("a refused change: built %d times, %d commits heard; want none", built, committed)
	}
	if _, err := s.UpdateDeviceWith(w.company.ID, w.device.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.Name = "Rolled back"
		return []store.DeviceEvent{{Type: "device.online", At: T0}, {Type: "bad", At: T0}}, nil
	}); !errors.Is(err, boom) {
		t.Fatalf("a change whose event failed: %v, want the builder's error", err)
	}
	if _, committed := log.counts(); committed != 0 {
		t.Fatalf("a change whose event failed: %d commits heard, want none", committed)
	}
	if d, _ := s.Device(w.device.Fingerprint); d.Name != w.device.Name {
		t.Fatalf("the device after refused changes: %q, want %q", d.Name, w.device.Name)
	}
	if n, _, _ := s.WebhookOutboxSize(w.company.ID); n != 0 {
		t.Fatalf("outbox after refused changes: %d deliveries, want none", n)
	}
	called := false
	if _, err := s.UpdateDeviceWith(w.company.ID, other.device.ID, func(*store.Device) ([]store.DeviceEvent, error) {
		called = true
		return []store.DeviceEvent{{Type: "device.online", At: T0}}, nil
	}); !errors.Is(err, store.ErrDeviceGone) || called {
		t.Fatalf("another company's device: %v (fn called %v), want ErrDeviceGone", err, called)
	}
	if n, _, _ := s.WebhookOutboxSize(other.company.ID); n != 0 {
		t.Fatalf("the other company's outbox: %d deliveries, want none", n)
	}
}

// eventsChargedAfter: an inbound message the budget admits keeps its
// webhook event even when the event takes the day over the budget
// (refusing it alone would lose the push of a stored message); the
// company's next message is refused, and its builder never called. A
// repeat of the stored message over the budget is answered as the
// duplicate it is, charging nothing (refused, the phone would send it
// again until midnight); another company's budget is its own, and the
// next UTC day the budget is whole again.
func eventsChargedAfter(t *testing.T, s EventsStore) {
	w := webhookCompany(t, s, 2)
	body := `{"data":"` + strings.Repeat("y", 1500) + `"}`
	var log eventsLog
	s.SetInboundEvents(store.InboundEvents{
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			log.build(m.ClientID)
			ev, ds := eventsPerEntry(set, body, T0)
			return ev, ds, nil
		},
		Committed: func(_ store.Message, res store.OutboxAdd) { log.commit(res, "") },
	})
	clock := func() time.Time { return T0 }
	before, err := s.StorageUsed(w.company.ID, T0) // the device's pairing code
	if err != nil {
		t.Fatal(err)
	}
	first := w.inbound("c1")
	if _, _, err := s.StoreInbound(&first, clock); err != nil {
		t.Fatalf("the first message: %v", err)
	}
	if _, committed := log.counts(); committed != 1 || log.committed[0].Queued != 2 {
		t.Fatalf("the first message's event: %+v, want 2 deliveries queued", log.committed)
	}
	msgCost := store.MessageCost(store.Message{Text: first.Text, Phone: first.Phone, ClientID: first.ClientID})
	want := before + msgCost + int64(len(body)) + 2*store.DeliveryRowCost
	if used, _ := s.StorageUsed(w.company.ID, T0); used != want || used <= EventsBudgetBytes {
		t.Fatalf("%d bytes counted, want %d (the message and its event, over the budget)", used, want)
	}
	if _, _, err := s.StoreInbound(new(w.inbound("c2")), clock); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("the next message: %v, want the budget error", err)
	}
	if built, committed := log.counts(); built != 1 || committed != 1 {
		t.Fatalf("a refused message: built %d times in all, %d commits heard; want the first message's only", built, committed)
	}
	if used, _ := s.StorageUsed(w.company.ID, T0); used != want {
		t.Fatalf("%d bytes counted after a refused message, want %d still", used, want)
	}
	if msgs, _ := s.InboundList(store.InboundQuery{CompanyID: w.company.ID, Limit: 10}); len(msgs) != 1 {
		t.Fatalf("%d messages stored, want 1", len(msgs))
	}
	again, dup, err := s.StoreInbound(new(w.inbound("c1")), clock)
	if err != nil || !dup || again.UUID != first.UUID {
		t.Fatalf("the stored message again, over the budget: %+v dup %v (%v), want the stored one, a duplicate", again, dup, err)
	}
	if built, committed := log.counts(); built != 1 || committed != 1 {
		t.Fatalf("a repeat over the budget: built %d times in all, %d commits heard; want the first message's only", built, committed)
	}
	if used, _ := s.StorageUsed(w.company.ID, T0); used != want {
		t.Fatalf("%d bytes counted after a repeat, want %d still", used, want)
	}
	other := webhookCompany(t, s, 0)
	if _, _, err := s.StoreInbound(new(other.inbound("c1")), clock); err != nil {
		t.Fatalf("another company's message: %v, want it stored (its budget is its own)", err)
	}
	next := time.Date(T0.Year(), T0.Month(), T0.Day()+1, 0, 0, 0, 0, time.UTC)
	if _, dup, err := s.StoreInbound(new(w.inbound("c2")), func() time.Time { return next }); err != nil || dup {
		t.Fatalf("the refused message the next day: dup %v (%v), want it stored", dup, err)
	}
}
