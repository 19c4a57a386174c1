package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// StatsStore is what the analytics and dashboard suite calls: the reads,
// and the writes that feed the counters and the recent activity as the
// service makes them.
type StatsStore interface {
	StatsRegistrationsStore
	Enqueue(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (store.Message, bool, error)
	StoreInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
	ExpireQueued(now time.Time, limit int) ([]store.Message, error)
	Stats(q store.StatsQuery) (store.Stats, error)
	StatsTotals(companyID uint64) (store.Counts, error)
}

// StatsRegistrationsStore is what the suite of the registrations the
// analytics name and the dashboard's devices and events calls.
type StatsRegistrationsStore interface {
	Base
	UpdateDevice(companyID uint64, fingerprint string, fn func(*store.Device) error) (store.Device, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
	StatsDevices(companyID uint64) ([]store.StatsDevice, error)
	DashboardSummary(companyID uint64, from, to time.Time, limit int) (store.Summary, error)
	Generation() (uint64, error)
	Version() (uint64, error)
}

// Stats runs the suite of the message counters, the analytics and the
// dashboard's figures.
func Stats(t *testing.T, open Opener[StatsStore]) {
	t.Run("Counts", func(t *testing.T) { t.Parallel(); statsCounts(t, open(t)) })
	t.Run("Filters", func(t *testing.T) { t.Parallel(); statsFilters(t, open(t)) })
	t.Run("Ranges", func(t *testing.T) { t.Parallel(); statsRanges(t, open(t)) })
	t.Run("Dashboard", func(t *testing.T) { t.Parallel(); statsDashboard(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { t.Parallel(); statsConcurrent(t, open(t)) })
	t.Run("Generation", func(t *testing.T) { t.Parallel(); statsGeneration(t, open(t)) })
}

// StatsRegistrations runs the suite of what the analytics and the
// dashboard read of devices: the registrations the counters name, the
// active devices, the events of pairings and deletions, and the generation
// their writes move.
func StatsRegistrations(t *testing.T, open Opener[StatsRegistrationsStore]) {
	t.Run("Listed", func(t *testing.T) { t.Parallel(); registrationsListed(t, open(t)) })
	t.Run("Summary", func(t *testing.T) { t.Parallel(); registrationsSummary(t, open(t)) })
	t.Run("Generation", func(t *testing.T) { t.Parallel(); registrationsGeneration(t, open(t)) })
}

// mixDay1 is the first day of statsMix, 09:00 UTC; it runs three days.
var mixDay1 = T0.Add(23 * time.Hour)

// statsMixed is what statsMix made: company A (the one asked about) with
// its admin, its phones a1 and a2, a2's registration after a2 was deleted
// (a2again, same fingerprint), and company B with its phone b1.
type statsMixed struct {
	a, b             store.Company
	ua               store.User
	a1, a2, a2again  store.Device
	b1               store.Device
	day1, day2, day3 uint32
}

// statsMix feeds the counters through the write paths, as the service
// does, over three days: sends by a user and by the API key (user 0) that
// go sent, delivered (straight from sending too), failed and expired;
// repeated and backward reports; inbound messages and a repeated one; a
// device deleted with a message queued and one sending, and its handset
// paired again; company B's own traffic beside. The counts each day it
// makes are spelled out in mixWant.
func statsMix(t *testing.T, s StatsStore) statsMixed {
	t.Helper()
	at := mixDay1
	clock := func() time.Time { return at }
	var x statsMixed
	x.a, x.ua = Company(t, s)
	x.b, _ = Company(t, s)
	n := unique()
	fp := func(name string) string { return fmt.Sprintf("stats-%d-%s", n, name) }
	x.a1, x.a2, x.b1 = Device(t, s, x.a.ID, fp("a1")), Device(t, s, x.a.ID, fp("a2")), Device(t, s, x.b.ID, fp("b1"))
	sent := 0
	send := func(c store.Company, d store.Device, userID uint64, segments int) store.Message {
		t.Helper()
		sent++
		m := store.Message{UUID: fmt.Sprintf("stats-%d-%d", n, sent), CompanyID: c.ID, UserID: userID, Device: d.Fingerprint, Channel: "sms",
			Phone: "+15550100001", Text: "secret text", SIMSlot: "SIM1", Segments: segments, ExpiresAt: at.Add(36 * time.Hour)}
		out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, clock, nil, nil)
		if err != nil {
			t.Fatalf("send via %s: %v", d.Fingerprint, err)
		}
		return out
	}
	report := func(m store.Message, statuses ...string) {
		t.Helper()
		for _, st := range statuses {
			if _, _, err := s.Transition(m.CompanyID, m.DeviceID, m.UUID, st, "", "", at); err != nil {
				t.Fatalf("%s %s: %v", m.UUID, st, err)
			}
		}
	}
	inbound := func(c store.Company, d store.Device, clientID string) {
		t.Helper()
		m := store.Message{UUID: fmt.Sprintf("stats-%d-in-%d", n, unique()), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms",
			Phone: "+15550100002", Text: "secret reply", SIMSlot: "SIM1", ClientID: clientID}
		if _, _, err := s.StoreInbound(&m, clock); err != nil {
			t.Fatalf("inbound %s: %v", clientID, err)
		}
	}

	delivered := send(x.a, x.a1, x.ua.ID, 2)
	straight := send(x.a, x.a1, 0, 1)
	failed := send(x.a, x.a2, x.ua.ID, 3)
	expires := send(x.a, x.a2, 0, 1)
	other := send(x.b, x.b1, 0, 1)
	report(delivered, store.MsgSending, store.MsgSent)
	report(straight, store.MsgSending)
	report(failed, store.MsgSending, store.MsgSent)
	inbound(x.a, x.a1, "in-1")
	inbound(x.b, x.b1, "in-b")

	at = mixDay1.Add(24 * time.Hour)
	report(delivered, store.MsgDelivered, store.MsgDelivered, store.MsgSent) // a repeat, then a late report: nothing more
	report(straight, store.MsgDelivered)                                     // sent and delivered at once
	report(failed, store.MsgFailed)                                          // failed after it was sent: sent stays
	report(other, store.MsgSending, store.MsgDelivered)
	inbound(x.a, x.a1, "in-1") // sent again by the phone: counted once
	inbound(x.a, x.a2, "in-2")
	send(x.a, x.a2, x.ua.ID, 1) // left queued
	report(send(x.a, x.a2, 0, 1), store.MsgSending)

	at = mixDay1.Add(48 * time.Hour)
	if got, err := s.ExpireQueued(at, 100); err != nil || len(got) != 1 || got[0].UUID != expires.UUID {
		t.Fatalf("expired %v (%v), want %s", got, err, expires.UUID)
	}
	if _, err := s.DeleteDevice(x.a.ID, x.a2.Fingerprint, at); err != nil { // fails the queued and the sending one
		t.Fatal(err)
	}
	x.a2again = Device(t, s, x.a.ID, x.a2.Fingerprint) // the handset paired again: a new registration
	report(send(x.a, x.a2again, x.ua.ID, 1), store.MsgSending, store.MsgSent, store.MsgDelivered)
	inbound(x.a, x.a2again, "in-3")
	x.day1, x.day2, x.day3 = store.StatsDay(mixDay1), store.StatsDay(mixDay1)+1, store.StatsDay(mixDay1)+2
	return x
}

// countsKey names the counts mixWant gives: by day (0: all three), device
// registration (0: all) and counter user.
type countsKey struct {
	day    int
	device string // "", "a1", "a2", "a2again"
	user   string // "", "ua", "key" (user 0), "none" (store.StatsNoUser)
}

// mixWant is what statsMix counts for company A, each day (1 to 3) by
// device and user; every other answer is a sum of these.
var mixWant = map[countsKey]store.Counts{
	{1, "a1", "ua"}:        {Sent: 1, Segments: 2},
	{1, "a2", "ua"}:        {Sent: 1, Segments: 3},
	{1, "a1", "none"}:      {Received: 1},
	{2, "a1", "ua"}:        {Delivered: 1},
	{2, "a1", "key"}:       {Sent: 1, Segments: 1, Delivered: 1},
	{2, "a2", "ua"}:        {Failed: 1},
	{2, "a2", "none"}:      {Received: 1},
	{3, "a2", "key"}:       {Expired: 1, Failed: 1},
	{3, "a2", "ua"}:        {Failed: 1},
	{3, "a2again", "ua"}:   {Sent: 1, Segments: 1, Delivered: 1},
	{3, "a2again", "none"}: {Received: 1},
}

// mixSum sums mixWant over the keys match takes.
func mixSum(match func(countsKey) bool) store.Counts {
	var c store.Counts
	for k, n := range mixWant {
		if match(k) {
			c.Add(n)
		}
	}
	return c
}

func (x statsMixed) deviceName(id uint64) string {
	switch id {
	case x.a1.ID:
		return "a1"
	case x.a2.ID:
		return "a2"
	case x.a2again.ID:
		return "a2again"
	}
	return fmt.Sprintf("device %d", id)
}

// want is the answer to q over company A's counts of statsMix, as mixWant
// spells them out.
func (x statsMixed) want(q store.StatsQuery) store.Stats {
	out := store.Stats{ByDevice: map[uint64]store.Counts{}}
	if q.CompanyID != x.a.ID || q.To < q.From {
		if q.To >= q.From {
			out.Days = make([]store.Counts, q.To-q.From+1)
		}
		return out
	}
	out.Days = make([]store.Counts, q.To-q.From+1)
	ids := map[string]uint64{"a1": x.a1.ID, "a2": x.a2.ID, "a2again": x.a2again.ID}
	users := map[string]uint64{"ua": x.ua.ID, "key": 0, "none": store.StatsNoUser}
	for k, n := range mixWant {
		day := x.day1 + uint32(k.day-1)
		dev, user := ids[k.device], users[k.user]
		if day < q.From || day > q.To || (q.Devices != nil && !q.Devices[dev]) || (q.Users != nil && !q.Users[user]) {
			continue
		}
		out.Totals.Add(n)
		out.Days[day-q.From].Add(n)
		if !q.NoDevices {
			d := out.ByDevice[dev]
			d.Add(n)
			out.ByDevice[dev] = d
		}
	}
	return out
}

// checkStats asks q and compares the answer with want (RecordsRead, what
// the question cost, is each backend's own).
func checkStats(t *testing.T, s StatsStore, x statsMixed, name string, q store.StatsQuery) {
	t.Helper()
	got, err := s.Stats(q)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	want := x.want(q)
	if got.Totals != want.Totals {
		t.Errorf("%s: totals %+v, want %+v", name, got.Totals, want.Totals)
	}
	if len(got.Days) != len(want.Days) {
		t.Errorf("%s: %d days, want %d", name, len(got.Days), len(want.Days))
	} else {
		for i := range got.Days {
			if got.Days[i] != want.Days[i] {
				t.Errorf("%s: %s %+v, want %+v", name, store.StatsDate(q.From+uint32(i)).Format(time.DateOnly), got.Days[i], want.Days[i])
			}
		}
	}
	if got.ByDevice == nil {
		t.Errorf("%s: ByDevice is nil, want a map", name)
	}
	if !maps.Equal(got.ByDevice, want.ByDevice) {
		t.Errorf("%s: by device %s, want %s", name, x.byName(got.ByDevice), x.byName(want.ByDevice))
	}
}

func (x statsMixed) byName(m map[uint64]store.Counts) string {
	var b strings.Builder
	for id, c := range m {
		fmt.Fprintf(&b, "%s:%+v ", x.deviceName(id), c)
	}
	return b.String()
}

// statsCounts: what a mix of sends, reports, expiries, inbound messages
// and a device's deletion counts, on the day each happened, by device
// registration: the range's totals and series, the all-time totals, and
// nothing of it in the other company's answers.
func statsCounts(t *testing.T, s StatsStore) {
	x := statsMix(t, s)
	all := mixSum(func(countsKey) bool { return true })
	if all != (store.Counts{Sent: 4, Segments: 7, Delivered: 3, Failed: 3, Expired: 1, Received: 3}) {
		t.Fatalf("the fixture's own sums are off: %+v", all)
	}
	checkStats(t, s, x, "the three days", store.StatsQuery{CompanyID: x.a.ID, From: x.day1, To: x.day3})
	checkStats(t, s, x, "a week around them", store.StatsQuery{CompanyID: x.a.ID, From: x.day1 - 2, To: x.day3 + 2})
	checkStats(t, s, x, "the middle day", store.StatsQuery{CompanyID: x.a.ID, From: x.day2, To: x.day2})
	if got, err := s.StatsTotals(x.a.ID); err != nil || got != all {
		t.Errorf("A's all-time totals %+v (%v), want %+v", got, err, all)
	}
	wantB := store.Counts{Sent: 1, Segments: 1, Delivered: 1, Received: 1}
	if got, err := s.StatsTotals(x.b.ID); err != nil || got != wantB {
		t.Errorf("B's all-time totals %+v (%v), want %+v", got, err, wantB)
	}
	b, err := s.Stats(store.StatsQuery{CompanyID: x.b.ID, From: x.day1, To: x.day3})
	if err != nil || b.Totals != wantB || len(b.ByDevice) != 1 || b.ByDevice[x.b1.ID] != wantB {
		t.Errorf("B's answer %+v (%v), want its own %+v on b1 alone", b, err, wantB)
	}
	if got, err := s.StatsTotals(x.b.ID + 1000); err != nil || !got.IsZero() {
		t.Errorf("a company that does not exist: %+v (%v), want zeros", got, err)
	}
}

// statsFilters: a devices filter sums the registrations it names (a
// deleted one too), a users filter the sends of those users (0 is the API
// key's, store.StatsNoUser the inbound messages), both together their
// intersection; an empty filter matches nothing, ids of another company or
// of nothing match nothing, and NoDevices leaves the sums by device out of
// any of these answers.
func statsFilters(t *testing.T, s StatsStore) {
	x := statsMix(t, s)
	q := func(devices, users map[uint64]bool) store.StatsQuery {
		return store.StatsQuery{CompanyID: x.a.ID, From: x.day1, To: x.day3, Devices: devices, Users: users}
	}
	set := func(ids ...uint64) map[uint64]bool {
		m := map[uint64]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	cases := map[string]store.StatsQuery{
		"one device":                 q(set(x.a1.ID), nil),
		"a handset's registrations":  q(set(x.a2.ID, x.a2again.ID), nil),
		"the deleted registration":   q(set(x.a2.ID), nil),
		"another company's device":   q(set(x.b1.ID), nil),
		"an unknown device":          q(set(1<<40), nil),
		"no device":                  q(set(), nil),
		"a device set false":         q(map[uint64]bool{x.a1.ID: false}, nil),
		"the admin":                  q(nil, set(x.ua.ID)),
		"the API key":                q(nil, set(0)),
		"the admin and the API key":  q(nil, set(x.ua.ID, 0)),
		"inbound":                    q(nil, set(store.StatsNoUser)),
		"a user of nothing":          q(nil, set(x.ua.ID+1000)),
		"no user":                    q(nil, set()),
		"the admin on a2":            q(set(x.a2.ID), set(x.ua.ID)),
		"the API key on a1 and a2":   q(set(x.a1.ID, x.a2.ID), set(0)),
		"the admin on an empty set":  q(set(), set(x.ua.ID)),
		"another company's question": {CompanyID: x.b.ID, From: x.day1, To: x.day3, Users: set(x.ua.ID), Devices: set(x.a1.ID)},
	}
	for name, query := range cases {
		checkStats(t, s, x, name, query)
		query.NoDevices = true
		checkStats(t, s, x, name+", no devices", query)
	}
	checkStats(t, s, x, "no filter, no devices", store.StatsQuery{CompanyID: x.a.ID, From: x.day1, To: x.day3, NoDevices: true})
	// Spelled out once, beside the sums: the admin's sends on the three days.
	if got := x.want(q(nil, set(x.ua.ID))).Totals; got != (store.Counts{Sent: 3, Segments: 6, Delivered: 2, Failed: 2}) {
		t.Fatalf("the fixture's own sums are off: the admin's %+v", got)
	}
}

// statsRanges: a range holds a counter per day, empty days included; one
// that ends before it starts is empty; one longer than store.MaxStatsDays
// is refused.
func statsRanges(t *testing.T, s StatsStore) {
	x := statsMix(t, s)
	checkStats(t, s, x, "days before any", store.StatsQuery{CompanyID: x.a.ID, From: x.day1 - 30, To: x.day1 - 1})
	checkStats(t, s, x, "the last day and after", store.StatsQuery{CompanyID: x.a.ID, From: x.day3, To: x.day3 + 365})
	got, err := s.Stats(store.StatsQuery{CompanyID: x.a.ID, From: x.day3, To: x.day1})
	if err != nil || len(got.Days) != 0 || !got.Totals.IsZero() || len(got.ByDevice) != 0 {
		t.Errorf("a range that ends before it starts: %+v (%v), want an empty answer", got, err)
	}
	long := store.StatsQuery{CompanyID: x.a.ID, From: x.day3 - store.MaxStatsDays + 1, To: x.day3}
	if got, err := s.Stats(long); err != nil || len(got.Days) != store.MaxStatsDays || got.Totals != mixSum(func(countsKey) bool { return true }) {
		t.Errorf("the longest range: %d days, totals %+v (%v)", len(got.Days), got.Totals, err)
	}
	long.From--
	if _, err := s.Stats(long); err == nil {
		t.Errorf("a range of %d days: answered, want an error", store.MaxStatsDays+1)
	}
}

// statsDashboard: the dashboard's figures of counts and messages: the
// all-time totals, the segments sent on the days from from's day up to,
// not including, to's day, and the events of messages among the company's
// newest, newest first, at most limit, none of another company's and none
// telling a message's text or whole number.
func statsDashboard(t *testing.T, s StatsStore) {
	x := statsMix(t, s)
	all := mixSum(func(countsKey) bool { return true })
	sum, err := s.DashboardSummary(x.a.ID, mixDay1, mixDay1.Add(72*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Totals != all || sum.PeriodSegments != all.Segments {
		t.Errorf("A's summary: totals %+v, %d period segments; want %+v, %d", sum.Totals, sum.PeriodSegments, all, all.Segments)
	}
	// The last events, newest first: a2again's inbound message, its send
	// delivered and sent, its pairing; before them, a2's deletion, the
	// failures it made and the expiry.
	wantTypes := []string{store.ActMessageReceived, store.ActMessageDelivered, store.ActMessageSent, store.ActDevicePaired}
	if len(sum.Recent) != 10 {
		t.Fatalf("A's recent activity: %d events, want 10: %+v", len(sum.Recent), sum.Recent)
	}
	types := map[string]bool{}
	for i, a := range sum.Recent {
		if i < len(wantTypes) && a.Type != wantTypes[i] {
			t.Errorf("event %d: %s, want %s (%+v)", i, a.Type, wantTypes[i], sum.Recent)
		}
		if strings.Contains(a.Description, "secret") || strings.Contains(a.Description, "0100001") || strings.Contains(a.Description, "0100002") || a.Description == "" {
			t.Errorf("event %d: %q, want a description without the text or the whole number", i, a.Description)
		}
		if a.At.Location() != time.UTC {
			t.Errorf("event %d at %v, want UTC", i, a.At)
		}
		types[a.Type] = true
	}
	if newest, want := sum.Recent[0], (store.Activity{Type: store.ActMessageReceived, At: mixDay1.Add(48 * time.Hour),
		Description: "SMS from +1555… received on " + x.a2again.Name}); !sameActivity(newest, want) {
		t.Errorf("the newest event %+v, want %+v", newest, want)
	}
	if sent, want := sum.Recent[2], (store.Activity{Type: store.ActMessageSent, At: mixDay1.Add(48 * time.Hour),
		Description: "SMS to +1555… sent via " + x.a2again.Name}); !sameActivity(sent, want) {
		t.Errorf("the send's event %+v, want %+v", sent, want)
	}
	for _, want := range []string{store.ActDeviceDeleted, store.ActMessageFailed, store.ActMessageExpired} {
		if !types[want] {
			t.Errorf("the newest 10 events lack %s: %+v", want, sum.Recent)
		}
	}
	if short, err := s.DashboardSummary(x.a.ID, mixDay1, mixDay1, 3); err != nil || len(short.Recent) != 3 || !sameActivity(short.Recent[2], sum.Recent[2]) || short.PeriodSegments != 0 {
		t.Errorf("three events, an empty period: %+v (%v)", short, err)
	}
	if none, err := s.DashboardSummary(x.a.ID, mixDay1, mixDay1, 0); err != nil || len(none.Recent) != 0 || none.Totals != all {
		t.Errorf("no events: %+v (%v), want the totals alone", none, err)
	}

	// The period counts whole UTC days: from's day from its start, to's
	// day not at all.
	for _, p := range []struct {
		name     string
		from, to time.Time
		want     uint64
	}{
		{"the first day, from its evening", mixDay1.Add(12 * time.Hour), mixDay1.Add(15 * time.Hour), 5},
		{"the first two days", mixDay1, mixDay1.Add(24 * time.Hour).Truncate(24 * time.Hour).Add(24 * time.Hour), 6},
		{"the last day up to its end", mixDay1.Add(48 * time.Hour), mixDay1.Add(48 * time.Hour).Truncate(24 * time.Hour).Add(24 * time.Hour), 1},
		{"before any", mixDay1.AddDate(0, -1, 0), mixDay1.Truncate(24 * time.Hour), 0},
		{"a period that ends before it starts", mixDay1.Add(48 * time.Hour), mixDay1, 0},
	} {
		got, err := s.DashboardSummary(x.a.ID, p.from, p.to, 1)
		if err != nil || got.PeriodSegments != p.want {
			t.Errorf("%s: %d segments (%v), want %d", p.name, got.PeriodSegments, err, p.want)
		}
	}

	b, err := s.DashboardSummary(x.b.ID, mixDay1, mixDay1.Add(72*time.Hour), 50)
	wantB := store.Counts{Sent: 1, Segments: 1, Delivered: 1, Received: 1}
	if err != nil || b.Totals != wantB || b.PeriodSegments != 1 {
		t.Errorf("B's summary %+v (%v), want its own counts", b, err)
	}
	// B's pairing, its inbound message, its send delivered (sent at once).
	if len(b.Recent) != 3 || b.Recent[0].Type != store.ActMessageDelivered || b.Recent[2].Type != store.ActDevicePaired {
		t.Errorf("B's recent activity %+v, want its delivery, its inbound message and its pairing", b.Recent)
	}
}

func sameActivity(a, b store.Activity) bool {
	return a.Type == b.Type && a.At.Equal(b.At) && a.Description == b.Description
}

// statsConcurrent: sends, reports and inbound messages of one company made
// at once from many goroutines are each counted exactly once, and its
// recent activity keeps the newest store.ActivityKeep events.
func statsConcurrent(t *testing.T, s StatsStore) {
	c, u := Company(t, s)
	n := unique()
	phones := []store.Device{Device(t, s, c.ID, fmt.Sprintf("stats-c-%d-1", n)), Device(t, s, c.ID, fmt.Sprintf("stats-c-%d-2", n))}
	spare := Device(t, s, c.ID, fmt.Sprintf("stats-c-%d-3", n))
	const workers, sends, inbound = 8, 6, 3
	at := T0.Add(time.Hour)
	clock := func() time.Time { return at }
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			d := phones[w%len(phones)]
			for i := range sends {
				m := store.Message{UUID: fmt.Sprintf("stats-c-%d-%d-%d", n, w, i), CompanyID: c.ID, UserID: u.ID, Device: d.Fingerprint, Channel: "sms",
					Phone: "+15550100001", Text: "hi", SIMSlot: "SIM1", Segments: 2, ExpiresAt: at.Add(time.Hour)}
				out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, clock, nil, nil)
				if err != nil {
					errs <- err
					return
				}
				for _, st := range []string{store.MsgSending, store.MsgDelivered} {
					if _, _, err := s.Transition(c.ID, out.DeviceID, out.UUID, st, "", "", at); err != nil {
						errs <- err
						return
					}
				}
			}
			for i := range inbound {
				m := store.Message{UUID: fmt.Sprintf("stats-c-%d-in-%d-%d", n, w, i), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms",
					Phone: "+15550100002", Text: "hi", SIMSlot: "SIM1", ClientID: fmt.Sprintf("in-%d-%d", w, i)}
				if _, _, err := s.StoreInbound(&m, clock); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := store.Counts{Sent: workers * sends, Segments: 2 * workers * sends, Delivered: workers * sends, Received: workers * inbound}
	if got, err := s.StatsTotals(c.ID); err != nil || got != want {
		t.Errorf("all-time totals %+v (%v), want %+v", got, err, want)
	}
	day := store.StatsDay(at)
	st, err := s.Stats(store.StatsQuery{CompanyID: c.ID, From: day, To: day})
	if err != nil || st.Totals != want || len(st.Days) != 1 || st.Days[0] != want {
		t.Errorf("the day's answer %+v (%v), want %+v", st, err, want)
	}
	half := store.Counts{Sent: want.Sent / 2, Segments: want.Segments / 2, Delivered: want.Delivered / 2, Received: want.Received / 2}
	if len(st.ByDevice) != 2 || st.ByDevice[phones[0].ID] != half || st.ByDevice[phones[1].ID] != half {
		t.Errorf("by device %+v, want %+v on each phone", st.ByDevice, half)
	}
	if _, err := s.DeleteDevice(c.ID, spare.Fingerprint, at); err != nil {
		t.Fatal(err)
	}
	sum, err := s.DashboardSummary(c.ID, at, at.Add(24*time.Hour), 2*store.ActivityKeep)
	if err != nil || len(sum.Recent) != store.ActivityKeep || sum.Recent[0].Type != store.ActDeviceDeleted || sum.PeriodSegments != want.Segments {
		t.Fatalf("summary: %d events, the newest %+v, %d period segments (%v); want %d, the deletion, and %d",
			len(sum.Recent), sum.Recent[:min(len(sum.Recent), 1)], sum.PeriodSegments, err, store.ActivityKeep, want.Segments)
	}
}

// statsGeneration: the generation the API keeps analytics answers by rises
// with every write that counts (a report, an inbound message), and never
// goes back.
func statsGeneration(t *testing.T, s StatsStore) {
	c, _ := Company(t, s)
	fp := fmt.Sprintf("stats-g-%d", unique())
	d := Device(t, s, c.ID, fp)
	m := store.Message{UUID: fmt.Sprintf("stats-g-%d", unique()), CompanyID: c.ID, Device: fp, Channel: "sms", Phone: "+15550100001", Text: "hi", SIMSlot: "SIM1", Segments: 1}
	out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return T0 }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := generation(t, s, 0)
	if _, _, err := s.Transition(c.ID, d.ID, out.UUID, store.MsgDelivered, "", "", T0); err != nil {
		t.Fatal(err)
	}
	last = generation(t, s, last+1)
	for range 3 { // reads only
		if _, err := s.Stats(store.StatsQuery{CompanyID: c.ID, From: store.StatsDay(T0), To: store.StatsDay(T0)}); err != nil {
			t.Fatal(err)
		}
		last = generation(t, s, last)
	}
	in := store.Message{UUID: fmt.Sprintf("stats-g-in-%d", unique()), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100002", Text: "hi", SIMSlot: "SIM1", ClientID: "g-1"}
	if _, _, err := s.StoreInbound(&in, func() time.Time { return T0 }); err != nil {
		t.Fatal(err)
	}
	generation(t, s, last+1)
}

// generation reads the store's generation and fails unless it is at least
// atLeast.
func generation(t *testing.T, s interface{ Generation() (uint64, error) }, atLeast uint64) uint64 {
	t.Helper()
	g, err := s.Generation()
	if err != nil || g < atLeast {
		t.Fatalf("generation %d (%v), want at least %d", g, err, atLeast)
	}
	return g
}

// registrationsListed: the registrations the analytics name, in id order,
// each with its fingerprint and the name it had when last written: a
// device renamed, one deleted after a rename (not live, its name kept),
// its handset's registration after it (live), one paired and never used;
// never another company's.
func registrationsListed(t *testing.T, s StatsRegistrationsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	n := unique()
	fp := func(name string) string { return fmt.Sprintf("reg-%d-%s", n, name) }
	a1, a2 := Device(t, s, a.ID, fp("a1")), Device(t, s, a.ID, fp("a2"))
	b1 := Device(t, s, b.ID, fp("b1"))
	rename := func(fp, name string) {
		t.Helper()
		if _, err := s.UpdateDevice(a.ID, fp, func(d *store.Device) error { d.Name = name; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	rename(a1.Fingerprint, "Front desk")
	rename(a2.Fingerprint, "Back office")
	if _, err := s.DeleteDevice(a.ID, a2.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	a2again := Device(t, s, a.ID, a2.Fingerprint)
	idle := Device(t, s, a.ID, fp("idle"))
	got, err := s.StatsDevices(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.StatsDevice{
		{ID: a1.ID, Fingerprint: a1.Fingerprint, Name: "Front desk", Live: true},
		{ID: a2.ID, Fingerprint: a2.Fingerprint, Name: "Back office", Live: false},
		{ID: a2again.ID, Fingerprint: a2.Fingerprint, Name: a2again.Name, Live: true},
		{ID: idle.ID, Fingerprint: idle.Fingerprint, Name: idle.Name, Live: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("A's devices:\n got %+v\nwant %+v", got, want)
	}
	if got, err := s.StatsDevices(b.ID); err != nil || len(got) != 1 || got[0] != (store.StatsDevice{ID: b1.ID, Fingerprint: b1.Fingerprint, Name: b1.Name, Live: true}) {
		t.Errorf("B's devices: %+v (%v), want b1 alone", got, err)
	}
	if got, err := s.StatsDevices(b.ID + 1000); err != nil || len(got) != 0 {
		t.Errorf("a company that does not exist: %+v (%v), want none", got, err)
	}
}

// registrationsSummary: the dashboard counts the company's live devices
// that are not disabled (a device disabled, then enabled again, counts
// again), and lists its pairings and deletions, newest first, at most
// limit; a new company has nothing counted, another company sees none of
// it.
func registrationsSummary(t *testing.T, s StatsRegistrationsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	n := unique()
	fp := func(name string) string { return fmt.Sprintf("sum-%d-%s", n, name) }
	Device(t, s, a.ID, fp("a1"))
	off, gone := Device(t, s, a.ID, fp("off")), Device(t, s, a.ID, fp("gone"))
	b1 := Device(t, s, b.ID, fp("b1"))
	status := func(st string) {
		t.Helper()
		if _, err := s.UpdateDevice(a.ID, off.Fingerprint, func(d *store.Device) error { d.Status = st; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	status(store.DeviceDisabled)
	deletedAt := T0.Add(time.Hour)
	if _, err := s.DeleteDevice(a.ID, gone.Fingerprint, deletedAt); err != nil {
		t.Fatal(err)
	}
	from, to := T0.AddDate(0, 0, -1), T0.AddDate(0, 0, 1)
	sum, err := s.DashboardSummary(a.ID, from, to, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Activity{
		{Type: store.ActDeviceDeleted, At: deletedAt, Description: "Device " + gone.Name + " deleted; its unfinished SMS failed"},
		{Type: store.ActDevicePaired, At: T0, Description: "Device " + gone.Name + " paired"},
		{Type: store.ActDevicePaired, At: T0, Description: "Device " + off.Name + " paired"},
	}
	if sum.ActiveDevices != 1 || !sum.Totals.IsZero() || sum.PeriodSegments != 0 || !slices.EqualFunc(sum.Recent, want, sameActivity) {
		t.Errorf("A's summary %+v, want 1 active device (a1), nothing counted, and the events %+v", sum, want)
	}
	status(store.DeviceActive)
	if sum, err := s.DashboardSummary(a.ID, from, to, 10); err != nil || sum.ActiveDevices != 2 || len(sum.Recent) != 4 {
		t.Errorf("with the device enabled again: %d active, %d events (%v), want 2 and 4", sum.ActiveDevices, len(sum.Recent), err)
	}
	if sum, err := s.DashboardSummary(a.ID, from, to, 0); err != nil || len(sum.Recent) != 0 {
		t.Errorf("no events asked for: %+v (%v)", sum.Recent, err)
	}
	bs, err := s.DashboardSummary(b.ID, from, to, 10)
	if wantB := (store.Activity{Type: store.ActDevicePaired, At: T0, Description: "Device " + b1.Name + " paired"}); err != nil || bs.ActiveDevices != 1 || len(bs.Recent) != 1 || !sameActivity(bs.Recent[0], wantB) {
		t.Errorf("B's summary %+v (%v), want its own phone and pairing", bs, err)
	}
	if none, err := s.DashboardSummary(b.ID+1000, from, to, 10); err != nil || !none.Totals.IsZero() || none.ActiveDevices != 0 || len(none.Recent) != 0 {
		t.Errorf("a company that does not exist: %+v (%v), want nothing", none, err)
	}
}

// registrationsGeneration: the generation rises with every write that can
// change what the analytics name (a user added with a company, a device
// paired, renamed or deleted), and never goes back; the schema version is
// set and stays.
func registrationsGeneration(t *testing.T, s StatsRegistrationsStore) {
	last := generation(t, s, 0)
	c, _ := Company(t, s)
	last = generation(t, s, last+1)
	fp := fmt.Sprintf("reg-g-%d", unique())
	Device(t, s, c.ID, fp)
	last = generation(t, s, last+1)
	for range 3 { // reads only
		if _, err := s.StatsDevices(c.ID); err != nil {
			t.Fatal(err)
		}
		last = generation(t, s, last)
	}
	if _, err := s.UpdateDevice(c.ID, fp, func(d *store.Device) error { d.Name = "Renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	last = generation(t, s, last+1)
	if _, err := s.DeleteDevice(c.ID, fp, T0); err != nil {
		t.Fatal(err)
	}
	generation(t, s, last+1)

	v, err := s.Version()
	if err != nil || v == 0 {
		t.Fatalf("schema version %d (%v), want one", v, err)
	}
	if again, err := s.Version(); err != nil || again != v {
		t.Fatalf("schema version %d (%v) asked again, first %d", again, err, v)
	}
}
