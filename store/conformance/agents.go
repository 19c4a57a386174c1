package conformance

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// AgentsStore is what the agents suite calls: WhatsApp numbers and
// iMessage handles, and the messages queued and received through them.
type AgentsStore interface {
	Base
	SetPlans(p store.Plans)
	UpdateSubscription(companyID uint64, fn func(*store.Subscription) error) (store.Subscription, error)
	AnnounceNumbers(companyID, deviceID uint64, channel string, addresses []string, now time.Time, limit int) ([]store.AgentNumber, error)
	AnnounceAgentNumbers(companyID, deviceID uint64, sets []store.Announced, now time.Time, limit int) ([]store.AgentNumber, error)
	AgentNumbers(companyID uint64, channel string) ([]store.AgentNumber, error)
	AgentNumbersSentSince(companyID uint64, channel string, since time.Time) ([]store.AgentNumber, []int, error)
	AgentNumbersNew(companyID uint64, channel string, addresses []string) (fresh, have int, err error)
	AgentNumber(companyID uint64, channel, publicID string) (store.AgentNumber, error)
	AgentNumberByRef(companyID, numberID uint64) (store.AgentNumber, error)
	UpdateAgentNumber(companyID uint64, channel, publicID string, now time.Time, fn func(*store.AgentNumber) error) (store.AgentNumber, error)
	EnqueueAgent(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, vet store.SendVet, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	AgentPending(companyID, deviceID, numberID, after uint64, limit int) ([]store.Message, error)
	AgentHandOut(companyID, deviceID, messageID uint64) (bool, error)
	AgentRelease(companyID, deviceID uint64, held []string) ([]store.AgentNumber, error)
	AgentMessages(companyID, numberID uint64, page, limit int) ([]store.Message, int, error)
	StoreAgentInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
	SetInboundEvents(h store.InboundEvents)
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error)
	AgentSendsSince(companyID, numberID uint64, since time.Time) (int, error)
	DashboardSummary(companyID uint64, from, to time.Time, limit int) (store.Summary, error)
	AgentSendTimes(companyID, numberID uint64, since time.Time) ([]time.Time, error)
	PruneAgentSends(cutoff time.Time) (int, error)
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (store.Message, bool, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	ExpireQueued(now time.Time, limit int) ([]store.Message, error)
	UpdateDeviceWith(companyID, deviceID uint64, fn func(d *store.Device) ([]store.DeviceEvent, error)) (store.Device, error)
	UpdateDeviceByID(companyID, deviceID uint64, fn func(*store.Device) error) (store.Device, error)
}

// Agents runs the suite of the agent channels (WhatsApp, iMessage).
func Agents(t *testing.T, open Opener[AgentsStore]) {
	t.Run("Announce", func(t *testing.T) { t.Parallel(); announceNumbers(t, open(t)) })
	t.Run("HelloHolds", func(t *testing.T) { t.Parallel(); s := open(t); helloHolds(t, s, s) })
	t.Run("HelloHoldsConcurrent", func(t *testing.T) { t.Parallel(); helloHoldsConcurrent(t, open(t)) })
	t.Run("AnnounceLimit", func(t *testing.T) { t.Parallel(); announceLimit(t, open(t)) })
	t.Run("AnnounceChannelsTogether", func(t *testing.T) { t.Parallel(); announceChannelsTogether(t, open(t)) })
	t.Run("NumbersNew", func(t *testing.T) { t.Parallel(); agentNumbersNew(t, open(t)) })
	t.Run("AnnounceLimitConcurrent", func(t *testing.T) { t.Parallel(); announceLimitConcurrent(t, open(t)) })
	t.Run("AnnounceSameConcurrent", func(t *testing.T) { t.Parallel(); announceSameConcurrent(t, open(t)) })
	t.Run("UpdateNumber", func(t *testing.T) { t.Parallel(); updateNumber(t, open(t)) })
	t.Run("Enqueue", func(t *testing.T) { t.Parallel(); enqueueAgent(t, open(t)) })
	t.Run("EnqueueRefusals", func(t *testing.T) { t.Parallel(); enqueueAgentRefusals(t, open(t)) })
	t.Run("EnqueueGivesTheSlotBack", func(t *testing.T) { t.Parallel(); enqueueAgentGivesBack(t, open(t)) })
	t.Run("EnqueueRefusedTakesNoID", func(t *testing.T) { t.Parallel(); enqueueAgentRefusedTakesNoID(t, open(t)) })
	t.Run("EnqueueIdempotent", func(t *testing.T) { t.Parallel(); enqueueAgentIdempotent(t, open(t)) })
	t.Run("EnqueueVetExact", func(t *testing.T) { t.Parallel(); enqueueAgentVetExact(t, open(t)) })
	t.Run("Pending", func(t *testing.T) { t.Parallel(); agentPending(t, open(t)) })
	t.Run("PendingHeldWhilePaused", func(t *testing.T) { t.Parallel(); s := open(t); agentPendingHeld(t, s, s) })
	t.Run("AgentDeleted", func(t *testing.T) { t.Parallel(); agentDeleted(t, open(t)) })
	t.Run("HandOut", func(t *testing.T) { t.Parallel(); agentHandOut(t, open(t)) })
	t.Run("HandOutMoved", func(t *testing.T) { t.Parallel(); s := open(t); agentHandOutMoved(t, s, s) })
	t.Run("Release", func(t *testing.T) { t.Parallel(); agentRelease(t, open(t)) })
	t.Run("Inbound", func(t *testing.T) { t.Parallel(); agentInbound(t, open(t)) })
	t.Run("InboundHolder", func(t *testing.T) { t.Parallel(); agentInboundHolder(t, open(t)) })
	t.Run("InboundOnceConcurrent", func(t *testing.T) { t.Parallel(); agentInboundOnceConcurrent(t, open(t)) })
	t.Run("Messages", func(t *testing.T) { t.Parallel(); agentMessages(t, open(t)) })
	t.Run("Sends", func(t *testing.T) { t.Parallel(); agentSends(t, open(t)) })
	t.Run("NumbersSentSince", func(t *testing.T) { t.Parallel(); agentNumbersSentSince(t, open(t)) })
}

const (
	waX = "+15550001111"
	waY = "+15550002222"
	waZ = "+15550003333"
)

// beforeSends is before any send of the suite.
var beforeSends = T0.AddDate(0, 0, -1)

// newFingerprint is a device fingerprint no other fixture uses.
func newFingerprint() string { return fmt.Sprintf("fp-%d", unique()) }

// announce announces addresses for the device, failing the test on an error.
func announce(t *testing.T, s AgentsStore, d store.Device, channel string, when time.Time, addrs ...string) []store.AgentNumber {
	t.Helper()
	nums, err := s.AnnounceNumbers(d.CompanyID, d.ID, channel, addrs, when, 0)
	if err != nil || len(nums) != len(addrs) {
		t.Fatalf("announce %v on %s by device %d: %+v (%v)", addrs, channel, d.ID, nums, err)
	}
	return nums
}

// agentSend is a WhatsApp send through the number.
func agentSend(companyID uint64, n store.AgentNumber, text string) store.Message {
	return store.Message{
		UUID: fmt.Sprintf("agent-%d", unique()), CompanyID: companyID, Channel: n.Channel, NumberRef: n.PublicID,
		Phone: "+15557654321", Text: text, ContentType: "text", Segments: 1,
	}
}

// stoppedAt is a clock stopped at t.
func stoppedAt(t time.Time) func() time.Time { return func() time.Time { return t } }

// noVet takes a slot that needs no giving back.
func noVet(store.AgentNumber, func(time.Time) []time.Time) (func(), error) { return func() {}, nil }

// enqueueAt queues the send at now, failing the test on an error.
func enqueueAt(t *testing.T, s AgentsStore, m store.Message, now time.Time) store.Message {
	t.Helper()
	out, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, stoppedAt(now), noVet, nil)
	if err != nil {
		t.Fatalf("enqueue through %s: %v", m.NumberRef, err)
	}
	return out
}

// inboundTo is a WhatsApp message the device received on the address.
func inboundTo(d store.Device, address, clientID string) store.Message {
	return store.Message{
		UUID: fmt.Sprintf("agent-in-%d", unique()), CompanyID: d.CompanyID, DeviceID: d.ID, Channel: store.ChannelNameWhatsApp,
		Phone: "+15557654321", Account: address, Text: "hi " + clientID, ContentType: "text", Segments: 1, ClientID: clientID,
	}
}

func msgIDs(ms []store.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// announceNumbers: a new address gets a record (ids, public id of its
// channel, warm-up from now, held by the device); announced again it keeps
// them; another agent of the company takes it over; an agent that stops
// announcing it lets it go; another company's same address is a record of
// its own that never meets this one.
func announceNumbers(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d1 := Device(t, s, a.ID, newFingerprint())
	d2 := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())

	nums := announce(t, s, d1, store.ChannelNameWhatsApp, T0, waY, waX)
	for i, addr := range []string{waY, waX} {
		n := nums[i]
		if n.ID == 0 || !strings.HasPrefix(n.PublicID, "wa_") || len(n.PublicID) < 20 || n.CompanyID != a.ID ||
			n.Channel != store.ChannelNameWhatsApp || n.Address != addr || !n.FirstSeen.Equal(T0) ||
			n.DeviceID != d1.ID || n.Device != d1.Fingerprint || n.Status != store.NumberActive {
			t.Fatalf("new number %d: %+v, want %s held by device %d, active, first seen at T0", i, n, addr, d1.ID)
		}
	}
	y, x := nums[0], nums[1]
	if x.ID == y.ID || x.PublicID == y.PublicID || strings.Contains(x.PublicID, "5550001111") {
		t.Fatalf("two numbers share an id, or the public id shows the number: %+v %+v", x, y)
	}
	im := announce(t, s, d1, store.ChannelNameIMessage, T0, "ana@example.com")[0]
	if !strings.HasPrefix(im.PublicID, "im_") || im.Channel != store.ChannelNameIMessage {
		t.Fatalf("an iMessage handle: %+v, want an im_ id", im)
	}

	again := announce(t, s, d1, store.ChannelNameWhatsApp, T0.Add(time.Hour), waX, waY)
	if again[0].ID != x.ID || again[0].PublicID != x.PublicID || !again[0].FirstSeen.Equal(T0) || again[1].ID != y.ID || again[0].DeviceID != d1.ID {
		t.Fatalf("announced again: %+v, want %+v and %+v kept, in the order given", again, x, y)
	}

	later := T0.Add(2 * time.Hour)
	moved := announce(t, s, d2, store.ChannelNameWhatsApp, later, waX)[0]
	if moved.ID != x.ID || moved.PublicID != x.PublicID || moved.DeviceID != d2.ID || moved.Device != d2.Fingerprint || !moved.FirstSeen.Equal(T0) || !moved.UpdatedAt.Equal(later) {
		t.Fatalf("taken over by device %d: %+v, want %+v moved, its warm-up kept", d2.ID, moved, x)
	}
	// Device 1 stops announcing both: y is let go, x (device 2's now) stays.
	if nums, err := s.AnnounceNumbers(a.ID, d1.ID, store.ChannelNameWhatsApp, nil, later, 0); err != nil || len(nums) != 0 {
		t.Fatalf("an empty hello: %+v (%v)", nums, err)
	}
	if n, err := s.AgentNumber(a.ID, store.ChannelNameWhatsApp, y.PublicID); err != nil || n.DeviceID != 0 || n.Device != d1.Fingerprint {
		t.Fatalf("a number let go: %+v (%v), want held by nobody, its last agent kept", n, err)
	}
	if n, err := s.AgentNumberByRef(a.ID, x.ID); err != nil || n.DeviceID != d2.ID || n.PublicID != x.PublicID {
		t.Fatalf("the number device 2 holds: %+v (%v)", n, err)
	}
	if n, err := s.AgentNumber(a.ID, store.ChannelNameIMessage, im.PublicID); err != nil || n.DeviceID != d1.ID {
		t.Fatalf("the handle of another channel: %+v (%v), want still held by device %d", n, err, d1.ID)
	}

	list, err := s.AgentNumbers(a.ID, store.ChannelNameWhatsApp)
	if err != nil || len(list) != 2 || list[0].Address != waX || list[1].Address != waY {
		t.Fatalf("the company's numbers: %+v (%v), want %s and %s by address", list, err, waX, waY)
	}
	if list, err := s.AgentNumbers(a.ID, store.ChannelNameIMessage); err != nil || len(list) != 1 || list[0].ID != im.ID {
		t.Fatalf("the company's handles: %+v (%v)", list, err)
	}

	theirs := announce(t, s, db, store.ChannelNameWhatsApp, later, waX)[0]
	if theirs.ID == x.ID || theirs.PublicID == x.PublicID || theirs.CompanyID != b.ID || !theirs.FirstSeen.Equal(later) {
		t.Fatalf("company b's record of the same number: %+v, want its own", theirs)
	}
	if n, _ := s.AgentNumberByRef(a.ID, x.ID); n.DeviceID != d2.ID {
		t.Fatalf("company a's number after company b announced it: %+v", n)
	}
	if list, _ := s.AgentNumbers(b.ID, store.ChannelNameWhatsApp); len(list) != 1 || list[0].ID != theirs.ID {
		t.Fatalf("company b's numbers: %+v", list)
	}
	for name, err := range map[string]error{
		"another company's public id": errOnly(s.AgentNumber(b.ID, store.ChannelNameWhatsApp, x.PublicID)),
		"another channel's public id": errOnly(s.AgentNumber(a.ID, store.ChannelNameIMessage, x.PublicID)),
		"an unknown public id":        errOnly(s.AgentNumber(a.ID, store.ChannelNameWhatsApp, "wa_nothing")),
		"another company's ref":       errOnly(s.AgentNumberByRef(b.ID, x.ID)),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.AnnounceNumbers(a.ID, db.ID, store.ChannelNameWhatsApp, []string{waZ}, later, 0); !errors.Is(err, store.ErrDeviceGone) {
		t.Fatalf("a hello naming another company's device: %v, want ErrDeviceGone", err)
	}
	if list, _ := s.AgentNumbers(a.ID, store.ChannelNameWhatsApp); len(list) != 2 {
		t.Fatalf("after the refused hello: %d numbers, want 2", len(list))
	}
}

func errOnly[T any](_ T, err error) error { return err }

// announceLimit: a company's new numbers stop at the limit, and a hello
// that would go over it stores nothing (not even the rest of the hello);
// known numbers still move between its agents; channels count apart.
func announceLimit(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d1 := Device(t, s, c.ID, newFingerprint())
	d2 := Device(t, s, c.ID, newFingerprint())
	if _, err := s.AnnounceNumbers(c.ID, d1.ID, store.ChannelNameWhatsApp, []string{waX, waY}, T0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnnounceNumbers(c.ID, d2.ID, store.ChannelNameWhatsApp, []string{waX, waZ}, T0, 2); !errors.Is(err, store.ErrTooManyNumbers) {
		t.Fatalf("a third number: %v, want ErrTooManyNumbers", err)
	}
	nums, _ := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp)
	if len(nums) != 2 || nums[0].DeviceID != d1.ID {
		t.Fatalf("after the refused hello: %+v, want 2 numbers, %s still held by device %d", nums, waX, d1.ID)
	}
	if nums, err := s.AnnounceNumbers(c.ID, d2.ID, store.ChannelNameWhatsApp, []string{waY, waX}, T0, 2); err != nil || len(nums) != 2 || nums[1].DeviceID != d2.ID {
		t.Fatalf("known numbers at the limit: %+v (%v), want them moved to device %d", nums, err, d2.ID)
	}
	if _, err := s.AnnounceNumbers(c.ID, d1.ID, store.ChannelNameIMessage, []string{"ana@example.com", "bo@example.com"}, T0, 2); err != nil {
		t.Fatalf("handles count apart: %v", err)
	}
	if _, err := s.AnnounceNumbers(c.ID, d1.ID, store.ChannelNameWhatsApp, []string{waZ, "+15550004444", "+15550005555"}, T0, 0); err != nil {
		t.Fatalf("limit 0: %v, want no limit", err)
	}
}

// announceChannelsTogether: a hello's WhatsApp numbers and iMessage
// handles are stored in one write. Its handles past the limit refuse it
// whole, naming the channel: its WhatsApp numbers, new or moved, and the
// numbers it would let go stay as they were. Within the limit both are
// stored, their records in the order of the sets.
func announceChannelsTogether(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d1 := Device(t, s, c.ID, newFingerprint())
	d2 := Device(t, s, c.ID, newFingerprint())
	if _, err := s.AnnounceNumbers(c.ID, d1.ID, store.ChannelNameWhatsApp, []string{waX}, T0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnnounceNumbers(c.ID, d1.ID, store.ChannelNameIMessage, []string{"ana@example.com", "bo@example.com"}, T0, 2); err != nil {
		t.Fatal(err)
	}
	sets := []store.Announced{
		{Channel: store.ChannelNameWhatsApp, Addresses: []string{waX, waY}},
		{Channel: store.ChannelNameIMessage, Addresses: []string{"cy@example.com"}},
	}
	_, err := s.AnnounceAgentNumbers(c.ID, d2.ID, sets, T0, 2)
	var full *store.TooManyNumbersError
	if !errors.As(err, &full) || full.Channel != store.ChannelNameIMessage || !errors.Is(err, store.ErrTooManyNumbers) {
		t.Fatalf("a third handle: %v, want ErrTooManyNumbers of %s", err, store.ChannelNameIMessage)
	}
	nums, _ := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp)
	if len(nums) != 1 || nums[0].Address != waX || nums[0].DeviceID != d1.ID {
		t.Fatalf("WhatsApp numbers after the refused hello: %+v, want %s alone, still held by device %d", nums, waX, d1.ID)
	}
	// Within the limit: a WhatsApp number new and one moved, and a handle
	// moved, in one write.
	sets = []store.Announced{
		{Channel: store.ChannelNameWhatsApp, Addresses: []string{waY, waX}},
		{Channel: store.ChannelNameIMessage, Addresses: []string{"bo@example.com"}},
	}
	got, err := s.AnnounceAgentNumbers(c.ID, d2.ID, sets, T0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range got {
		addrs = append(addrs, n.Address)
		if n.DeviceID != d2.ID {
			t.Errorf("%s: held by device %d, want %d", n.Address, n.DeviceID, d2.ID)
		}
	}
	if want := []string{waY, waX, "bo@example.com"}; !slices.Equal(addrs, want) {
		t.Fatalf("records %v, want %v", addrs, want)
	}
	handles, _ := s.AgentNumbers(c.ID, store.ChannelNameIMessage)
	for _, h := range handles {
		if h.Address == "ana@example.com" && h.DeviceID != d1.ID {
			t.Errorf("ana@example.com: held by device %d, want still %d (d2 never announced it)", h.DeviceID, d1.ID)
		}
	}
}

// agentNumbersNew: the addresses that are no number of the company on
// the channel yet, each counted once, and the company's numbers of the
// channel, counted only when one of them is new (0 otherwise). A number
// held by nobody is the company's still; another company's number, or
// the same address on the other channel, is new.
func agentNumbersNew(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	other, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	announce(t, s, d, store.ChannelNameWhatsApp, T0, waX, waY, "+15550004444")
	announce(t, s, d, store.ChannelNameWhatsApp, T0, waX, waY) // +15550004444 let go: held by nobody
	announce(t, s, d, store.ChannelNameIMessage, T0, "ana@example.com")
	announce(t, s, Device(t, s, other.ID, newFingerprint()), store.ChannelNameWhatsApp, T0, waZ)
	for _, r := range []struct {
		name        string
		company     uint64
		channel     string
		addrs       []string
		fresh, have int
	}{
		{"none", c.ID, store.ChannelNameWhatsApp, nil, 0, 0},
		{"the company's, one held by nobody", c.ID, store.ChannelNameWhatsApp, []string{waY, "+15550004444", waX}, 0, 0},
		{"another company's", c.ID, store.ChannelNameWhatsApp, []string{waX, waZ}, 1, 3},
		{"named twice", c.ID, store.ChannelNameWhatsApp, []string{waZ, waX, waZ, "+15550005555"}, 2, 3},
		{"the other channel", c.ID, store.ChannelNameIMessage, []string{"ana@example.com", waX}, 1, 1},
		{"the other company", other.ID, store.ChannelNameWhatsApp, []string{waZ, waX}, 1, 1},
		{"a company with none", other.ID, store.ChannelNameIMessage, []string{"ana@example.com"}, 1, 0},
	} {
		fresh, have, err := s.AgentNumbersNew(r.company, r.channel, r.addrs)
		if err != nil || fresh != r.fresh || have != r.have {
			t.Errorf("%s: %d new of %d (%v), want %d of %d", r.name, fresh, have, err, r.fresh, r.have)
		}
	}
}

// announceLimitConcurrent: agents of a company announcing new numbers at
// once never take it past its limit.
func announceLimitConcurrent(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	const agents, limit = 8, 3
	devs := make([]store.Device, agents)
	for i := range devs {
		devs[i] = Device(t, s, c.ID, newFingerprint())
	}
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for i, d := range devs {
		wg.Go(func() {
			_, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{fmt.Sprintf("+1555100%04d", i)}, T0, limit)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrTooManyNumbers):
				refused.Add(1)
			default:
				t.Errorf("agent %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	nums, err := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp)
	if err != nil || ok.Load() != limit || refused.Load() != agents-limit || len(nums) != limit {
		t.Fatalf("%d agents at once, limit %d: %d accepted, %d refused, %d stored (%v)", agents, limit, ok.Load(), refused.Load(), len(nums), err)
	}
}

// announceSameConcurrent: hellos announcing the same new address at once
// all succeed and make one record of it.
func announceSameConcurrent(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	const hellos = 6
	got := make([]store.AgentNumber, hellos)
	var wg sync.WaitGroup
	for i := range hellos {
		wg.Go(func() {
			nums, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{waX}, T0, 0)
			if err != nil || len(nums) != 1 {
				t.Errorf("hello %d: %+v (%v)", i, nums, err)
				return
			}
			got[i] = nums[0]
		})
	}
	wg.Wait()
	for i, n := range got {
		if n.ID != got[0].ID || n.PublicID != got[0].PublicID || n.DeviceID != d.ID {
			t.Fatalf("hello %d: %+v, want %+v like the first", i, n, got[0])
		}
	}
	if nums, err := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp); err != nil || len(nums) != 1 {
		t.Fatalf("the company's numbers: %+v (%v), want one", nums, err)
	}
}

// updateNumber: a change is stored with its time and read back; a later
// hello keeps it; fn's refusal stores nothing; another company's number,
// or another channel's, is ErrNotFound.
func updateNumber(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	changed := T0.Add(time.Hour)
	caps := store.NumberCaps{PerMinute: 2, PerHour: 30, PerDay: 200}
	got, err := s.UpdateAgentNumber(a.ID, store.ChannelNameWhatsApp, n.PublicID, changed, func(n *store.AgentNumber) error {
		n.Status, n.Caps, n.GapMin, n.GapMax = store.NumberPaused, caps, 5*time.Second, 20*time.Second
		return nil
	})
	if err != nil || got.Status != store.NumberPaused || got.Caps != caps || got.GapMax != 20*time.Second || !got.UpdatedAt.Equal(changed) || got.ID != n.ID {
		t.Fatalf("update: %+v (%v)", got, err)
	}
	// A change that changes nothing (PATCH with {}, or with the values the
	// number has) leaves updated_at as it was.
	if same, err := s.UpdateAgentNumber(a.ID, store.ChannelNameWhatsApp, n.PublicID, changed.Add(time.Minute), func(n *store.AgentNumber) error {
		n.Status, n.Caps = store.NumberPaused, caps
		return nil
	}); err != nil || same != got {
		t.Fatalf("an update that changes nothing: %+v (%v), want %+v as it was", same, err, got)
	}
	refused := errors.New("refused")
	if _, err := s.UpdateAgentNumber(a.ID, store.ChannelNameWhatsApp, n.PublicID, changed.Add(time.Hour), func(n *store.AgentNumber) error {
		n.Status = store.NumberActive
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("fn's refusal: %v, want it returned", err)
	}
	announce(t, s, d, store.ChannelNameWhatsApp, changed.Add(2*time.Hour), waX)
	if n, err := s.AgentNumber(a.ID, store.ChannelNameWhatsApp, n.PublicID); err != nil || n.Status != store.NumberPaused || n.Caps != caps || n.GapMin != 5*time.Second || !n.UpdatedAt.Equal(changed) {
		t.Fatalf("after a refused change and a hello: %+v (%v), want the change kept", n, err)
	}
	for name, err := range map[string]error{
		"another company's": errOnly(s.UpdateAgentNumber(b.ID, store.ChannelNameWhatsApp, n.PublicID, changed, func(*store.AgentNumber) error { return nil })),
		"another channel's": errOnly(s.UpdateAgentNumber(a.ID, store.ChannelNameIMessage, n.PublicID, changed, func(*store.AgentNumber) error { return nil })),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s number: %v, want ErrNotFound", name, err)
		}
	}
}

// enqueueAgent: a send is stored queued, from the number's address, for
// the device holding it; the vet sees the number and its accepted sends.
func enqueueAgent(t *testing.T, s AgentsStore) {
	c, u := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	first := enqueueAt(t, s, agentSend(c.ID, n, "one"), T0)
	var seen store.AgentNumber
	var history []time.Time
	vet := func(n store.AgentNumber, h func(time.Time) []time.Time) (func(), error) {
		seen, history = n, h(T0.Add(-time.Hour))
		return func() {}, nil
	}
	m := agentSend(c.ID, n, "two")
	m.UserID, m.ExpiresAt = u.ID, T0.Add(25*time.Hour)
	now := T0.Add(time.Minute)
	out, prior, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, stoppedAt(now), vet, nil)
	if err != nil || prior != nil {
		t.Fatalf("enqueue: %v (prior %v)", err, prior)
	}
	if seen.ID != n.ID || seen.PublicID != n.PublicID || len(history) != 1 || !history[0].Equal(T0) {
		t.Fatalf("the vet saw number %+v and history %v, want number %d and the first send at T0", seen, history, n.ID)
	}
	if out.ID == 0 || out.ID == first.ID || out.UUID != m.UUID || out.NumberID != n.ID || out.NumberRef != n.PublicID || out.Account != waX ||
		out.Direction != store.Outbound || out.Status != store.MsgQueued || out.DeviceID != d.ID || out.Device != d.Fingerprint ||
		!out.CreatedAt.Equal(now) || !out.UpdatedAt.Equal(now) || out.UserID != u.ID || out.Text != "two" || !out.ExpiresAt.Equal(m.ExpiresAt) {
		t.Fatalf("stored: %+v", out)
	}
	msgs, total, err := s.AgentMessages(c.ID, n.ID, 1, 10)
	if err != nil || total != 2 || len(msgs) != 2 || msgs[0].ID != out.ID || msgs[0].UUID != out.UUID || msgs[0].Account != waX || msgs[1].ID != first.ID {
		t.Fatalf("the number's messages: %+v of %d (%v), want the two sends, newest first", msgs, total, err)
	}
	// A number held by nobody still takes sends: they wait for its next agent.
	if _, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, nil, now, 0); err != nil {
		t.Fatal(err)
	}
	waiting := enqueueAt(t, s, agentSend(c.ID, n, "three"), now)
	if waiting.DeviceID != 0 || waiting.Status != store.MsgQueued {
		t.Fatalf("a send through a number held by nobody: %+v, want queued for no device", waiting)
	}
}

// enqueueAgentRefusals: a number of another company or channel, or none,
// is ErrNotFound; a paused one ErrNumberPaused before the vet is asked; the
// vet's refusal is the error; a refused send stores nothing.
func enqueueAgentRefusals(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	h := announce(t, s, d, store.ChannelNameIMessage, T0, "ana@example.com")[0]
	asked := 0
	vet := func(store.AgentNumber, func(time.Time) []time.Time) (func(), error) { asked++; return func() {}, nil }
	try := func(m store.Message) error {
		_, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, stoppedAt(T0), vet, nil)
		return err
	}
	wrongChannel := agentSend(a.ID, h, "x")
	wrongChannel.Channel = store.ChannelNameWhatsApp
	unknown := agentSend(a.ID, n, "x")
	unknown.NumberRef = "wa_nothing"
	for name, m := range map[string]store.Message{
		"another company's number": agentSend(b.ID, n, "x"),
		"another channel's handle": wrongChannel,
		"an unknown number":        unknown,
	} {
		if err := try(m); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if asked != 0 {
		t.Fatalf("the vet was asked %d times for numbers not found", asked)
	}
	capped := errors.New("capped")
	if _, _, err := s.EnqueueAgent(new(agentSend(a.ID, n, "x")), store.IdempotencyKey{}, stoppedAt(T0), func(store.AgentNumber, func(time.Time) []time.Time) (func(), error) {
		return nil, capped
	}, nil); !errors.Is(err, capped) {
		t.Fatalf("the vet's refusal: %v, want it returned", err)
	}
	if _, err := s.UpdateAgentNumber(a.ID, store.ChannelNameWhatsApp, n.PublicID, T0, func(n *store.AgentNumber) error { n.Status = store.NumberPaused; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := try(agentSend(a.ID, n, "x")); !errors.Is(err, store.ErrNumberPaused) || asked != 0 {
		t.Fatalf("a paused number: %v after %d vets, want ErrNumberPaused before the vet", err, asked)
	}
	if _, total, _ := s.AgentMessages(a.ID, n.ID, 1, 10); total != 0 {
		t.Fatalf("refused sends stored %d messages", total)
	}
	if sent, err := s.AgentSendsSince(a.ID, n.ID, beforeSends); err != nil || sent != 0 {
		t.Fatalf("refused sends counted %d accepted sends (%v)", sent, err)
	}
}

// enqueueAgentGivesBack: a send the store refuses after the vet took its
// slot (here, over the plan's message limit) gives the slot back, once;
// an accepted send keeps it.
func enqueueAgentGivesBack(t *testing.T, s AgentsStore) {
	s.SetPlans(&limitsByPlan{})
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	var mu sync.Mutex
	taken, given := 0, 0
	vet := func(store.AgentNumber, func(time.Time) []time.Time) (func(), error) {
		mu.Lock()
		taken++
		mu.Unlock()
		return func() { mu.Lock(); given++; mu.Unlock() }, nil
	}
	send := func() error {
		m := agentSend(c.ID, n, "hi")
		_, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, stoppedAt(T0), vet, nil)
		return err
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error { sub.PlanID = "solo"; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	var pl *store.PlanLimitError
	if err := send(); !errors.As(err, &pl) || pl.What != store.LimitMessages || pl.Limit != 2 {
		t.Fatalf("a third send on plan solo: %v, want the plan's message limit of 2", err)
	}
	if taken != 3 || given != 1 {
		t.Fatalf("slots taken %d, given back %d; want 3 and 1", taken, given)
	}
}

// enqueueAgentRefusedTakesNoID: a send the plan refuses takes no message
// id, so the next accepted send's id follows the last accepted one (in a
// store nothing else writes to at the time).
func enqueueAgentRefusedTakesNoID(t *testing.T, s AgentsStore) {
	s.SetPlans(messagePlan(1))
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	first := enqueueAt(t, s, agentSend(c.ID, n, "1"), T0)
	m := agentSend(c.ID, n, "2")
	if _, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, stoppedAt(T0), noVet, nil); !errors.Is(err, store.ErrPlanLimit) {
		t.Fatalf("a send past the limit: %v, want the plan's limit", err)
	}
	next := enqueueAt(t, s, agentSend(c.ID, n, "3"), T0.AddDate(0, 1, 0))
	if next.ID != first.ID+1 {
		t.Fatalf("the send after a refused one has id %d, the one before %d: the refusal took an id", next.ID, first.ID)
	}
}

// enqueueAgentIdempotent: a send repeated with its idempotency key gets
// the first answer back and stores nothing more, without asking the vet.
func enqueueAgentIdempotent(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	key := store.IdempotencyKey{Key: "k-1", Route: "/whatsapp/send", Digest: "d-1"}
	vets, answers := 0, 0
	vet := func(store.AgentNumber, func(time.Time) []time.Time) (func(), error) { vets++; return func() {}, nil }
	answer := func(m store.Message) (int, []byte) { answers++; return 202, []byte(`{"id":"` + m.UUID + `"}`) }
	m := agentSend(c.ID, n, "hi")
	first, prior, err := s.EnqueueAgent(&m, key, stoppedAt(T0), vet, answer)
	if err != nil || prior != nil || first.ID == 0 {
		t.Fatalf("the first send: %+v prior %v (%v)", first, prior, err)
	}
	again := agentSend(c.ID, n, "hi")
	_, prior, err = s.EnqueueAgent(&again, key, stoppedAt(T0.Add(time.Minute)), vet, answer)
	if err != nil || prior == nil || prior.Status != 202 || string(prior.Body) != `{"id":"`+first.UUID+`"}` {
		t.Fatalf("the repeat: prior %+v (%v), want the first answer", prior, err)
	}
	if vets != 1 || answers != 1 {
		t.Fatalf("vet asked %d times, answer built %d times; want once each", vets, answers)
	}
	if _, total, _ := s.AgentMessages(c.ID, n.ID, 1, 10); total != 1 {
		t.Fatalf("%d messages stored, want 1", total)
	}
}

// enqueueAgentVetExact: concurrent sends through one number are vetted one
// at a time, each seeing every send accepted before it, so a vet that
// allows five in an hour lets exactly five through.
func enqueueAgentVetExact(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	capped := errors.New("capped")
	var inside atomic.Int32
	vet := func(_ store.AgentNumber, h func(time.Time) []time.Time) (func(), error) {
		if inside.Add(1) != 1 {
			t.Error("two vets of one number at once")
		}
		defer inside.Add(-1)
		if len(h(T0.Add(-time.Hour))) >= 5 {
			return nil, capped
		}
		return func() {}, nil
	}
	const senders = 16
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range senders {
		wg.Go(func() {
			m := agentSend(c.ID, n, "hi")
			_, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, stoppedAt(T0.Add(time.Duration(i)*time.Second)), vet, nil)
			switch {
			case err == nil:
				ok.Add(1)
			case !errors.Is(err, capped):
				t.Errorf("sender %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	sent, err := s.AgentSendsSince(c.ID, n.ID, T0.Add(-time.Hour))
	if ok.Load() != 5 || sent != 5 || err != nil {
		t.Fatalf("%d racing sends, 5 allowed: %d accepted, %d recorded (%v)", senders, ok.Load(), sent, err)
	}
}

// agentPending: the device holding a number reads its queued sends, oldest
// first, after a place and up to a limit; any other device reads nothing;
// the queue follows the number to its next agent.
func agentPending(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d1 := Device(t, s, a.ID, newFingerprint())
	d2 := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())
	x := announce(t, s, d1, store.ChannelNameWhatsApp, T0, waX)[0]
	y := announce(t, s, d2, store.ChannelNameWhatsApp, T0, waY)[0]
	var sent []uint64
	for i := range 4 {
		sent = append(sent, enqueueAt(t, s, agentSend(a.ID, x, fmt.Sprint(i)), T0.Add(time.Duration(i)*time.Second)).ID)
	}
	enqueueAt(t, s, agentSend(a.ID, y, "y"), T0)
	if !slices.IsSorted(sent) {
		t.Fatalf("one number's sends got ids %v, want them rising", sent)
	}
	got, err := s.AgentPending(a.ID, d1.ID, x.ID, 0, 10)
	if err != nil || !slices.Equal(msgIDs(got), sent) || got[0].Text != "0" || got[0].Status != store.MsgQueued {
		t.Fatalf("pending: %v (%v), want %v", msgIDs(got), err, sent)
	}
	if got, _ := s.AgentPending(a.ID, d1.ID, x.ID, sent[1], 1); !slices.Equal(msgIDs(got), sent[2:3]) {
		t.Fatalf("after %d, one: %v, want %v", sent[1], msgIDs(got), sent[2:3])
	}
	for name, got := range map[string][]store.Message{
		"another device of the company": noErr(s.AgentPending(a.ID, d2.ID, x.ID, 0, 10)),
		"another company":               noErr(s.AgentPending(b.ID, db.ID, x.ID, 0, 10)),
		"another company's device":      noErr(s.AgentPending(a.ID, db.ID, x.ID, 0, 10)),
	} {
		if len(got) != 0 {
			t.Errorf("%s reads %v, want nothing", name, msgIDs(got))
		}
	}
	if got, _ := s.AgentPending(a.ID, d2.ID, y.ID, 0, 10); len(got) != 1 || got[0].Text != "y" {
		t.Fatalf("device 2's own number: %+v", got)
	}
	announce(t, s, d2, store.ChannelNameWhatsApp, T0.Add(time.Hour), waX, waY)
	if got, _ := s.AgentPending(a.ID, d2.ID, x.ID, 0, 10); !slices.Equal(msgIDs(got), sent) {
		t.Fatalf("the number's new agent: %v, want its queue %v", msgIDs(got), sent)
	}
	if got, _ := s.AgentPending(a.ID, d1.ID, x.ID, 0, 10); len(got) != 0 {
		t.Fatalf("the number's former agent: %v, want nothing", msgIDs(got))
	}
}

// AgentNodes runs the agents' rules that must hold across the nodes of a
// cluster as on one: open gives two handles on one new store (two pools on
// one database). A number paused through one node is held on the other.
func AgentNodes(t *testing.T, open func(t *testing.T) (a, b AgentsStore)) {
	t.Run("PendingHeldWhilePaused", func(t *testing.T) { t.Parallel(); a, b := open(t); agentPendingHeld(t, a, b) })
	t.Run("HandOutMoved", func(t *testing.T) { t.Parallel(); a, b := open(t); agentHandOutMoved(t, a, b) })
	t.Run("HelloHolds", func(t *testing.T) { t.Parallel(); a, b := open(t); helloHolds(t, a, b) })
}

// helloHolds: the device record the hello's write (UpdateDeviceWith)
// stores says when the registration holds no WhatsApp number and no
// iMessage handle (Device.NoNumbers), so that a hello announcing none lets
// them go without an agent write for a phone that holds none: said of a
// device that never announced one, not once it announced one (on either
// channel), said again at the hello after it let them all go or another
// device took them, and never while it holds one: the announce that gives
// it one unsets it in the same transaction, so the record read without a
// hello (CompanyDevice) does not say it either. A new registration says
// it (a new id holds none); one registered again keeps what it said.
// The numbers change through a and the hello is written through b: two
// nodes of a cluster on one database (or one store twice).
func helloHolds(t *testing.T, a, b AgentsStore) {
	c, _ := Company(t, a)
	d1 := Device(t, a, c.ID, newFingerprint())
	d2 := Device(t, a, c.ID, newFingerprint())
	hello := func(d store.Device, none bool, when string) {
		t.Helper()
		got, err := b.UpdateDeviceWith(c.ID, d.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
			d.LastSeenAt = T0
			return nil, nil
		})
		if err != nil || got.NoNumbers != none {
			t.Fatalf("%s: the hello's write of device %d says it holds none: %v (%v), want %v", when, d.ID, got.NoNumbers, err, none)
		}
		if stored, err := a.CompanyDevice(c.ID, d.Fingerprint); err != nil || stored.NoNumbers != none {
			t.Fatalf("%s: device %d as stored says it holds none: %v (%v), want %v", when, d.ID, stored.NoNumbers, err, none)
		}
	}
	stored := func(d store.Device, when string) {
		t.Helper()
		if got, err := b.CompanyDevice(c.ID, d.Fingerprint); err != nil || got.NoNumbers {
			t.Fatalf("%s: device %d as stored says it holds none (%v)", when, d.ID, err)
		}
	}
	if got, err := a.CompanyDevice(c.ID, d1.Fingerprint); err != nil || !got.NoNumbers {
		t.Fatalf("a new registration as stored says it holds none: %v (%v), want true: a new id holds none", got.NoNumbers, err)
	}
	hello(d1, true, "never announced one")
	announce(t, a, d1, store.ChannelNameIMessage, T0, "ana@example.com")
	stored(d1, "an iMessage handle announced")
	hello(d1, false, "an iMessage handle announced")
	hello(d2, true, "another device of the company")
	announce(t, a, d1, store.ChannelNameWhatsApp, T0, waX)
	if nums, err := a.AnnounceNumbers(c.ID, d1.ID, store.ChannelNameIMessage, nil, T0, 0); err != nil || len(nums) != 0 {
		t.Fatalf("no handle: %+v (%v)", nums, err)
	}
	hello(d1, false, "the handle let go, the WhatsApp number held")
	announce(t, a, d2, store.ChannelNameWhatsApp, T0, waX)
	stored(d2, "the device that took the number")
	hello(d1, true, "its number taken by another device")
	hello(d2, false, "the device that took the number")

	// Registered again, the registration keeps its id and the numbers it
	// holds: the record built afresh says what the old one said.
	again := func(d store.Device) {
		t.Helper()
		code := []byte(fmt.Sprintf("again-%d", unique()))
		if err := a.PutPairing(code, store.Pairing{CompanyID: c.ID, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
			t.Fatal(err)
		}
		if _, replaced, _, err := a.RegisterDevice(code, T0, d.Fingerprint, func(store.Pairing, *store.Device) (store.Device, error) {
			return store.Device{Status: store.DeviceActive, TokenHash: []byte(fmt.Sprintf("t-%d", unique()))}, nil
		}); err != nil || !replaced {
			t.Fatalf("register %s again: replaced %v (%v)", d.Fingerprint, replaced, err)
		}
	}
	again(d2)
	stored(d2, "registered again, holding the number")
	hello(d2, false, "registered again, holding the number")
	again(d1)
	hello(d1, true, "registered again, holding none")
	if nums, err := a.AnnounceNumbers(c.ID, d2.ID, store.ChannelNameWhatsApp, nil, T0, 0); err != nil || len(nums) != 0 {
		t.Fatalf("no number: %+v (%v)", nums, err)
	}
	hello(d2, true, "its number let go")
}

// helloHoldsConcurrent: a hello's write that reads whether the device
// holds a number and an announce that gives it one, at once, never leave
// its record saying it holds none (Device.NoNumbers) while it holds the
// number, whichever commits first.
func helloHoldsConcurrent(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	hello := func() (store.Device, error) {
		return s.UpdateDeviceWith(c.ID, d.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
			d.LastSeenAt = T0
			return nil, nil
		})
	}
	for i := range 20 {
		// A record that says nothing yet (written before NoNumbers, or a
		// registration's new one): the hello reads the index.
		if _, err := s.UpdateDeviceByID(c.ID, d.ID, func(d *store.Device) error { d.NoNumbers = false; return nil }); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		wg.Go(func() {
			_, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{waX}, T0, 0)
			errs <- err
		})
		wg.Go(func() {
			_, err := hello()
			errs <- err
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if got, err := s.CompanyDevice(c.ID, d.Fingerprint); err != nil || got.NoNumbers {
			t.Fatalf("round %d: the device holds a number and its record says it holds none (%v)", i, err)
		}
		if got, err := hello(); err != nil || got.NoNumbers {
			t.Fatalf("round %d: the hello of the device holding a number says it holds none (%v)", i, err)
		}
		if _, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, nil, T0, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// agentPendingHeld: a paused number's queue is held: its agent reads none
// of its jobs (the company's other numbers still flow) until it is active
// again, then all of them, in order, from where it was; a held job still
// expires at the end of its TTL. The pause is made through one handle and
// read through the other: two nodes of a cluster on one database (or one
// store twice).
func agentPendingHeld(t *testing.T, pauser, reader AgentsStore) {
	a, _ := Company(t, pauser)
	d := Device(t, pauser, a.ID, newFingerprint())
	nums := announce(t, pauser, d, store.ChannelNameWhatsApp, T0, waX, waY)
	x, y := nums[0], nums[1]
	var sent []uint64
	for i := range 3 {
		m := agentSend(a.ID, x, fmt.Sprint(i))
		m.ExpiresAt = T0.Add(time.Hour)
		sent = append(sent, enqueueAt(t, pauser, m, T0.Add(time.Duration(i)*time.Second)).ID)
	}
	var kept []uint64
	for i := range 2 {
		m := agentSend(a.ID, x, fmt.Sprint("kept", i))
		m.ExpiresAt = T0.Add(2 * time.Hour)
		kept = append(kept, enqueueAt(t, pauser, m, T0.Add(time.Minute+time.Duration(i)*time.Second)).ID)
	}
	other := enqueueAt(t, pauser, agentSend(a.ID, y, "y"), T0)
	setStatus := func(status string, at time.Time) {
		t.Helper()
		if n, err := pauser.UpdateAgentNumber(a.ID, store.ChannelNameWhatsApp, x.PublicID, at, func(n *store.AgentNumber) error { n.Status = status; return nil }); err != nil || n.Status != status {
			t.Fatalf("set %s: %+v (%v)", status, n, err)
		}
	}
	setStatus(store.NumberPaused, T0.Add(2*time.Minute))
	for _, after := range []uint64{0, sent[0]} {
		if got, err := reader.AgentPending(a.ID, d.ID, x.ID, after, 10); err != nil || len(got) != 0 {
			t.Fatalf("the paused number's queue after %d: %v (%v), want nothing: held", after, msgIDs(got), err)
		}
	}
	if got, err := reader.AgentPending(a.ID, d.ID, y.ID, 0, 10); err != nil || !slices.Equal(msgIDs(got), []uint64{other.ID}) {
		t.Fatalf("the company's other number while one is paused: %v (%v), want %d", msgIDs(got), err, other.ID)
	}
	// The pause outlasts the first three's TTL: they expire, held or not.
	expired, err := reader.ExpireQueued(T0.Add(90*time.Minute), 100)
	if err != nil || !slices.Equal(msgIDs(expired), sent) {
		t.Fatalf("expired while held: %v (%v), want %v", msgIDs(expired), err, sent)
	}
	if got, err := reader.AgentPending(a.ID, d.ID, x.ID, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("still paused: %v (%v), want nothing", msgIDs(got), err)
	}
	setStatus(store.NumberActive, T0.Add(100*time.Minute))
	if got, err := reader.AgentPending(a.ID, d.ID, x.ID, 0, 10); err != nil || !slices.Equal(msgIDs(got), kept) {
		t.Fatalf("resumed: %v (%v), want the held sends within their TTL, %v, in order", msgIDs(got), err, kept)
	}
	if got, err := reader.AgentPending(a.ID, d.ID, x.ID, kept[0], 10); err != nil || !slices.Equal(msgIDs(got), kept[1:]) {
		t.Fatalf("resumed, after %d: %v (%v), want %v", kept[0], msgIDs(got), err, kept[1:])
	}
}

// agentDeleted: deleting the agent fails the sends it had acked
// (device_deleted); the number's queued sends wait for the next agent that
// announces it (docs/api.md), which then reads them as its own.
func agentDeleted(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	d1 := Device(t, s, a.ID, newFingerprint())
	x := announce(t, s, d1, store.ChannelNameWhatsApp, T0, waX)[0]
	acked := enqueueAt(t, s, agentSend(a.ID, x, "acked"), T0)
	queued := enqueueAt(t, s, agentSend(a.ID, x, "queued"), T0.Add(time.Second))
	if _, _, err := s.Transition(a.ID, d1.ID, acked.UUID, store.MsgSending, "", "", T0.Add(2*time.Second)); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if _, err := s.DeleteDevice(a.ID, d1.Fingerprint, T0.Add(time.Minute)); err != nil {
		t.Fatalf("delete the agent: %v", err)
	}
	if m, err := s.MessageByUUID(a.ID, acked.UUID); err != nil || m.Status != store.MsgFailed || m.Error != "device_deleted" {
		t.Fatalf("the acked send after its agent's deletion: %s %q (%v), want failed device_deleted", m.Status, m.Error, err)
	}
	if m, err := s.MessageByUUID(a.ID, queued.UUID); err != nil || m.Status != store.MsgQueued {
		t.Fatalf("the queued send after its agent's deletion: %s %q (%v), want queued, waiting for the next agent", m.Status, m.Error, err)
	}
	// Its link may outlive the deletion for a moment, on another node
	// too: it is handed nothing.
	if handOut(t, s, d1, queued) {
		t.Fatal("a send handed to its number's deleted agent")
	}
	d2 := Device(t, s, a.ID, newFingerprint())
	announce(t, s, d2, store.ChannelNameWhatsApp, T0.Add(time.Hour), waX)
	if got, err := s.AgentPending(a.ID, d2.ID, x.ID, 0, 10); err != nil || !slices.Equal(msgIDs(got), []uint64{queued.ID}) {
		t.Fatalf("the number's next agent reads %v (%v), want the queued send %d", msgIDs(got), err, queued.ID)
	}
	if _, _, err := s.Transition(a.ID, d2.ID, queued.UUID, store.MsgSent, "", "", T0.Add(2*time.Hour)); err != nil {
		t.Fatalf("the next agent's report: %v", err)
	}
}

func noErr[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// agentInbound: a message an agent received is stored once per client id
// (a repeat is acknowledged with the stored one), on the company's number
// of that address, its inbound event built in its transaction, counted
// received once and shown once in the company's activity; an address
// of no number is ErrNotFound; a device of another company ErrDeviceGone;
// the event builder's error stores nothing. (The files a message takes are the Media
// suite's.)
func agentInbound(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	if _, err := s.UpdateWebhookSet(a.ID, T0, func(w *store.WebhookSet) error {
		w.Entries = []store.WebhookEntry{{URL: "https://hooks.example.com/in", Active: true}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var hooked []store.Message
	var committed atomic.Int32
	var fail error
	s.SetInboundEvents(store.InboundEvents{
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			if fail != nil {
				return store.WebhookEvent{}, nil, fail
			}
			hooked = append(hooked, m)
			return store.WebhookEvent{ID: fmt.Sprintf("ev-%d", unique()), Body: []byte("{}")},
				[]store.WebhookDelivery{{UUID: fmt.Sprintf("d-%d", unique()), EventType: "whatsapp.received", WebhookID: set.Entries[0].ID, CreatedAt: T0, NextAttemptAt: T0}}, nil
		},
		Committed: func(store.Message, store.OutboxAdd) { committed.Add(1) },
	})
	now := T0.Add(time.Minute)
	m := inboundTo(d, waX, "c-1")
	m.ReceivedAt = "2026-11-19T09:59:58Z"
	got, dup, err := s.StoreAgentInbound(&m, stoppedAt(now))
	if err != nil || dup || got.ID == 0 || got.Direction != store.Inbound || got.Status != store.MsgReceived || got.NumberID != n.ID ||
		got.NumberRef != n.PublicID || got.DeviceID != d.ID || got.Device != d.Fingerprint || got.Account != waX || got.Phone != m.Phone ||
		!got.CreatedAt.Equal(now) || got.ClientID != "c-1" || got.ReceivedAt != m.ReceivedAt || got.Text != m.Text {
		t.Fatalf("stored: %+v dup %v (%v)", got, dup, err)
	}
	if len(hooked) != 1 || hooked[0].ID != got.ID || committed.Load() != 1 {
		t.Fatalf("extra ran %d times (%d commits heard), want once with the stored message", len(hooked), committed.Load())
	}
	repeat := inboundTo(d, waX, "c-1")
	again, dup, err := s.StoreAgentInbound(&repeat, stoppedAt(now.Add(time.Minute)))
	if err != nil || !dup || again.ID != got.ID || again.UUID != got.UUID || len(hooked) != 1 {
		t.Fatalf("the repeat: %+v dup %v (%v), extra ran %d times; want the first message, extra once", again, dup, err, len(hooked))
	}
	fail = errors.New("the builder failed")
	if _, _, err := s.StoreAgentInbound(new(inboundTo(d, waX, "c-2")), stoppedAt(now)); !errors.Is(err, fail) {
		t.Fatalf("the builder's error: %v, want it returned", err)
	}
	fail = nil
	for name, tc := range map[string]struct {
		m    store.Message
		want error
	}{
		"an address of no number": {inboundTo(d, waY, "c-4"), store.ErrNotFound},
		"a handle, on WhatsApp":   {inboundTo(d, "ana@example.com", "c-5"), store.ErrNotFound},
		"another company's device": {func() store.Message {
			m := inboundTo(db, waX, "c-6")
			m.CompanyID = a.ID
			return m
		}(), store.ErrDeviceGone},
	} {
		if _, _, err := s.StoreAgentInbound(&tc.m, stoppedAt(now)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if msgs, total, _ := s.AgentMessages(a.ID, n.ID, 1, 10); total != 1 || msgs[0].ID != got.ID {
		t.Fatalf("the number's messages: %d (%+v), want only the first", total, msgs)
	}
	if len(hooked) != 1 {
		t.Fatalf("extra ran for refused messages: %d", len(hooked))
	}
	sum, err := s.DashboardSummary(a.ID, T0, now.Add(time.Hour), 50)
	if err != nil || sum.Totals.Received != 1 {
		t.Fatalf("received counted %d times (%v), want once", sum.Totals.Received, err)
	}
	var lines []store.Activity
	for _, act := range sum.Recent {
		if act.Type == store.ActMessageReceived {
			lines = append(lines, act)
		}
	}
	if len(lines) != 1 || !lines[0].At.Equal(now) || !strings.HasPrefix(lines[0].Description, "WhatsApp message from ") {
		t.Fatalf("activity of the received message: %+v, want one WhatsApp line at %v", lines, now)
	}
}

// agentInboundHolder: an agent's inbound message counts only on a number
// that agent holds (its latest hello announced it). Another agent of the
// company naming it is refused and nothing is stored; once the number
// moves to it, the same frame passes; the former holder's repeat of a
// message it stored is acknowledged, its new ones refused.
func agentInboundHolder(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	holder := Device(t, s, c.ID, newFingerprint())
	other := Device(t, s, c.ID, newFingerprint())
	n := announce(t, s, holder, store.ChannelNameWhatsApp, T0, waX)[0]
	in := func(d store.Device, clientID string) error {
		m := inboundTo(d, waX, clientID)
		_, _, err := s.StoreAgentInbound(&m, stoppedAt(T0))
		return err
	}
	if err := in(other, "forged-1"); !errors.Is(err, store.ErrNumberNotHeld) {
		t.Fatalf("inbound from an agent that does not hold the number: %v, want ErrNumberNotHeld", err)
	}
	if msgs, total, _ := s.AgentMessages(c.ID, n.ID, 1, 10); total != 0 {
		t.Fatalf("%d stored messages (%v), want none", total, msgs)
	}
	if err := in(holder, "real-1"); err != nil {
		t.Fatalf("inbound from the holder: %v", err)
	}
	announce(t, s, other, store.ChannelNameWhatsApp, T0, waX)
	if err := in(other, "forged-1"); err != nil {
		t.Fatalf("inbound from the new holder: %v", err)
	}
	if err := in(holder, "real-1"); err != nil {
		t.Fatalf("a repeat of a stored message from the former holder: %v", err)
	}
	if err := in(holder, "real-2"); !errors.Is(err, store.ErrNumberNotHeld) {
		t.Fatalf("inbound from the former holder: %v, want ErrNumberNotHeld", err)
	}
	if _, total, _ := s.AgentMessages(c.ID, n.ID, 1, 10); total != 2 {
		t.Fatalf("%d stored messages, want 2", total)
	}
}

// agentInboundOnceConcurrent: the same frame delivered several times at
// once is stored once; every delivery is answered with that message.
func agentInboundOnceConcurrent(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	const deliveries = 6
	got := make([]store.Message, deliveries)
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for i := range deliveries {
		wg.Go(func() {
			m := inboundTo(d, waX, "c-1")
			out, dup, err := s.StoreAgentInbound(&m, stoppedAt(T0))
			if err != nil {
				t.Errorf("delivery %d: %v", i, err)
				return
			}
			if !dup {
				fresh.Add(1)
			}
			got[i] = out
		})
	}
	wg.Wait()
	if fresh.Load() != 1 {
		t.Fatalf("%d deliveries at once: %d stored as new, want 1", deliveries, fresh.Load())
	}
	for i, m := range got {
		if m.ID == 0 || m.ID != got[0].ID {
			t.Fatalf("delivery %d answered with message %d, want %d like the first", i, m.ID, got[0].ID)
		}
	}
	if _, total, _ := s.AgentMessages(c.ID, n.ID, 1, 10); total != 1 {
		t.Fatalf("%d messages stored, want 1", total)
	}
}

// agentMessages: a number's messages, both directions, newest first, one
// page at a time with their total; another number's, or another company's
// view, are apart; a page past the end is empty, even one whose offset
// would overflow.
func agentMessages(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, newFingerprint())
	nums := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX, waY)
	x, y := nums[0], nums[1]
	var want []uint64
	for i := range 5 {
		now := T0.Add(time.Duration(i) * time.Minute)
		if i%2 == 0 {
			want = append(want, enqueueAt(t, s, agentSend(a.ID, x, fmt.Sprint(i)), now).ID)
			continue
		}
		m := inboundTo(d, waX, fmt.Sprint(i))
		got, _, err := s.StoreAgentInbound(&m, stoppedAt(now))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, got.ID)
	}
	enqueueAt(t, s, agentSend(a.ID, y, "y"), T0)
	slices.Reverse(want)
	var got []uint64
	for page := 1; page <= 3; page++ {
		msgs, total, err := s.AgentMessages(a.ID, x.ID, page, 2)
		if err != nil || total != 5 {
			t.Fatalf("page %d: total %d (%v), want 5", page, total, err)
		}
		got = append(got, msgIDs(msgs)...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("three pages of two: %v, want %v", got, want)
	}
	for _, tc := range []struct{ page, limit int }{{4, 2}, {math.MaxInt, 100}, {math.MaxInt/2 + 1, 2}} {
		msgs, total, err := s.AgentMessages(a.ID, x.ID, tc.page, tc.limit)
		if err != nil || total != 5 || len(msgs) != 0 {
			t.Errorf("page %d of %d: %d messages of %d (%v), want 0 of 5", tc.page, tc.limit, len(msgs), total, err)
		}
	}
	if msgs, total, _ := s.AgentMessages(a.ID, y.ID, 1, 10); total != 1 || msgs[0].Text != "y" {
		t.Fatalf("the other number: %+v of %d", msgs, total)
	}
	if msgs, total, err := s.AgentMessages(b.ID, x.ID, 1, 10); err != nil || total != 0 || len(msgs) != 0 {
		t.Fatalf("another company's view: %d of %d (%v), want none", len(msgs), total, err)
	}
}

// agentSends: a number's accepted sends by time, for the governor: counted
// and listed since a time, apart per number; pruning drops those before
// the cutoff, every company's, and leaves the messages.
func agentSends(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())
	nums := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX, waY)
	x, y := nums[0], nums[1]
	bx := announce(t, s, db, store.ChannelNameWhatsApp, T0, waX)[0]
	times := []time.Time{T0, T0.Add(10 * time.Minute), T0.Add(2 * time.Hour)}
	for _, stoppedAt := range times {
		enqueueAt(t, s, agentSend(a.ID, x, "x"), stoppedAt)
	}
	enqueueAt(t, s, agentSend(a.ID, y, "y"), T0.Add(time.Hour))
	enqueueAt(t, s, agentSend(b.ID, bx, "b"), T0)
	if n, err := s.AgentSendsSince(a.ID, x.ID, T0.Add(5*time.Minute)); err != nil || n != 2 {
		t.Fatalf("sends since T0+5m: %d (%v), want 2", n, err)
	}
	if n, _ := s.AgentSendsSince(a.ID, x.ID, T0.Add(10*time.Minute)); n != 2 {
		t.Fatalf("sends since the second one's time: %d, want 2 (since includes it)", n)
	}
	got, err := s.AgentSendTimes(a.ID, x.ID, beforeSends)
	if err != nil || !slices.EqualFunc(got, times, time.Time.Equal) {
		t.Fatalf("send times: %v (%v), want %v", got, err, times)
	}
	if got, _ := s.AgentSendTimes(a.ID, y.ID, beforeSends); len(got) != 1 || !got[0].Equal(T0.Add(time.Hour)) {
		t.Fatalf("the other number's send times: %v", got)
	}
	if n, _ := s.AgentSendsSince(b.ID, x.ID, beforeSends); n != 0 {
		t.Fatalf("another company's view of the number: %d sends, want 0", n)
	}
	pruned, err := s.PruneAgentSends(T0.Add(90 * time.Minute))
	if err != nil || pruned != 4 {
		t.Fatalf("prune before T0+90m: %d (%v), want 4 (two of x, y's, company b's)", pruned, err)
	}
	if got, _ := s.AgentSendTimes(a.ID, x.ID, beforeSends); len(got) != 1 || !got[0].Equal(times[2]) {
		t.Fatalf("after pruning: %v, want only %v", got, times[2])
	}
	if n, _ := s.AgentSendsSince(b.ID, bx.ID, beforeSends); n != 0 {
		t.Fatalf("company b's sends after pruning: %d, want 0", n)
	}
	if _, total, _ := s.AgentMessages(a.ID, x.ID, 1, 10); total != 3 {
		t.Fatalf("pruning left %d messages of 3", total)
	}
	if pruned, err := s.PruneAgentSends(T0.Add(90 * time.Minute)); err != nil || pruned != 0 {
		t.Fatalf("pruning again: %d (%v), want 0", pruned, err)
	}
}

// agentNumbersSentSince: the company's numbers of a channel, as
// AgentNumbers lists them, each with its accepted sends since a time, as
// AgentSendsSince counts them: another company's sends through the same
// address, and another channel's numbers, are not counted.
func agentNumbersSentSince(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())
	nums := announce(t, s, d, store.ChannelNameWhatsApp, T0, waZ, waX, waY)
	handle := announce(t, s, d, store.ChannelNameIMessage, T0, "ana@example.com")[0]
	bx := announce(t, s, db, store.ChannelNameWhatsApp, T0, waX)[0]
	for i, n := range nums {
		for k := range i + 1 {
			enqueueAt(t, s, agentSend(a.ID, n, "a"), T0.Add(time.Duration(k)*time.Hour))
		}
	}
	enqueueAt(t, s, agentSend(a.ID, handle, "h"), T0)
	enqueueAt(t, s, agentSend(b.ID, bx, "b"), T0.Add(time.Hour))
	want, err := s.AgentNumbers(a.ID, store.ChannelNameWhatsApp)
	if err != nil || len(want) != 3 {
		t.Fatalf("the numbers: %+v (%v)", want, err)
	}
	for _, since := range []time.Time{beforeSends, T0, T0.Add(time.Hour), T0.Add(3 * time.Hour)} {
		list, sent, err := s.AgentNumbersSentSince(a.ID, store.ChannelNameWhatsApp, since)
		if err != nil || !reflect.DeepEqual(list, want) || len(sent) != len(list) {
			t.Fatalf("since %s: %+v %v (%v), want the numbers as AgentNumbers lists them, %+v", since, list, sent, err, want)
		}
		for i, n := range list {
			// nums[j] sent at T0, T0+1h, ... T0+jh.
			j := slices.IndexFunc(nums, func(m store.AgentNumber) bool { return m.ID == n.ID })
			counted := 0
			for k := range j + 1 {
				if !T0.Add(time.Duration(k) * time.Hour).Before(since) {
					counted++
				}
			}
			if one, err := s.AgentSendsSince(a.ID, n.ID, since); err != nil || sent[i] != counted || one != counted {
				t.Fatalf("since %s: %s has %d sends, AgentSendsSince %d (%v), want %d", since, n.Address, sent[i], one, err, counted)
			}
		}
	}
	if list, sent, err := s.AgentNumbersSentSince(b.ID, store.ChannelNameWhatsApp, beforeSends); err != nil || len(list) != 1 || list[0].ID != bx.ID || !slices.Equal(sent, []int{1}) {
		t.Fatalf("company b: %+v %v (%v), want its one number with its one send", list, sent, err)
	}
	if list, sent, err := s.AgentNumbersSentSince(b.ID, store.ChannelNameIMessage, beforeSends); err != nil || len(list) != 0 || len(sent) != 0 {
		t.Fatalf("company b's handles: %+v %v (%v), want none", list, sent, err)
	}
}

// AgentsBudgetBytes is the daily storage budget of the stores the
// AgentsBudget suite opens.
const AgentsBudgetBytes = 4000

// AgentsBudget runs the suite of the agent channels' storage charge; open
// must give a store whose companies may add AgentsBudgetBytes a day.
func AgentsBudget(t *testing.T, open Opener[AgentsStore]) {
	t.Run("Charge", func(t *testing.T) { t.Parallel(); agentsBudget(t, open(t)) })
	t.Run("InboundRefusedTakesNoID", func(t *testing.T) { t.Parallel(); agentInboundRefusedTakesNoID(t, open(t)) })
}

// agentInboundRefusedTakesNoID: an inbound message refused for the day's
// storage budget, or for a file it names that is no upload of its
// device's, takes no message id, as the phone's refused SMS takes none: the
// next one stored follows the last one stored (in a store nothing else
// writes to at the time).
func agentInboundRefusedTakesNoID(t *testing.T, s AgentsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, newFingerprint())
	announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)
	first, _, err := s.StoreAgentInbound(new(inboundTo(d, waX, "c-1")), stoppedAt(T0))
	if err != nil {
		t.Fatal(err)
	}
	over := inboundTo(d, waX, "c-2")
	over.Text = strings.Repeat("x", AgentsBudgetBytes)
	if _, _, err := s.StoreAgentInbound(&over, stoppedAt(T0)); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("an inbound message over the budget: %v, want the budget's refusal", err)
	}
	unknown := inboundTo(d, waX, "c-3")
	unknown.Media = []store.MediaRef{{ID: "med_nope"}}
	if _, _, err := s.StoreAgentInbound(&unknown, stoppedAt(T0)); !errors.Is(err, store.ErrMediaUnknown) {
		t.Fatalf("an inbound message naming no upload: %v, want ErrMediaUnknown", err)
	}
	next, _, err := s.StoreAgentInbound(new(inboundTo(d, waX, "c-4")), stoppedAt(T0))
	if err != nil {
		t.Fatal(err)
	}
	if next.ID != first.ID+1 {
		t.Fatalf("the inbound message after two refused ones has id %d, the one before %d: a refusal took an id", next.ID, first.ID)
	}
}

// agentsBudget: a WhatsApp send and an inbound message are charged to the
// company's daily storage budget; a send over it, refused after the vet
// took its slot, gives the slot back and stores nothing; an inbound message
// over it is refused and stored nowhere; another company, or the next day,
// has a budget of its own.
func agentsBudget(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())
	n := announce(t, s, d, store.ChannelNameWhatsApp, T0, waX)[0]
	bn := announce(t, s, db, store.ChannelNameWhatsApp, T0, waX)[0]
	taken, given := 0, 0
	vet := func(store.AgentNumber, func(time.Time) []time.Time) (func(), error) {
		taken++
		return func() { given++ }, nil
	}
	send := func(n store.AgentNumber, text string, at time.Time) error {
		m := agentSend(n.CompanyID, n, text)
		_, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, stoppedAt(at), vet, nil)
		return err
	}
	if err := send(n, "short text", T0); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", AgentsBudgetBytes)
	var be *store.BudgetError
	if err := send(n, long, T0); !errors.As(err, &be) || !errors.Is(err, store.ErrStorageBudget) || be.CompanyID != a.ID || be.Limit != AgentsBudgetBytes {
		t.Fatalf("a send over the budget: %v, want a *BudgetError of company %d", err, a.ID)
	}
	if taken != 2 || given != 1 {
		t.Fatalf("slots taken %d, given back %d; want 2 and 1", taken, given)
	}
	in := inboundTo(d, waX, "c-1")
	in.Text = long
	if _, _, err := s.StoreAgentInbound(&in, stoppedAt(T0)); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("an inbound message over the budget: %v, want the budget's refusal", err)
	}
	if _, total, _ := s.AgentMessages(a.ID, n.ID, 1, 10); total != 1 {
		t.Fatalf("%d messages stored, want only the short send", total)
	}
	if sent, _ := s.AgentSendsSince(a.ID, n.ID, beforeSends); sent != 1 {
		t.Fatalf("%d accepted sends recorded, want 1", sent)
	}
	if err := send(bn, long[:AgentsBudgetBytes/2], T0); err != nil {
		t.Fatalf("another company's send: %v", err)
	}
	if err := send(n, long[:AgentsBudgetBytes/2], T0.Add(24*time.Hour)); err != nil {
		t.Fatalf("the next day's send: %v", err)
	}
	if _, _, err := s.StoreAgentInbound(new(inboundTo(d, waX, "c-2")), stoppedAt(T0.Add(24*time.Hour))); err != nil {
		t.Fatalf("the next day's inbound message: %v", err)
	}
}

// handOut hands the message to the device, failing the test on an error.
func handOut(t *testing.T, s AgentsStore, d store.Device, m store.Message) bool {
	t.Helper()
	ok, err := s.AgentHandOut(d.CompanyID, d.ID, m.ID)
	if err != nil {
		t.Fatalf("hand %d to device %d: %v", m.ID, d.ID, err)
	}
	return ok
}

// handedTo maps each message read to the registration it was handed to.
func handedTo(ms []store.Message) map[uint64]uint64 {
	out := make(map[uint64]uint64, len(ms))
	for _, m := range ms {
		out[m.ID] = m.HandedTo
	}
	return out
}

// agentHandOut: a send handed to an agent is that agent's until it is
// settled: the number's next agent reads it as handed to the first (and
// cannot take it) while the first exists, the first's reports of it are
// taken though it no longer holds the number, and once the first is
// deleted the next agent takes it. A send never handed goes to the
// number's holder at once; nothing goes to an agent that does not hold the
// number, to a paused number's agent, or once the send was taken.
func agentHandOut(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d1 := Device(t, s, a.ID, newFingerprint())
	d2 := Device(t, s, a.ID, newFingerprint())
	d3 := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())
	// Queued while d2 held the number: the send is d2's (DeviceID), and
	// only its hand-out to d1 lets d1 report it.
	x := announce(t, s, d2, store.ChannelNameWhatsApp, T0, waX)[0]
	taken := enqueueAt(t, s, agentSend(a.ID, x, "taken"), T0)
	lost := enqueueAt(t, s, agentSend(a.ID, x, "lost"), T0.Add(time.Second))
	fresh := enqueueAt(t, s, agentSend(a.ID, x, "fresh"), T0.Add(2*time.Second))
	announce(t, s, d1, store.ChannelNameWhatsApp, T0.Add(time.Minute), waX)
	if handOut(t, s, d2, taken) {
		t.Fatal("a send handed to the number's former agent")
	}
	if handOut(t, s, db, taken) {
		t.Fatal("a send handed to another company's device")
	}
	for _, m := range []store.Message{taken, lost} {
		if !handOut(t, s, d1, m) {
			t.Fatalf("send %d not handed to the number's agent", m.ID)
		}
	}
	if !handOut(t, s, d1, taken) {
		t.Fatal("a send handed again to its agent (a new link of it) refused")
	}
	got, err := s.AgentPending(a.ID, d1.ID, x.ID, 0, 10)
	if want := map[uint64]uint64{taken.ID: d1.ID, lost.ID: d1.ID, fresh.ID: 0}; err != nil || !maps.Equal(handedTo(got), want) {
		t.Fatalf("the agent's queue, handed to: %v (%v), want %v", handedTo(got), err, want)
	}
	// The number moves back to d2: what d1 was handed stays d1's.
	announce(t, s, d2, store.ChannelNameWhatsApp, T0.Add(2*time.Minute), waX)
	got, err = s.AgentPending(a.ID, d2.ID, x.ID, 0, 10)
	if want := map[uint64]uint64{taken.ID: d1.ID, lost.ID: d1.ID, fresh.ID: 0}; err != nil || !maps.Equal(handedTo(got), want) {
		t.Fatalf("the new holder's queue, handed to: %v (%v), want %v", handedTo(got), err, want)
	}
	if handOut(t, s, d2, taken) || handOut(t, s, d2, lost) {
		t.Fatal("a send handed to the former agent, which still exists, handed to the new one")
	}
	if handOut(t, s, d1, fresh) {
		t.Fatal("a send never handed went to the agent that no longer holds its number")
	}
	if !handOut(t, s, d2, fresh) {
		t.Fatal("a send never handed refused to the number's new agent")
	}
	// d1 reports what it took, though it holds the number no more; d3,
	// which was never handed it, cannot, nor can d2, which holds the
	// number now and is the agent the send was queued for (PROTOCOL.md
	// 16.1: a job goes to one agent only, whose reports alone are taken).
	if _, _, err := s.Transition(a.ID, d3.ID, taken.UUID, store.MsgSending, "", "", T0.Add(3*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a report by an agent never handed the send: %v, want ErrNotFound", err)
	}
	for _, st := range []string{store.MsgSending, store.MsgSent, store.MsgFailed} {
		if m, moved, err := s.Transition(a.ID, d2.ID, taken.UUID, st, "generic_failure", "", T0.Add(3*time.Minute)); !errors.Is(err, store.ErrNotFound) || moved {
			t.Fatalf("the number's holder's %s of a send handed to its former agent: %s moved %v (%v), want ErrNotFound", st, m.Status, moved, err)
		}
	}
	for _, st := range []string{store.MsgSending, store.MsgSent} {
		if m, moved, err := s.Transition(a.ID, d1.ID, taken.UUID, st, "", "", T0.Add(3*time.Minute)); err != nil || !moved || m.Status != st {
			t.Fatalf("the former agent's %s of the send it was handed: %s moved %v (%v)", st, m.Status, moved, err)
		}
	}
	if handOut(t, s, d2, taken) {
		t.Fatal("a send taken handed out again")
	}
	// Paused, nothing is handed out: a send queued before the pause (a
	// paused number takes none) waits for the resume.
	held := enqueueAt(t, s, agentSend(a.ID, x, "held"), T0.Add(3*time.Minute+time.Second))
	if _, err := s.UpdateAgentNumber(a.ID, store.ChannelNameWhatsApp, x.PublicID, T0.Add(4*time.Minute), func(n *store.AgentNumber) error { n.Status = store.NumberPaused; return nil }); err != nil {
		t.Fatal(err)
	}
	if handOut(t, s, d2, held) {
		t.Fatal("a paused number's send handed out")
	}
	if _, err := s.UpdateAgentNumber(a.ID, store.ChannelNameWhatsApp, x.PublicID, T0.Add(5*time.Minute), func(n *store.AgentNumber) error { n.Status = store.NumberActive; return nil }); err != nil {
		t.Fatal(err)
	}
	if !handOut(t, s, d2, held) {
		t.Fatal("a send held while its number was paused refused once it is resumed")
	}
	// d1 deleted: what it was handed and did not report is released.
	if _, err := s.DeleteDevice(a.ID, d1.Fingerprint, T0.Add(6*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err = s.AgentPending(a.ID, d2.ID, x.ID, 0, 10)
	if err != nil || handedTo(got)[lost.ID] != 0 || len(got) == 0 || got[0].ID != lost.ID {
		t.Fatalf("after the former agent's deletion: %v (%v), want %d handed to none", handedTo(got), err, lost.ID)
	}
	if !handOut(t, s, d2, lost) {
		t.Fatal("a send of a deleted agent not released to the number's holder")
	}
	if m, err := s.MessageByUUID(a.ID, lost.UUID); err != nil || m.HandedTo != d2.ID || m.Status != store.MsgQueued {
		t.Fatalf("the released send: handed to %d, %s (%v), want %d, queued", m.HandedTo, m.Status, err, d2.ID)
	}
}

// release releases the sends handed to the device that held does not name
// and returns the public ids of their numbers, failing the test on an error.
func release(t *testing.T, s AgentsStore, d store.Device, held ...string) []string {
	t.Helper()
	nums, err := s.AgentRelease(d.CompanyID, d.ID, held)
	if err != nil {
		t.Fatalf("release the sends of device %d: %v", d.ID, err)
	}
	out := make([]string, len(nums))
	for i, n := range nums {
		out[i] = n.PublicID
	}
	slices.Sort(out)
	return out
}

// agentRelease: an agent's word at its hello (the jobs its journal holds)
// releases the queued sends handed to its registration that it does not
// name: each reads as handed to none and goes to its number's holder,
// and the numbers come back, each once, with their holders. A send it
// names stays its own; one settled, one of another registration or
// another company's is not touched.
func agentRelease(t *testing.T, s AgentsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	d1 := Device(t, s, a.ID, newFingerprint())
	d2 := Device(t, s, a.ID, newFingerprint())
	db := Device(t, s, b.ID, newFingerprint())
	nums := announce(t, s, d1, store.ChannelNameWhatsApp, T0, waX, waY)
	x, y := nums[0], nums[1]
	both := []string{x.PublicID, y.PublicID}
	slices.Sort(both)
	bx := announce(t, s, db, store.ChannelNameWhatsApp, T0, waX)[0]
	lost := enqueueAt(t, s, agentSend(a.ID, x, "lost"), T0)
	journaled := enqueueAt(t, s, agentSend(a.ID, x, "journaled"), T0.Add(time.Second))
	acked := enqueueAt(t, s, agentSend(a.ID, x, "acked"), T0.Add(2*time.Second))
	fresh := enqueueAt(t, s, agentSend(a.ID, x, "fresh"), T0.Add(3*time.Second))
	lostY := enqueueAt(t, s, agentSend(a.ID, y, "lost on y"), T0.Add(4*time.Second))
	other := enqueueAt(t, s, agentSend(b.ID, bx, "another company's"), T0)
	for _, m := range []store.Message{lost, journaled, acked, lostY} {
		if !handOut(t, s, d1, m) {
			t.Fatalf("send %d not handed to the number's agent", m.ID)
		}
	}
	if !handOut(t, s, db, other) {
		t.Fatal("another company's send not handed to its agent")
	}
	if _, _, err := s.Transition(a.ID, d1.ID, acked.UUID, store.MsgSending, "", "", T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	announce(t, s, d2, store.ChannelNameWhatsApp, T0.Add(2*time.Minute), waX)
	if handOut(t, s, d2, lost) {
		t.Fatal("a send handed to the former agent handed to the new one before its release")
	}
	// d1 says it holds journaled (and an id that is no send of its).
	got := release(t, s, d1, journaled.UUID, "0199c5b3-1f00-7c2a-9d4e-6a1b2c3d4e5f")
	if !slices.Equal(got, both) {
		t.Fatalf("the numbers released: %v, want %v", got, both)
	}
	pending, err := s.AgentPending(a.ID, d2.ID, x.ID, 0, 10)
	if want := map[uint64]uint64{lost.ID: 0, journaled.ID: d1.ID, fresh.ID: 0}; err != nil || !maps.Equal(handedTo(pending), want) {
		t.Fatalf("the new holder's queue, handed to: %v (%v), want %v", handedTo(pending), err, want)
	}
	if !handOut(t, s, d2, lost) {
		t.Fatal("a released send refused to the number's holder")
	}
	if handOut(t, s, d2, journaled) {
		t.Fatal("a send its former agent holds handed to the new one")
	}
	for _, c := range []struct {
		m    store.Message
		to   uint64
		want string
	}{{lost, d2.ID, store.MsgQueued}, {journaled, d1.ID, store.MsgQueued}, {acked, d1.ID, store.MsgSending}, {lostY, 0, store.MsgQueued}} {
		m, err := s.MessageByUUID(a.ID, c.m.UUID)
		if err != nil || m.HandedTo != c.to || m.Status != c.want {
			t.Fatalf("send %q: handed to %d, %s (%v), want %d, %s", c.m.Text, m.HandedTo, m.Status, err, c.to, c.want)
		}
	}
	// y is still d1's: its released send goes to d1 again.
	if !handOut(t, s, d1, lostY) {
		t.Fatal("a released send refused to its number's holder, the agent that released it")
	}
	if m, err := s.MessageByUUID(b.ID, other.UUID); err != nil || m.HandedTo != db.ID {
		t.Fatalf("another company's send: handed to %d (%v), want %d", m.HandedTo, err, db.ID)
	}
	// What is handed to another registration is not d1's to release;
	// d1's own, named, stays; nothing named: released.
	if got := release(t, s, d1, journaled.UUID, lostY.UUID); len(got) != 0 {
		t.Fatalf("a second release: numbers %v, want none", got)
	}
	if got := release(t, s, d1); !slices.Equal(got, both) {
		t.Fatalf("a release holding nothing: numbers %v, want %v", got, both)
	}
	if m, err := s.MessageByUUID(a.ID, journaled.UUID); err != nil || m.HandedTo != 0 {
		t.Fatalf("the send released at last: handed to %d (%v), want none", m.HandedTo, err)
	}
	if m, err := s.MessageByUUID(a.ID, lost.UUID); err != nil || m.HandedTo != d2.ID {
		t.Fatalf("the send handed to the new holder: handed to %d (%v), want %d", m.HandedTo, err, d2.ID)
	}
}

// agentHandOutMoved: an agent's hand-out of a send and another agent's
// announcement of the number at the same moment (through two handles: two
// nodes of a cluster) never both give the send away: the one that hands
// it out first keeps it, or the new holder gets it.
func agentHandOutMoved(t *testing.T, s1, s2 AgentsStore) {
	a, _ := Company(t, s1)
	d1 := Device(t, s1, a.ID, newFingerprint())
	d2 := Device(t, s1, a.ID, newFingerprint())
	for i := range 20 {
		x := announce(t, s1, d1, store.ChannelNameWhatsApp, T0.Add(time.Duration(i)*time.Minute), waX)[0]
		m := enqueueAt(t, s1, agentSend(a.ID, x, fmt.Sprint(i)), T0.Add(time.Duration(i)*time.Minute))
		var first, second bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			first = noErr(s1.AgentHandOut(a.ID, d1.ID, m.ID))
		}()
		go func() {
			defer wg.Done()
			if _, err := s2.AnnounceNumbers(a.ID, d2.ID, store.ChannelNameWhatsApp, []string{waX}, T0.Add(time.Duration(i)*time.Minute+time.Second), 0); err != nil {
				panic(err)
			}
			second = noErr(s2.AgentHandOut(a.ID, d2.ID, m.ID))
		}()
		wg.Wait()
		if first == second {
			t.Fatalf("round %d: handed to the former agent %v, to the new one %v: want exactly one", i, first, second)
		}
		// Settle it, so the next round's send is the only one queued.
		by := d1
		if second {
			by = d2
		}
		if _, _, err := s1.Transition(a.ID, by.ID, m.UUID, store.MsgSending, "", "", T0.Add(time.Duration(i)*time.Minute+2*time.Second)); err != nil {
			t.Fatalf("round %d: the ack of the agent it was handed to: %v", i, err)
		}
	}
}
