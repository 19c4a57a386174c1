package channel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// readsCounted is the channel's store, counting the reads a list of
// numbers makes: the numbers' records and their sends counted.
type readsCounted struct {
	channel.Store
	reads atomic.Int64
}

func (s *readsCounted) AgentNumbers(companyID uint64, channel string) ([]store.AgentNumber, error) {
	s.reads.Add(1)
	return s.Store.AgentNumbers(companyID, channel)
}

func (s *readsCounted) AgentNumbersSentSince(companyID uint64, channel string, since time.Time) ([]store.AgentNumber, []int, error) {
	s.reads.Add(1)
	return s.Store.AgentNumbersSentSince(companyID, channel, since)
}

func (s *readsCounted) AgentSendsSince(companyID, numberID uint64, since time.Time) (int, error) {
	s.reads.Add(1)
	return s.Store.AgentSendsSince(companyID, numberID, since)
}

// listClock is the clock of the list tests: mid-morning, so that a day's
// sends (since midnight UTC) and yesterday's are both there to count.
var listClock = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// listCompany is a company with n WhatsApp numbers on one agent and n/4
// iMessage handles on another, a month old or new (in their warm-up), some
// paused or with caps and a gap of their own, and sends through them
// yesterday and today; another company has the same addresses, with sends
// of its own. today[address] is each WhatsApp number's sends since
// midnight.
type listCompany struct {
	backend store.Backend
	st      *readsCounted
	svc     *channel.Service
	company uint64
	today   map[string]int
}

func newListCompany(tb testing.TB, n int) listCompany {
	tb.Helper()
	backend := storetest.Open(tb)
	st := &readsCounted{Store: backend}
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), func() time.Time { return listClock }, rand.NewPCG(1, 2))
	if err != nil {
		tb.Fatal(err)
	}
	l := listCompany{backend: backend, st: st, svc: svc, today: map[string]int{}}
	midnight := listClock.Truncate(24 * time.Hour)
	for co := range 2 {
		c, _ := conformance.Company(tb, backend)
		wa := conformance.Device(tb, backend, c.ID, fmt.Sprintf("list-wa-%d", co))
		im := conformance.Device(tb, backend, c.ID, fmt.Sprintf("list-im-%d", co))
		var old, fresh, handles []string
		for i := range n {
			if i%2 == 0 {
				old = append(old, numberOf(i))
			} else {
				fresh = append(fresh, numberOf(i))
			}
			if i%4 == 0 {
				handles = append(handles, fmt.Sprintf("h%04d@example.com", i))
			}
		}
		var nums []store.AgentNumber
		for _, a := range []struct {
			dev   store.Device
			ch    string
			addrs []string
			at    time.Time
		}{
			{wa, channel.WhatsApp, old, listClock.AddDate(0, -1, 0)},
			{wa, channel.WhatsApp, fresh, listClock.Add(-time.Hour)},
			{im, channel.IMessage, handles, listClock.AddDate(0, -1, 0)},
		} {
			got, err := backend.AnnounceNumbers(c.ID, a.dev.ID, a.ch, a.addrs, a.at, 0)
			if err != nil || len(got) != len(a.addrs) {
				tb.Fatalf("announce %d on %s: %d (%v)", len(a.addrs), a.ch, len(got), err)
			}
			nums = append(nums, got...)
		}
		for i, num := range nums {
			// i%3 sends yesterday, i%4 today, the first at midnight
			// (counted: since midnight includes it); the other company
			// sends one more each day through its own.
			sends := []time.Time{}
			for k := range i%3 + co {
				sends = append(sends, midnight.Add(-time.Duration(k+1)*time.Minute))
			}
			for k := range i%4 + co {
				sends = append(sends, midnight.Add(time.Duration(k)*time.Hour))
			}
			for k, at := range sends {
				m := store.Message{UUID: fmt.Sprintf("list-%d-%d-%d", co, i, k), CompanyID: c.ID, Channel: num.Channel, NumberRef: num.PublicID,
					Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
				if _, _, err := backend.EnqueueAgent(&m, store.IdempotencyKey{}, func() time.Time { return at }, noVet, nil); err != nil {
					tb.Fatalf("send through %s at %s: %v", num.Address, at, err)
				}
			}
			// Paused after its sends.
			if i%7 == 3 {
				if _, err := backend.UpdateAgentNumber(c.ID, num.Channel, num.PublicID, listClock, func(n *store.AgentNumber) error {
					n.Status = store.NumberPaused
					n.Caps.PerDay = 40 + i%9
					n.GapMin, n.GapMax = time.Second, 3*time.Second
					return nil
				}); err != nil {
					tb.Fatal(err)
				}
			}
			if co == 0 {
				l.company = c.ID
				l.today[num.Channel+" "+num.Address] = i % 4
			}
		}
	}
	return l
}

func noVet(store.AgentNumber, func(time.Time) []time.Time) (func(), error) { return func() {}, nil }

// The list of a company's numbers (GET /whatsapp/numbers, /imessage/handles
// and the console's page) is what each number's own view is, field for
// field and byte for byte: its caps in force, warm-up, gap and the day's
// sends, counted since midnight UTC and of its own company only.
func TestNumbersListIsEachNumbersView(t *testing.T) {
	t.Parallel()
	l := newListCompany(t, 120)
	ctx := context.Background()
	for _, ch := range []string{channel.WhatsApp, channel.IMessage} {
		list, err := l.svc.Numbers(ctx, l.company, ch)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := l.backend.AgentNumbers(l.company, ch)
		if err != nil || len(recs) != len(list) {
			t.Fatalf("%s: %d records (%v), the list %d", ch, len(recs), err, len(list))
		}
		want := make([]channel.Number, 0, len(recs))
		for _, r := range recs {
			v, err := l.svc.Number(ctx, l.company, ch, r.PublicID)
			if err != nil {
				t.Fatal(err)
			}
			if v.SentToday != l.today[ch+" "+r.Address] {
				t.Fatalf("%s %s: %d sent today, want %d", ch, r.Address, v.SentToday, l.today[ch+" "+r.Address])
			}
			want = append(want, v)
		}
		got, _ := json.Marshal(list)
		exp, _ := json.Marshal(want)
		if !bytes.Equal(got, exp) {
			t.Fatalf("%s: the list of %d is not each number's view:\n got %s\nwant %s", ch, len(list), got, exp)
		}
	}
}

// A list of the company's 1,000 numbers reads the store once: the numbers
// and the day's sends of each, not one read of the sends a number.
func TestNumbersListReadsOnce(t *testing.T) {
	t.Parallel()
	f := newFullCompany(t, channel.MaxNumbersPerCompany)
	st := &readsCounted{Store: f.st}
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), time.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	list, err := svc.Numbers(context.Background(), f.agent.CompanyID, channel.WhatsApp)
	if err != nil || len(list) != channel.MaxNumbersPerCompany {
		t.Fatalf("the list: %d numbers (%v), want %d", len(list), err, channel.MaxNumbersPerCompany)
	}
	t.Logf("a list of %d numbers: %d store reads", len(list), st.reads.Load())
	if n := st.reads.Load(); n != 1 {
		t.Errorf("a list of %d numbers made %d store reads, want 1", len(list), n)
	}
}

// BenchmarkNumbersList is the list of a company's 1,000 WhatsApp numbers
// (SIMRELAY_TEST_STORE=postgres: on PostgreSQL), 200 of them with a send
// today; it reports the store reads per list.
func BenchmarkNumbersList(b *testing.B) {
	f := newFullCompany(b, channel.MaxNumbersPerCompany)
	st := &readsCounted{Store: f.st}
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), time.Now, rand.NewPCG(1, 2))
	if err != nil {
		b.Fatal(err)
	}
	nums, err := st.AgentNumbers(f.agent.CompanyID, channel.WhatsApp)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(nums); i += 5 {
		m := store.Message{UUID: fmt.Sprintf("bench-list-%d", i), CompanyID: f.agent.CompanyID, Channel: channel.WhatsApp, NumberRef: nums[i].PublicID,
			Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
		if _, _, err := st.EnqueueAgent(&m, store.IdempotencyKey{}, time.Now, noVet, nil); err != nil {
			b.Fatal(err)
		}
	}
	before := st.reads.Load()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Numbers(context.Background(), f.agent.CompanyID, channel.WhatsApp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.reads.Load()-before)/float64(b.N), "reads/op")
}
