package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// SendsStore is what the send path's suite calls: queuing (single, bulk,
// imported history), the idempotency keys, the plan's message limit, the
// daily storage budget, opt-outs, scheduling, windows and expiry.
type SendsStore interface {
	Base
	SetPlans(p store.Plans)
	Enqueue(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	EnqueueBulk(ms []store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func([]store.Message) (int, []byte)) ([]store.Message, *store.Idempotent, error)
	ImportMessages(msgs []store.Message) error
	StatsTotals(companyID uint64) (store.Counts, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	Cancel(companyID uint64, uuid string, now time.Time) (store.Message, error)
	PruneIdempotency(cutoff time.Time) (int, error)
	AddOptOut(companyID uint64, phone string, now time.Time) (o store.OptOut, created bool, err error)
	RemoveOptOut(companyID uint64, phone string) error
	OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error)
	OptedOut(companyID uint64, phone string) (bool, error)
	StorageUsed(companyID uint64, t time.Time) (int64, error)
	DailyStorageBudget() int64
	PruneStorageCounters(cutoff time.Time) (int, error)
	Usage(companyID uint64, periodStart time.Time) (messages int64, devices int, err error)
	NextDue() (at time.Time, ok bool, err error)
	ReleaseDue(now time.Time, limit int) ([]store.Message, error)
	ExpireQueued(now time.Time, limit int) ([]store.Message, error)
	DeviceFailures(companyID, deviceID uint64) ([]store.DeviceFailure, error)
	SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]store.SIMUsage, error)
	SetSIMCaps(companyID uint64, fingerprint string, caps map[string]store.SIMCaps, now time.Time) ([]store.SIMUsage, error)
}

// Sends runs the suite of the send path: what every send keeps in its one
// transaction (the device, the idempotency key, the plan, the budget, the
// opt-outs) and what becomes of a queued message (scheduling, windows,
// expiry, cancel).
func Sends(t *testing.T, open Opener[SendsStore]) {
	t.Run("Enqueue", func(t *testing.T) { t.Parallel(); sendEnqueue(t, open(t)) })
	t.Run("DeviceRefusals", func(t *testing.T) { t.Parallel(); sendDeviceRefusals(t, open(t)) })
	t.Run("Bulk", func(t *testing.T) { t.Parallel(); sendBulk(t, open(t)) })
	t.Run("IdempotencyKeys", func(t *testing.T) { t.Parallel(); sendIdempotencyKeys(t, open(t)) })
	t.Run("IdempotencyRace", func(t *testing.T) { t.Parallel(); sendIdempotencyRace(t, open(t)) })
	t.Run("PruneIdempotency", func(t *testing.T) { t.Parallel(); sendPruneIdempotency(t, open(t)) })
	t.Run("PlanLimit", func(t *testing.T) { t.Parallel(); sendPlanLimit(t, open(t)) })
	t.Run("PlanLimitRace", func(t *testing.T) { t.Parallel(); sendPlanLimitRace(t, open(t)) })
	t.Run("PlanLimitAcrossDevices", func(t *testing.T) { t.Parallel(); sendPlanLimitAcrossDevices(t, open(t)) })
	t.Run("IdempotencyRounds", func(t *testing.T) { t.Parallel(); sendIdempotencyRounds(t, open(t)) })
	t.Run("IdempotencyAcrossCompanies", func(t *testing.T) { t.Parallel(); sendIdempotencyAcrossCompanies(t, open(t)) })
	t.Run("SIMCapRace", func(t *testing.T) { t.Parallel(); sendSIMCapRace(t, open(t)) })
	t.Run("PruneStorageCounters", func(t *testing.T) { t.Parallel(); sendPruneStorageCounters(t, open(t)) })
	t.Run("OptOuts", func(t *testing.T) { t.Parallel(); sendOptOuts(t, open(t)) })
	t.Run("Schedule", func(t *testing.T) { t.Parallel(); sendSchedule(t, open(t)) })
	t.Run("ReleaseVets", func(t *testing.T) { t.Parallel(); sendReleaseVets(t, open(t)) })
	t.Run("Windows", func(t *testing.T) { t.Parallel(); sendWindows(t, open(t)) })
	t.Run("Expiry", func(t *testing.T) { t.Parallel(); sendExpiry(t, open(t)) })
	t.Run("SweepFailures", func(t *testing.T) { t.Parallel(); sendSweepFailures(t, open(t)) })
	t.Run("Cancel", func(t *testing.T) { t.Parallel(); sendCancel(t, open(t)) })
	t.Run("Import", func(t *testing.T) { t.Parallel(); sendImport(t, open(t)) })
}

// sender queues SMS of one company through one device at a clock the test
// moves.
type sender struct {
	t   *testing.T
	s   SendsStore
	c   store.Company
	dev store.Device
	at  time.Time
}

func newSender(t *testing.T, s SendsStore) *sender {
	c, _ := Company(t, s)
	fp := fmt.Sprintf("fp-%d", unique())
	return &sender{t: t, s: s, c: c, dev: Device(t, s, c.ID, fp), at: T0}
}

func (x *sender) clock() time.Time { return x.at }

// msg is an SMS of the sender's company through its device.
func (x *sender) msg(phone, text string) store.Message {
	return store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: x.c.ID, Device: x.dev.Fingerprint, Channel: "sms", Phone: phone, Text: text, SIMSlot: "SIM1", Segments: 1}
}

// send queues m with the key, answering with its uuid.
func (x *sender) send(m store.Message, key store.IdempotencyKey) (store.Message, *store.Idempotent, error) {
	return x.s.Enqueue(&m, key, x.clock, nil, func(m store.Message) (int, []byte) { return 202, []byte(m.UUID) })
}

// mustSend queues m and fails the test on an error.
func (x *sender) mustSend(m store.Message) store.Message {
	x.t.Helper()
	out, _, err := x.send(m, store.IdempotencyKey{})
	if err != nil {
		x.t.Fatalf("send %q: %v", m.Text, err)
	}
	return out
}

// usage is the messages the company queued in T0's calendar month.
func (x *sender) usage() int64 {
	x.t.Helper()
	from, _ := store.CalendarMonth(T0)
	n, _, err := x.s.Usage(x.c.ID, from)
	if err != nil {
		x.t.Fatal(err)
	}
	return n
}

// stored is the company's message as stored.
func (x *sender) stored(uuid string) store.Message {
	x.t.Helper()
	m, err := x.s.MessageByUUID(x.c.ID, uuid)
	if err != nil {
		x.t.Fatalf("message %s: %v", uuid, err)
	}
	return m
}

// absent fails the test unless no message of the company has the uuid.
func (x *sender) absent(uuid, what string) {
	x.t.Helper()
	if m, err := x.s.MessageByUUID(x.c.ID, uuid); !errors.Is(err, store.ErrNotFound) {
		x.t.Fatalf("%s: message %s is stored (%+v, %v), want none", what, uuid, m, err)
	}
}

// messagePlan caps every company's messages per calendar month.
type messagePlan int64

func (p messagePlan) Limits(_ store.Subscription, _ bool, now time.Time) store.PlanLimits {
	from, to := store.CalendarMonth(now)
	return store.PlanLimits{Messages: int64(p), Devices: -1, PeriodStart: from, PeriodEnd: to}
}

// sendEnqueue: a send is stored queued on the company's device, with its id,
// device id, direction and times; the answer is built from the stored
// message; send_at makes it scheduled; it counts against the plan period
// and the day's bytes; another company's id is ErrNotFound.
func sendEnqueue(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	base, _ := s.StorageUsed(x.c.ID, T0) // the fixture's pairing code
	in := x.msg("+15551230001", "hello")
	in.UserID = 7
	var answered store.Message
	out, prior, err := s.Enqueue(&in, store.IdempotencyKey{}, x.clock, nil, func(m store.Message) (int, []byte) {
		answered = m
		return 202, nil
	})
	if err != nil || prior != nil {
		t.Fatalf("enqueue: prior %+v (%v)", prior, err)
	}
	if out.ID == 0 || out.DeviceID != x.dev.ID || out.Direction != store.Outbound || out.Status != store.MsgQueued ||
		!out.CreatedAt.Equal(T0) || !out.UpdatedAt.Equal(T0) || out.CompanyID != x.c.ID || out.UserID != 7 || out.Text != "hello" {
		t.Fatalf("stored %+v, want queued on device %d at %v", out, x.dev.ID, T0)
	}
	if answered.ID != 0 {
		t.Fatalf("the answer was built without a key: %+v", answered)
	}
	got := x.stored(in.UUID)
	if got.ID != out.ID || got.Status != store.MsgQueued || got.DeviceID != x.dev.ID || got.Phone != in.Phone || got.QueuePlace() != out.QueuePlace() {
		t.Fatalf("read back %+v, want %+v", got, out)
	}
	other, _ := Company(t, s)
	if _, err := s.MessageByUUID(other.ID, in.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's message: %v, want ErrNotFound", err)
	}
	if _, err := s.MessageByUUID(x.c.ID, "no-such-uuid"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown uuid: %v, want ErrNotFound", err)
	}

	second := x.mustSend(x.msg("+15551230002", "again"))
	if second.ID <= out.ID || second.QueuePlace() <= out.QueuePlace() {
		t.Fatalf("the second send: id %d place %d, want both after %d and %d", second.ID, second.QueuePlace(), out.ID, out.QueuePlace())
	}
	later := x.msg("+15551230003", "later")
	later.SendAt = T0.Add(time.Hour)
	if m := x.mustSend(later); m.Status != store.MsgScheduled || !m.SendAt.Equal(T0.Add(time.Hour)) {
		t.Fatalf("a send with send_at: %s at %v, want scheduled", m.Status, m.SendAt)
	}
	prio := x.msg("+15551230004", "urgent")
	prio.Priority = store.MaxPriority
	if m := x.mustSend(prio); m.Status != store.MsgQueued || m.Priority != store.MaxPriority || x.stored(m.UUID).Priority != store.MaxPriority {
		t.Fatalf("a send with a priority: %+v", m)
	}

	if n := x.usage(); n != 4 {
		t.Fatalf("usage: %d messages, want 4", n)
	}
	if _, devices, err := s.Usage(x.c.ID, T0); err != nil || devices != 1 {
		t.Fatalf("usage: %d devices (%v), want 1", devices, err)
	}
	if n, devices, err := s.Usage(other.ID, T0); err != nil || n != 0 || devices != 0 {
		t.Fatalf("another company's usage: %d messages, %d devices (%v), want none", n, devices, err)
	}
	want := base
	for _, m := range []store.Message{out, second, later, prio} {
		want += store.MessageCost(m)
	}
	if used, err := s.StorageUsed(x.c.ID, T0); err != nil || used != want {
		t.Fatalf("storage used: %d (%v), want %d", used, err, want)
	}
	if used, err := s.StorageUsed(x.c.ID, T0.Add(24*time.Hour)); err != nil || used != 0 {
		t.Fatalf("storage used the next day: %d (%v), want 0", used, err)
	}
	if b := s.DailyStorageBudget(); b != 0 {
		t.Fatalf("the budget of a store opened without one: %d", b)
	}
}

// sendDeviceRefusals: a device that is not the company's live one is
// ErrDeviceGone, a disabled one ErrDeviceDisabled, and the check's error
// refuses the send; a refused send stores and counts nothing.
func sendDeviceRefusals(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	other, _ := Company(t, s)
	foreign := Device(t, s, other.ID, fmt.Sprintf("fp-%d", unique()))
	disabled := fmt.Sprintf("fp-%d", unique())
	code := []byte(fmt.Sprintf("pairing-%d", unique()))
	if err := s.PutPairing(code, store.Pairing{CompanyID: x.c.ID, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.RegisterDevice(code, T0, disabled, func(store.Pairing, *store.Device) (store.Device, error) {
		return store.Device{Status: store.DeviceDisabled, TokenHash: []byte(disabled)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	used, _ := s.StorageUsed(x.c.ID, T0)
	errSIM := errors.New("no such SIM")
	var checked store.Device
	check := func(d store.Device, slot string) error {
		checked = d
		if slot != "SIM1" {
			return errSIM
		}
		return nil
	}
	for _, tc := range []struct {
		what   string
		device string
		slot   string
		want   error
	}{
		{"a device never paired", "fp-nowhere", "SIM1", store.ErrDeviceGone},
		{"another company's device", foreign.Fingerprint, "SIM1", store.ErrDeviceGone},
		{"a disabled device", disabled, "SIM1", store.ErrDeviceDisabled},
		{"the check's refusal", x.dev.Fingerprint, "SIM2", errSIM},
	} {
		m := x.msg("+15551230001", tc.what)
		m.Device, m.SIMSlot = tc.device, tc.slot
		if _, _, err := s.Enqueue(&m, store.IdempotencyKey{Key: "k-" + tc.what, Route: "/chat/send"}, x.clock, check, nil); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.what, err, tc.want)
		}
		x.absent(m.UUID, tc.what)
		bulk := []store.Message{x.msg("+15551230002", "b1"), m}
		bulk[0].Device, bulk[0].SIMSlot = tc.device, tc.slot
		if _, _, err := s.EnqueueBulk(bulk, store.IdempotencyKey{}, x.clock, check, nil); !errors.Is(err, tc.want) {
			t.Fatalf("%s, in bulk: %v, want %v", tc.what, err, tc.want)
		}
		x.absent(bulk[0].UUID, tc.what+", in bulk")
	}
	if checked.ID != x.dev.ID || checked.Fingerprint != x.dev.Fingerprint {
		t.Fatalf("the check got %+v, want the company's device %d", checked, x.dev.ID)
	}
	if n := x.usage(); n != 0 {
		t.Fatalf("refused sends counted %d messages", n)
	}
	if now, _ := s.StorageUsed(x.c.ID, T0); now != used {
		t.Fatalf("refused sends counted %d bytes", now-used)
	}
	m := x.msg("+15551230001", "checked")
	if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, x.clock, check, nil); err != nil {
		t.Fatalf("a send the check passes: %v", err)
	}
}

// sendBulk: a bulk send stores every message, in input order, with rising
// ids and places, or on any refusal (an opted-out recipient, named by its
// index) none; the answer is built from the stored messages; a key's
// first answer comes back to a retry; no messages is an error.
func sendBulk(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	ms := []store.Message{x.msg("+15551230001", "one"), x.msg("+15551230002", "two"), x.msg("+15551230003", "three")}
	ms[2].SendAt = T0.Add(time.Hour)
	key := store.IdempotencyKey{Key: "bulk-1", Route: "/chat/send-bulk", Digest: "d"}
	var answered []store.Message
	answer := func(out []store.Message) (int, []byte) {
		answered = out
		return 202, []byte(out[0].UUID)
	}
	out, prior, err := s.EnqueueBulk(ms, key, x.clock, nil, answer)
	if err != nil || prior != nil || len(out) != 3 {
		t.Fatalf("bulk: %d stored, prior %+v (%v)", len(out), prior, err)
	}
	for i, m := range out {
		if m.UUID != ms[i].UUID || m.ID == 0 || m.DeviceID != x.dev.ID || m.Direction != store.Outbound || !m.CreatedAt.Equal(T0) {
			t.Fatalf("message %d: %+v, want %s stored on device %d", i, m, ms[i].UUID, x.dev.ID)
		}
		if i > 0 && m.ID <= out[i-1].ID {
			t.Fatalf("message %d: id %d after %d", i, m.ID, out[i-1].ID)
		}
		if got := x.stored(m.UUID); got.ID != m.ID || got.Status != m.Status {
			t.Fatalf("message %d read back: %+v, want %+v", i, got, m)
		}
	}
	if out[0].Status != store.MsgQueued || out[1].Status != store.MsgQueued || out[2].Status != store.MsgScheduled {
		t.Fatalf("statuses %s %s %s, want queued queued scheduled", out[0].Status, out[1].Status, out[2].Status)
	}
	if out[1].QueuePlace() <= out[0].QueuePlace() {
		t.Fatalf("places %d then %d, want rising", out[0].QueuePlace(), out[1].QueuePlace())
	}
	if len(answered) != 3 || answered[2].ID != out[2].ID {
		t.Fatalf("the answer was built from %+v, want the stored messages", answered)
	}
	retry := []store.Message{x.msg("+15551230001", "one"), x.msg("+15551230002", "two")}
	again, prior, err := s.EnqueueBulk(retry, key, x.clock, nil, answer)
	if err != nil || prior == nil || string(prior.Body) != ms[0].UUID || prior.Status != 202 || len(again) != 0 {
		t.Fatalf("a retry: %d stored, prior %+v (%v), want the first answer", len(again), prior, err)
	}
	x.absent(retry[0].UUID, "a retry")
	if n := x.usage(); n != 3 {
		t.Fatalf("usage: %d, want 3", n)
	}

	if _, _, err := s.AddOptOut(x.c.ID, "+15551230009", T0); err != nil {
		t.Fatal(err)
	}
	refused := []store.Message{x.msg("+15551230001", "a"), x.msg("+15551230009", "b"), x.msg("+15551230003", "c")}
	_, _, err = s.EnqueueBulk(refused, store.IdempotencyKey{Key: "bulk-2", Route: "/chat/send-bulk"}, x.clock, nil, answer)
	var oe *store.OptOutError
	if !errors.As(err, &oe) || !errors.Is(err, store.ErrOptedOut) || oe.Index != 1 || oe.Phone != "+15551230009" {
		t.Fatalf("an opted-out recipient in bulk: %v, want an *OptOutError for index 1", err)
	}
	for _, m := range refused {
		x.absent(m.UUID, "a refused bulk send")
	}
	if n := x.usage(); n != 3 {
		t.Fatalf("usage after a refused bulk: %d, want 3", n)
	}
	if err := s.RemoveOptOut(x.c.ID, "+15551230009"); err != nil {
		t.Fatal(err)
	}
	if out, prior, err := s.EnqueueBulk(refused, store.IdempotencyKey{Key: "bulk-2", Route: "/chat/send-bulk"}, x.clock, nil, answer); err != nil || prior != nil || len(out) != 3 {
		t.Fatalf("the refused request once allowed: %d stored, prior %+v (%v), want it stored (a refusal keeps no answer)", len(out), prior, err)
	}
	if _, _, err := s.EnqueueBulk(nil, store.IdempotencyKey{}, x.clock, nil, answer); err == nil {
		t.Fatal("a bulk send of no messages: no error")
	}
}

// sendIdempotencyKeys: a key is the company's and the route's: a retry on
// the same route gets the first answer (with the first request's digest,
// so the caller tells a reuse for another request apart) and stores
// nothing; the same key on another route, or of another company, is
// another key; an answer is kept for a day; a refused send keeps none.
func sendIdempotencyKeys(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	y := newSender(t, s)
	chat := store.IdempotencyKey{Key: "order-1", Route: "/chat/send", Digest: "d1"}
	first, prior, err := x.send(x.msg("+15551230001", "first"), chat)
	if err != nil || prior != nil {
		t.Fatalf("a fresh key: prior %+v (%v)", prior, err)
	}
	retry := x.msg("+15551230001", "first")
	if _, prior, err := x.send(retry, chat); err != nil || prior == nil || string(prior.Body) != first.UUID || prior.Status != 202 ||
		prior.Route != "/chat/send" || prior.Digest != "d1" || !prior.CreatedAt.Equal(T0) {
		t.Fatalf("the same key and route: prior %+v (%v), want the first answer with its route and digest", prior, err)
	}
	x.absent(retry.UUID, "a retry")
	reuse := x.msg("+15551230002", "another request")
	if _, prior, err := x.send(reuse, store.IdempotencyKey{Key: "order-1", Route: "/chat/send", Digest: "d2"}); err != nil || prior == nil || prior.Digest != "d1" {
		t.Fatalf("the key reused for another request: prior %+v (%v), want the first answer with digest d1", prior, err)
	}
	x.absent(reuse.UUID, "a reuse")
	if m, prior, err := x.send(x.msg("+15551230001", "alias"), store.IdempotencyKey{Key: "order-1", Route: "/automation/send-sms", Digest: "d1"}); err != nil || prior != nil || m.ID == 0 {
		t.Fatalf("the same key on another route: prior %+v (%v), want a message of its own", prior, err)
	}
	if m, prior, err := y.send(y.msg("+15551230001", "theirs"), chat); err != nil || prior != nil || m.ID == 0 {
		t.Fatalf("the same key of another company: prior %+v (%v), want a message of its own", prior, err)
	}
	if n := x.usage(); n != 2 {
		t.Fatalf("usage: %d, want 2 (retries are not messages)", n)
	}

	x.at = T0.Add(24*time.Hour - time.Second)
	if _, prior, err := x.send(x.msg("+15551230001", "late retry"), chat); err != nil || prior == nil {
		t.Fatalf("a retry within the day: prior %+v (%v), want the first answer", prior, err)
	}
	x.at = T0.Add(24 * time.Hour)
	next, prior, err := x.send(x.msg("+15551230001", "next day"), chat)
	if err != nil || prior != nil || next.ID == 0 {
		t.Fatalf("the key a day later: prior %+v (%v), want a new message", prior, err)
	}
	x.at = T0.Add(25 * time.Hour)
	if _, prior, err := x.send(x.msg("+15551230001", "retry of the new"), chat); err != nil || prior == nil || string(prior.Body) != next.UUID {
		t.Fatalf("a retry of the key's new answer: prior %+v (%v), want %s", prior, err, next.UUID)
	}

	if _, _, err := s.AddOptOut(x.c.ID, "+15551230009", x.at); err != nil {
		t.Fatal(err)
	}
	stopped := store.IdempotencyKey{Key: "order-2", Route: "/chat/send", Digest: "d3"}
	if _, _, err := x.send(x.msg("+15551230009", "stopped"), stopped); !errors.Is(err, store.ErrOptedOut) {
		t.Fatalf("a send to an opted-out number: %v, want ErrOptedOut", err)
	}
	if _, prior, err := x.send(x.msg("+15551230001", "after the refusal"), stopped); err != nil || prior != nil {
		t.Fatalf("the key of a refused send: prior %+v (%v), want a new message (a refusal keeps no answer)", prior, err)
	}
}

// sendIdempotencyRace: retries of one key racing each other store one
// message; every other gets its answer.
func sendIdempotencyRace(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	const n = 8
	key := store.IdempotencyKey{Key: "race", Route: "/chat/send", Digest: "d"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []string
	replays := 0
	for i := range n {
		wg.Go(func() {
			m := x.msg("+15551230001", fmt.Sprint("try ", i))
			out, prior, err := x.send(m, key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("try %d: %v", i, err)
			case prior != nil:
				replays++
			default:
				stored = append(stored, out.UUID)
			}
		})
	}
	wg.Wait()
	if len(stored) != 1 || replays != n-1 {
		t.Fatalf("%d stored and %d replays of %d racing retries, want 1 and %d", len(stored), replays, n, n-1)
	}
	if x.usage() != 1 {
		t.Fatalf("usage: %d, want 1", x.usage())
	}
	if _, prior, err := x.send(x.msg("+15551230001", "after"), key); err != nil || prior == nil || string(prior.Body) != stored[0] {
		t.Fatalf("a retry after the race: prior %+v (%v), want the answer of %s", prior, err, stored[0])
	}
}

// sendPruneIdempotency: pruning drops the answers kept before the cutoff
// and only those.
func sendPruneIdempotency(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	now := T0.Add(48 * time.Hour)
	for i, age := range []time.Duration{0, 23 * time.Hour, 25 * time.Hour, 48 * time.Hour} {
		x.at = now.Add(-age)
		if _, _, err := x.send(x.msg("+15551230001", fmt.Sprint("age ", age)), store.IdempotencyKey{Key: fmt.Sprint("k", i), Route: "/chat/send"}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PruneIdempotency(now.Add(-24 * time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want the 2 older than a day", n, err)
	}
	if n, err := s.PruneIdempotency(now.Add(-24 * time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned %d again (%v), want 0", n, err)
	}
	x.at = now
	for i := range 2 {
		if _, prior, err := x.send(x.msg("+15551230001", "retry"), store.IdempotencyKey{Key: fmt.Sprint("k", i), Route: "/chat/send"}); err != nil || prior == nil {
			t.Fatalf("key k%d after the prune: prior %+v (%v), want its answer kept", i, prior, err)
		}
	}
}

// sendPlanLimit: the plan's message limit refuses the send that would go
// over it with a *PlanLimitError, storing nothing; a bulk send that would
// go over is refused whole; another company counts its own.
func sendPlanLimit(t *testing.T, s SendsStore) {
	s.SetPlans(messagePlan(3))
	x := newSender(t, s)
	y := newSender(t, s)
	x.mustSend(x.msg("+15551230001", "1"))
	if _, _, err := s.EnqueueBulk([]store.Message{x.msg("+15551230001", "2"), x.msg("+15551230001", "3"), x.msg("+15551230001", "4")}, store.IdempotencyKey{}, x.clock, nil, nil); !errors.Is(err, store.ErrPlanLimit) {
		t.Fatalf("a bulk send past the limit: %v, want the plan's limit", err)
	}
	if n := x.usage(); n != 1 {
		t.Fatalf("usage after a refused bulk send: %d, want 1", n)
	}
	if out, _, err := s.EnqueueBulk([]store.Message{x.msg("+15551230001", "2"), x.msg("+15551230001", "3")}, store.IdempotencyKey{}, x.clock, nil, nil); err != nil || len(out) != 2 {
		t.Fatalf("a bulk send up to the limit: %d (%v)", len(out), err)
	}
	over := x.msg("+15551230001", "4")
	_, _, err := x.send(over, store.IdempotencyKey{Key: "k", Route: "/chat/send"})
	var pe *store.PlanLimitError
	_, end := store.CalendarMonth(T0)
	if !errors.As(err, &pe) || pe.What != store.LimitMessages || pe.Limit != 3 || !pe.PeriodEnd.Equal(end) {
		t.Fatalf("a send past the limit: %v, want a *PlanLimitError of 3 messages ending %v", err, end)
	}
	x.absent(over.UUID, "a send past the limit")
	if n := x.usage(); n != 3 {
		t.Fatalf("usage: %d, want 3", n)
	}
	y.mustSend(y.msg("+15551230001", "theirs"))
	x.at = T0.AddDate(0, 1, 0)
	x.mustSend(x.msg("+15551230001", "next month"))
}

// raceSends makes n sends at once, send i through pick(i), and counts those
// stored and those the plan refused; any other error fails the test.
func raceSends(t *testing.T, n int, pick func(i int) *sender) (accepted, refused int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		x := pick(i)
		wg.Go(func() {
			_, _, err := x.send(x.msg("+15551230001", fmt.Sprint("race ", i)), store.IdempotencyKey{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, store.ErrPlanLimit):
				refused++
			default:
				t.Errorf("send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return accepted, refused
}

// sendPlanLimitRace: sends racing for the last of the plan's messages are
// counted exactly: as many are stored as the plan allows.
func sendPlanLimitRace(t *testing.T, s SendsStore) {
	const limit, senders = 10, 30
	s.SetPlans(messagePlan(limit))
	x := newSender(t, s)
	accepted, refused := raceSends(t, senders, func(int) *sender { return x })
	if accepted != limit || refused != senders-limit {
		t.Fatalf("%d accepted, %d refused of %d racing sends, want exactly %d accepted", accepted, refused, senders, limit)
	}
	if n := x.usage(); n != limit {
		t.Fatalf("usage: %d, want %d", n, limit)
	}
}

// SendBudgetBytes is the daily storage budget SendBudget's store opens
// with: two of its messages' worth.
const SendBudgetBytes = int64(2 * (budgetTextBytes + len(budgetPhone) + store.MessageRowCost))

const (
	budgetTextBytes = 1000
	budgetPhone     = "+15551230001"
)

// SendBudget runs the send path's case of the daily storage budget on a
// store opened with a budget of SendBudgetBytes.
func SendBudget(t *testing.T, open Opener[SendsStore]) {
	t.Run("Refusals", func(t *testing.T) { t.Parallel(); sendBudget(t, open(t)) })
	t.Run("Race", func(t *testing.T) { t.Parallel(); sendBudgetRace(t, open(t)) })
}

// sendBudget: a send that brings the day's bytes exactly to the budget
// passes, one more is refused whole with a *BudgetError renewing at
// midnight; a bulk send pays for all its messages; another company's
// budget is its own; opt-outs pay too; the next UTC day starts from zero.
func sendBudget(t *testing.T, s SendsStore) {
	probe := store.Message{Phone: budgetPhone, Text: strings.Repeat("x", budgetTextBytes)}
	cost := store.MessageCost(probe)
	if b := s.DailyStorageBudget(); b != 2*cost || b != SendBudgetBytes {
		t.Fatalf("DailyStorageBudget: %d, want %d", b, 2*cost)
	}
	x := newSender(t, s)
	y := newSender(t, s)
	x.at = time.Date(2026, 11, 22, 23, 59, 0, 0, time.UTC)
	base, _ := s.StorageUsed(x.c.ID, x.at) // the fixtures' pairing code was charged on T0's day
	if base != 0 {
		t.Fatalf("a new day starts at %d bytes", base)
	}
	if _, _, err := s.EnqueueBulk([]store.Message{x.msg(probe.Phone, probe.Text), x.msg(probe.Phone, probe.Text), x.msg(probe.Phone, probe.Text)}, store.IdempotencyKey{}, x.clock, nil, nil); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("a bulk send of three budgets' worth: %v, want the budget error", err)
	}
	if used, _ := s.StorageUsed(x.c.ID, x.at); used != 0 {
		t.Fatalf("a refused bulk send counted %d bytes", used)
	}
	x.mustSend(x.msg(probe.Phone, probe.Text))
	x.mustSend(x.msg(probe.Phone, probe.Text))
	if used, err := s.StorageUsed(x.c.ID, x.at); err != nil || used != 2*cost {
		t.Fatalf("storage used: %d (%v), want %d (exactly the budget)", used, err, 2*cost)
	}
	over := x.msg(probe.Phone, "")
	_, _, err := x.send(over, store.IdempotencyKey{})
	var be *store.BudgetError
	if !errors.As(err, &be) || !errors.Is(err, store.ErrStorageBudget) || !be.Reset.Equal(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)) ||
		be.CompanyID != x.c.ID || be.Limit != 2*cost || be.Used != 2*cost || be.Cost != store.MessageCost(over) {
		t.Fatalf("one send over: %v (%+v), want a *BudgetError renewing at midnight", err, be)
	}
	x.absent(over.UUID, "a send over the budget")
	// Opt-outs may take the day past the budget by its overdraft, no further.
	fit := int(store.OptOutOverdraft(SendBudgetBytes) / store.OptOutCost)
	if fit < 1 {
		t.Fatalf("the overdraft of a %d-byte budget holds no opt-out", SendBudgetBytes)
	}
	for i := range fit {
		if _, created, err := s.AddOptOut(x.c.ID, fmt.Sprintf("+155512399%02d", i), x.at); err != nil || !created {
			t.Fatalf("opt-out %d at the spent budget, within its overdraft: created %v, %v", i, created, err)
		}
	}
	if _, _, err := s.AddOptOut(x.c.ID, "+15551239999", x.at); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("an opt-out past the overdraft: %v, want the budget error", err)
	}
	if list, _ := s.OptOuts(x.c.ID, "", 100); len(list) != fit {
		t.Fatalf("opt-outs listed: %+v, want the %d within the overdraft", list, fit)
	}
	if used, _ := s.StorageUsed(x.c.ID, x.at); used != 2*cost+int64(fit)*store.OptOutCost {
		t.Fatalf("refusals counted: %d bytes, want %d", used, 2*cost+int64(fit)*store.OptOutCost)
	}
	if n := x.usage(); n != 2 {
		t.Fatalf("usage: %d, want 2 (a refusal is not a message)", n)
	}
	y.at = x.at
	y.mustSend(y.msg(probe.Phone, probe.Text))
	x.at = x.at.Add(time.Minute)
	x.mustSend(x.msg(probe.Phone, probe.Text))
	if used, _ := s.StorageUsed(x.c.ID, x.at); used != cost {
		t.Fatalf("the next day: %d bytes, want %d", used, cost)
	}
}

// sendPruneStorageCounters: pruning drops the daily storage counters of
// the days before the cutoff's, one per company and day, and keeps the
// cutoff's day and later.
func sendPruneStorageCounters(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	now := T0.Add(72 * time.Hour)
	for d := range 3 {
		at := now.Add(-time.Duration(d) * 24 * time.Hour)
		for i := range 2 { // two writes of a day are still one counter
			if _, _, err := s.AddOptOut(x.c.ID, fmt.Sprintf("+1555123%02d%02d", d, i), at); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := s.PruneStorageCounters(now.Add(-24 * time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2 (two days ago, and the fixtures' day)", n, err)
	}
	for d, want := range []bool{true, true, false} {
		used, err := s.StorageUsed(x.c.ID, now.Add(-time.Duration(d)*24*time.Hour))
		if err != nil || (used > 0) != want {
			t.Errorf("%d days ago: %d bytes counted (%v), want kept %v", d, used, err, want)
		}
	}
}

// sendOptOuts: an opt-out is the company's: adding it again answers the
// entry stored (created false), removing one not listed is ErrNotFound,
// the list pages in number order, OptedOut reads one number of it; a send
// to a listed number is an *OptOutError (index -1) storing nothing, to any
// other number or of another company it passes.
func sendOptOuts(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	y := newSender(t, s)
	o, created, err := s.AddOptOut(x.c.ID, "+15551230002", T0)
	if err != nil || !created || o.Phone != "+15551230002" || o.Source != store.OptOutAPI || !o.CreatedAt.Equal(T0) {
		t.Fatalf("add: %+v created %v (%v)", o, created, err)
	}
	used, _ := s.StorageUsed(x.c.ID, T0)
	again, created, err := s.AddOptOut(x.c.ID, "+15551230002", T0.Add(time.Hour))
	if err != nil || created || !again.CreatedAt.Equal(T0) || again.Source != store.OptOutAPI {
		t.Fatalf("add again: %+v created %v (%v), want the stored entry", again, created, err)
	}
	if now, _ := s.StorageUsed(x.c.ID, T0); now != used {
		t.Fatalf("adding a listed number again counted %d bytes", now-used)
	}
	for _, p := range []string{"+15551230003", "+15551230001", "+15551230004"} {
		if _, _, err := s.AddOptOut(x.c.ID, p, T0); err != nil {
			t.Fatal(err)
		}
	}
	phones := func(list []store.OptOut) (out []string) {
		for _, o := range list {
			out = append(out, o.Phone)
		}
		return out
	}
	if list, err := s.OptOuts(x.c.ID, "", 3); err != nil || !slices.Equal(phones(list), []string{"+15551230001", "+15551230002", "+15551230003"}) {
		t.Fatalf("the first page: %v (%v)", phones(list), err)
	}
	if list, err := s.OptOuts(x.c.ID, "+15551230003", 3); err != nil || !slices.Equal(phones(list), []string{"+15551230004"}) {
		t.Fatalf("the page after +15551230003: %v (%v)", phones(list), err)
	}
	if list, err := s.OptOuts(x.c.ID, "+15551230004", 3); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("past the last entry: %v (%v), want an empty list", list, err)
	}
	if list, err := s.OptOuts(y.c.ID, "", 10); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("another company's list: %v (%v), want an empty list", phones(list), err)
	}
	optedOut := func(c uint64, p string, want bool) {
		t.Helper()
		if got, err := s.OptedOut(c, p); err != nil || got != want {
			t.Fatalf("OptedOut(%d, %s) = %v (%v), want %v", c, p, got, err, want)
		}
	}
	optedOut(x.c.ID, "+15551230002", true)
	optedOut(x.c.ID, "+15551230009", false)
	optedOut(y.c.ID, "+15551230002", false) // another company's list

	stopped := x.msg("+15551230002", "stopped")
	_, _, err = x.send(stopped, store.IdempotencyKey{})
	var oe *store.OptOutError
	if !errors.As(err, &oe) || !errors.Is(err, store.ErrOptedOut) || oe.Index != -1 || oe.Phone != "+15551230002" {
		t.Fatalf("a send to a listed number: %v, want an *OptOutError with index -1", err)
	}
	x.absent(stopped.UUID, "a send to a listed number")
	if n := x.usage(); n != 0 {
		t.Fatalf("a refused send counted: usage %d", n)
	}
	x.mustSend(x.msg("+15551230009", "not listed"))
	y.mustSend(y.msg("+15551230002", "another company"))

	if err := s.RemoveOptOut(y.c.ID, "+15551230002"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removal by another company: %v, want ErrNotFound", err)
	}
	if err := s.RemoveOptOut(x.c.ID, "+15551230002"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveOptOut(x.c.ID, "+15551230002"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second removal: %v, want ErrNotFound", err)
	}
	optedOut(x.c.ID, "+15551230002", false)
	x.mustSend(x.msg("+15551230002", "allowed again"))
	if o, created, err := s.AddOptOut(x.c.ID, "+15551230002", T0.Add(2*time.Hour)); err != nil || !created || !o.CreatedAt.Equal(T0.Add(2*time.Hour)) {
		t.Fatalf("listed again: %+v created %v (%v), want a new entry", o, created, err)
	}
}

// sendSchedule: a scheduled message waits until ReleaseDue takes it at its
// send_at (at most limit at a time, earliest first), queued behind every
// place handed out so far; NextDue names the earliest; a canceled one is
// never released.
func sendSchedule(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	if _, ok, err := s.NextDue(); err != nil || ok {
		t.Fatalf("an empty store has something due (%v)", err)
	}
	scheduled := func(text string, at time.Time) store.Message {
		m := x.msg("+15551230001", text)
		m.SendAt = at
		return x.mustSend(m)
	}
	late := scheduled("late", T0.Add(3*time.Hour))
	first := scheduled("first", T0.Add(time.Hour))
	canceled := scheduled("canceled", T0.Add(90*time.Minute))
	second := scheduled("second", T0.Add(2*time.Hour))
	plain := x.mustSend(x.msg("+15551230001", "plain"))
	if first.Status != store.MsgScheduled || plain.Status != store.MsgQueued {
		t.Fatalf("got %s and %s, want scheduled and queued", first.Status, plain.Status)
	}
	if at, ok, err := s.NextDue(); err != nil || !ok || !at.Equal(T0.Add(time.Hour)) {
		t.Fatalf("NextDue: %v %v (%v), want %v", at, ok, err, T0.Add(time.Hour))
	}
	if m, err := s.Cancel(x.c.ID, canceled.UUID, T0); err != nil || m.Status != store.MsgCanceled {
		t.Fatalf("cancel: %s (%v)", m.Status, err)
	}
	if got, err := s.ReleaseDue(T0.Add(time.Hour-time.Nanosecond), 10); err != nil || len(got) != 0 {
		t.Fatalf("before the first send_at: released %d (%v)", len(got), err)
	}
	released, err := s.ReleaseDue(T0.Add(2*time.Hour), 1)
	if err != nil || len(released) != 1 || released[0].ID != first.ID || released[0].Status != store.MsgQueued || released[0].QueuePlace() <= plain.QueuePlace() {
		t.Fatalf("released %+v (%v), want only the first, queued after place %d", released, err, plain.QueuePlace())
	}
	if m := x.stored(first.UUID); m.Status != store.MsgQueued || m.QueuePlace() != released[0].QueuePlace() || !m.UpdatedAt.Equal(T0.Add(2*time.Hour)) {
		t.Fatalf("the released message read back: %+v", m)
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(second.SendAt) {
		t.Fatalf("NextDue after one release: %v %v, want %v", at, ok, second.SendAt)
	}
	again, err := s.ReleaseDue(T0.Add(2*time.Hour), 10)
	if err != nil || len(again) != 1 || again[0].ID != second.ID || again[0].QueuePlace() <= released[0].QueuePlace() {
		t.Fatalf("the second release: %+v (%v), want the second, placed after the first", again, err)
	}
	if m := x.stored(canceled.UUID); m.Status != store.MsgCanceled {
		t.Fatalf("the canceled message: %s", m.Status)
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(late.SendAt) {
		t.Fatalf("NextDue after the releases: %v, want %v", at, late.SendAt)
	}
	if got, err := s.ReleaseDue(T0.Add(2*time.Hour), 10); err != nil || len(got) != 0 {
		t.Fatalf("a second release at the same time: %d (%v), want none", len(got), err)
	}
	if got, err := s.ReleaseDue(T0.Add(4*time.Hour), 10); err != nil || len(got) != 1 || got[0].ID != late.ID {
		t.Fatalf("the last release: %+v (%v)", got, err)
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("NextDue: something still waits")
	}
}

// sendReleaseVets: a scheduled message whose recipient opted out since it
// was stored is failed (recipient_opted_out) when it falls due, not queued.
func sendReleaseVets(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	m := x.msg("+15551230001", "stopped since")
	m.SendAt = T0.Add(time.Hour)
	m = x.mustSend(m)
	if _, _, err := s.AddOptOut(x.c.ID, m.Phone, T0); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReleaseDue(T0.Add(time.Hour), 10)
	if err != nil || len(got) != 1 || got[0].Status != store.MsgFailed || got[0].Error != "recipient_opted_out" {
		t.Fatalf("released %+v (%v), want it failed recipient_opted_out", got, err)
	}
	if got := x.stored(m.UUID); got.Status != store.MsgFailed || got.Error != "recipient_opted_out" {
		t.Fatalf("read back: %s %q", got.Status, got.Error)
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("NextDue: the failed message still waits")
	}
}

// sendWindows: a scheduled message that falls due while its window is
// closed is held (queued, HeldUntil the opening) and NextDue names the
// opening; at the opening it is queued behind every place handed out. A
// held message still expires, and can be canceled; either leaves the
// schedule.
func sendWindows(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // a Sunday
	opens := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	w := &window.Window{Days: []string{"mon"}, From: "09:00", To: "10:00", TimeZone: "UTC"}
	x.at = t0
	scheduled := func(text string, expires time.Time) store.Message {
		m := x.msg("+15551230001", text)
		m.SendAt, m.ExpiresAt, m.Window = t0.Add(time.Hour), expires, w
		return x.mustSend(m)
	}
	keep := scheduled("keep", opens.Add(time.Hour))
	short := scheduled("short", t0.Add(2*time.Hour))
	canceled := scheduled("canceled", opens.Add(time.Hour))
	held, err := s.ReleaseDue(t0.Add(time.Hour), 10)
	if err != nil || len(held) != 3 {
		t.Fatalf("release while the window is closed: %d (%v), want 3", len(held), err)
	}
	for _, m := range held {
		if m.Status != store.MsgQueued || !m.HeldUntil.Equal(opens) || !m.Held() {
			t.Fatalf("released while closed: %s held until %v, want queued held until %v", m.Status, m.HeldUntil, opens)
		}
		if got := x.stored(m.UUID); !got.HeldUntil.Equal(opens) {
			t.Fatalf("read back: held until %v", got.HeldUntil)
		}
	}
	if at, ok, _ := s.NextDue(); !ok || !at.Equal(opens) {
		t.Fatalf("NextDue: %v %v, want the opening %v", at, ok, opens)
	}
	if m, err := s.Cancel(x.c.ID, canceled.UUID, t0); err != nil || m.Status != store.MsgCanceled {
		t.Fatalf("cancel a held message: %s (%v)", m.Status, err)
	}
	expired, err := s.ExpireQueued(t0.Add(3*time.Hour), 10)
	if err != nil || len(expired) != 1 || expired[0].ID != short.ID || expired[0].Status != store.MsgExpired {
		t.Fatalf("expire: %+v (%v), want the short one expired while held", expired, err)
	}
	plain := x.mustSend(x.msg("+15551230001", "plain"))
	if got, _ := s.ReleaseDue(opens.Add(-time.Nanosecond), 10); len(got) != 0 {
		t.Fatalf("before the opening: released %d", len(got))
	}
	released, err := s.ReleaseDue(opens, 10)
	if err != nil || len(released) != 1 || released[0].ID != keep.ID || released[0].Status != store.MsgQueued ||
		!released[0].HeldUntil.IsZero() || released[0].QueuePlace() <= plain.QueuePlace() {
		t.Fatalf("at the opening: %+v (%v), want the kept one queued, not held, after place %d", released, err, plain.QueuePlace())
	}
	if _, ok, _ := s.NextDue(); ok {
		t.Fatal("NextDue: something still waits")
	}
	if expired, _ := s.ExpireQueued(opens.Add(48*time.Hour), 10); len(expired) != 1 || expired[0].ID != keep.ID {
		t.Fatalf("expire after the opening: %+v, want the released one (its end kept while held)", expired)
	}
}

// sendExpiry: ExpireQueued ends the queued messages whose time to live
// ended before now (earliest first, at most limit), and only those: not
// one that ends at now, nor a scheduled one (its time to live starts when
// it is queued), nor a canceled one, nor one without an end.
func sendExpiry(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	expiring := func(text string, at time.Time, priority int) store.Message {
		m := x.msg("+15551230001", text)
		m.ExpiresAt, m.Priority = at, priority
		return x.mustSend(m)
	}
	second := expiring("second", T0.Add(2*time.Minute), 0)
	first := expiring("first", T0.Add(time.Minute), 5)
	third := expiring("third", T0.Add(3*time.Minute), 0)
	atNow := expiring("at now", T0.Add(10*time.Minute), 0)
	x.mustSend(x.msg("+15551230001", "forever"))
	canceled := expiring("canceled", T0.Add(time.Minute), 0)
	if _, err := s.Cancel(x.c.ID, canceled.UUID, T0); err != nil {
		t.Fatal(err)
	}
	sched := x.msg("+15551230001", "scheduled")
	sched.SendAt, sched.ExpiresAt = T0.Add(time.Hour), T0.Add(time.Minute)
	sched = x.mustSend(sched)

	end := T0.Add(10 * time.Minute)
	got, err := s.ExpireQueued(end, 2)
	if err != nil || len(got) != 2 || got[0].ID != first.ID || got[1].ID != second.ID {
		t.Fatalf("expire, limit 2: %+v (%v), want first and second", got, err)
	}
	for _, m := range got {
		if m.Status != store.MsgExpired || m.Error == "" || !m.UpdatedAt.Equal(end) {
			t.Fatalf("expired %+v, want expired with its reason at %v", m, end)
		}
		if got := x.stored(m.UUID); got.Status != store.MsgExpired {
			t.Fatalf("read back: %s", got.Status)
		}
	}
	if got, err := s.ExpireQueued(end, 10); err != nil || len(got) != 1 || got[0].ID != third.ID {
		t.Fatalf("expire again: %+v (%v), want third only", got, err)
	}
	if m := x.stored(atNow.UUID); m.Status != store.MsgQueued {
		t.Fatalf("a message ending at now: %s, want queued", m.Status)
	}
	if m := x.stored(sched.UUID); m.Status != store.MsgScheduled {
		t.Fatalf("a scheduled message: %s, want scheduled", m.Status)
	}
	if m := x.stored(canceled.UUID); m.Status != store.MsgCanceled {
		t.Fatalf("a canceled message: %s, want canceled", m.Status)
	}
	if _, err := s.Cancel(x.c.ID, first.UUID, end); !errors.Is(err, store.ErrNotCancelable) {
		t.Fatalf("cancel of an expired message: %v, want ErrNotCancelable", err)
	}
	// A scheduled message past its end when it is queued expires at the next sweep.
	if got, _ := s.ReleaseDue(T0.Add(time.Hour), 10); len(got) != 1 || got[0].Status != store.MsgQueued {
		t.Fatalf("release: %+v", got)
	}
	if got, err := s.ExpireQueued(T0.Add(time.Hour), 10); err != nil || len(got) != 2 || got[0].ID != sched.ID || got[1].ID != atNow.ID {
		t.Fatalf("expire after the release: %+v (%v), want the released one (ended 10:01) and the one that ended at 10:10", got, err)
	}
	if got, err := s.ExpireQueued(T0.Add(48*time.Hour), 10); err != nil || len(got) != 0 {
		t.Fatalf("expire at last: %+v (%v), want none (the one without an end stays)", got, err)
	}
}

// sendSweepFailures: a message the sweeps end is one of its device's
// failures, as a failed report is: expired by ExpireQueued, failed at its
// release by ReleaseDue (its recipient opted out since). A canceled one is
// not.
func sendSweepFailures(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	expiring := x.msg("+15551230001", "expiring")
	expiring.ExpiresAt = T0.Add(time.Minute)
	expiring = x.mustSend(expiring)
	opted := x.msg("+15551230002", "opted out since")
	opted.SendAt = T0.Add(time.Hour)
	opted = x.mustSend(opted)
	canceled := x.mustSend(x.msg("+15551230003", "canceled"))
	if _, err := s.Cancel(x.c.ID, canceled.UUID, T0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ExpireQueued(T0.Add(2*time.Minute), 10); err != nil || len(got) != 1 {
		t.Fatalf("expire: %+v (%v), want one", got, err)
	}
	if _, _, err := s.AddOptOut(x.c.ID, opted.Phone, T0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReleaseDue(T0.Add(time.Hour), 10); err != nil || len(got) != 1 || got[0].Status != store.MsgFailed {
		t.Fatalf("release: %+v (%v), want one failed", got, err)
	}
	fs, err := s.DeviceFailures(x.c.ID, x.dev.ID)
	if err != nil || len(fs) != 2 {
		t.Fatalf("failures: %+v (%v), want the released and the expired one", fs, err)
	}
	if f := fs[0]; f.QueueID != opted.UUID || f.Status != store.MsgFailed || f.Error != "recipient_opted_out" || !f.At.Equal(T0.Add(time.Hour)) {
		t.Fatalf("newest failure: %+v, want %s failed (recipient_opted_out) at its release", f, opted.UUID)
	}
	if f := fs[1]; f.QueueID != expiring.UUID || f.Status != store.MsgExpired || !f.At.Equal(T0.Add(2*time.Minute)) {
		t.Fatalf("older failure: %+v, want %s expired at the sweep", f, expiring.UUID)
	}
}

// sendCancel: Cancel takes back a queued or scheduled SMS of the company
// (a priority one too) and answers it canceled; another company's, an
// inbound one or an unknown uuid is ErrNotFound; one canceled, expired or
// failed is ErrNotCancelable with the message as it is.
func sendCancel(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	y := newSender(t, s)
	queued := x.mustSend(x.msg("+15551230001", "queued"))
	prio := x.msg("+15551230001", "priority")
	prio.Priority = 3
	prio = x.mustSend(prio)
	if _, err := s.Cancel(y.c.ID, queued.UUID, T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's cancel: %v, want ErrNotFound", err)
	}
	if _, err := s.Cancel(x.c.ID, "no-such-uuid", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown uuid: %v, want ErrNotFound", err)
	}
	at := T0.Add(time.Minute)
	for _, m := range []store.Message{queued, prio} {
		got, err := s.Cancel(x.c.ID, m.UUID, at)
		if err != nil || got.Status != store.MsgCanceled || got.ID != m.ID || !got.UpdatedAt.Equal(at) {
			t.Fatalf("cancel %s: %+v (%v), want canceled at %v", m.Text, got, err, at)
		}
		if got := x.stored(m.UUID); got.Status != store.MsgCanceled {
			t.Fatalf("%s read back: %s", m.Text, got.Status)
		}
	}
	got, err := s.Cancel(x.c.ID, queued.UUID, at)
	if !errors.Is(err, store.ErrNotCancelable) || got.Status != store.MsgCanceled || got.ID != queued.ID {
		t.Fatalf("a second cancel: %+v (%v), want ErrNotCancelable with the message", got, err)
	}
	in := store.Message{UUID: fmt.Sprintf("in-%d", unique()), CompanyID: x.c.ID, Device: x.dev.Fingerprint, Direction: store.Inbound, Channel: "sms",
		Phone: "+15551230001", Text: "hi", SIMSlot: "SIM1", Status: store.MsgReceived, ClientID: "c1", CreatedAt: T0, UpdatedAt: T0}
	if err := s.ImportMessages([]store.Message{in}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(x.c.ID, in.UUID, at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel of an inbound message: %v, want ErrNotFound", err)
	}
}

// sendImport: imported history is stored as given (statuses, times,
// uuids), each message taking the id of its company's live device named
// by fingerprint; a message naming any other device refuses the whole
// import with ErrDeviceGone.
func sendImport(t *testing.T, s SendsStore) {
	x := newSender(t, s)
	y := newSender(t, s)
	hist := []store.Message{
		{UUID: fmt.Sprintf("h-%d", unique()), CompanyID: x.c.ID, Device: x.dev.Fingerprint, Direction: store.Outbound, Channel: "sms", Phone: "+15551230001",
			Text: "out", SIMSlot: "SIM1", Status: store.MsgDelivered, Segments: 1, CreatedAt: T0.Add(-2 * time.Hour), UpdatedAt: T0.Add(-time.Hour)},
		{UUID: fmt.Sprintf("h-%d", unique()), CompanyID: x.c.ID, Device: x.dev.Fingerprint, Direction: store.Inbound, Channel: "sms", Phone: "+15551230001",
			Text: "in", SIMSlot: "SIM2", Status: store.MsgReceived, ClientID: "c-1", ReceivedAt: "2026-11-19T08:30:00.000Z", CreatedAt: T0.Add(-time.Hour), UpdatedAt: T0.Add(-time.Hour)},
	}
	// More of the first one's day and device: their counts share its counter row.
	for i := range 3 {
		hist = append(hist, store.Message{UUID: fmt.Sprintf("h-%d", unique()), CompanyID: x.c.ID, Device: x.dev.Fingerprint, Direction: store.Outbound, Channel: "sms",
			Phone: "+15551230001", Text: "more", SIMSlot: "SIM1", Status: []string{store.MsgDelivered, store.MsgFailed, store.MsgSent}[i], Segments: 2,
			CreatedAt: T0.Add(-2 * time.Hour), UpdatedAt: T0.Add(-time.Hour)})
	}
	if err := s.ImportMessages(hist); err != nil {
		t.Fatal(err)
	}
	// Counted as they stand: the delivered ones sent and delivered, the
	// failed one failed, the received one received.
	if got, err := s.StatsTotals(x.c.ID); err != nil || got != (store.Counts{Sent: 3, Delivered: 2, Failed: 1, Received: 1, Segments: 5}) {
		t.Fatalf("the imported history's counts: %+v (%v), want 3 sent (5 segments), 2 delivered, 1 failed, 1 received", got, err)
	}
	for i, want := range hist {
		got := x.stored(want.UUID)
		if got.ID == 0 || got.DeviceID != x.dev.ID || got.Status != want.Status || got.Direction != want.Direction || !got.CreatedAt.Equal(want.CreatedAt) ||
			!got.UpdatedAt.Equal(want.UpdatedAt) || got.Text != want.Text || got.ClientID != want.ClientID || got.ReceivedAt != want.ReceivedAt {
			t.Fatalf("imported message %d: %+v, want %+v on device %d", i, got, want, x.dev.ID)
		}
	}
	if x.stored(hist[1].UUID).ID <= x.stored(hist[0].UUID).ID {
		t.Fatal("imported ids do not rise in import order")
	}
	bad := []store.Message{
		{UUID: fmt.Sprintf("h-%d", unique()), CompanyID: x.c.ID, Device: x.dev.Fingerprint, Direction: store.Outbound, Channel: "sms", Phone: "+15551230001",
			Text: "ok", Status: store.MsgSent, CreatedAt: T0, UpdatedAt: T0},
		{UUID: fmt.Sprintf("h-%d", unique()), CompanyID: x.c.ID, Device: y.dev.Fingerprint, Direction: store.Outbound, Channel: "sms", Phone: "+15551230001",
			Text: "another company's device", Status: store.MsgSent, CreatedAt: T0, UpdatedAt: T0},
	}
	if err := s.ImportMessages(bad); !errors.Is(err, store.ErrDeviceGone) {
		t.Fatalf("an import naming another company's device: %v, want ErrDeviceGone", err)
	}
	x.absent(bad[0].UUID, "a refused import")
	if n := x.usage(); n != 0 {
		t.Fatalf("imported history counted %d messages against the plan", n)
	}
}
