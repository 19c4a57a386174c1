package channel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// recordsRead is the channel's store, counting the number records it hands
// back: what the channel's reads decoded.
type recordsRead struct {
	channel.Store
	records atomic.Int64
}

func (s *recordsRead) AgentNumbers(companyID uint64, channel string) ([]store.AgentNumber, error) {
	nums, err := s.Store.AgentNumbers(companyID, channel)
	s.records.Add(int64(len(nums)))
	return nums, err
}

func (s *recordsRead) AgentNumber(companyID uint64, channel, publicID string) (store.AgentNumber, error) {
	s.records.Add(1)
	return s.Store.AgentNumber(companyID, channel, publicID)
}

func (s *recordsRead) AgentNumberByRef(companyID, numberID uint64) (store.AgentNumber, error) {
	s.records.Add(1)
	return s.Store.AgentNumberByRef(companyID, numberID)
}

// fullCompany is a company whose other agent holds n WhatsApp numbers
// (+1555100nnnn), and an agent of it.
type fullCompany struct {
	st    *recordsRead
	svc   *channel.Service
	agent store.Device
}

func newFullCompany(tb testing.TB, n int) fullCompany {
	tb.Helper()
	backend := storetest.Open(tb)
	st := &recordsRead{Store: backend}
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), time.Now, rand.NewPCG(1, 2))
	if err != nil {
		tb.Fatal(err)
	}
	c, _ := conformance.Company(tb, backend)
	other := conformance.Device(tb, backend, c.ID, "fp-other")
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = numberOf(i)
	}
	if _, err := backend.AnnounceNumbers(c.ID, other.ID, channel.WhatsApp, addrs, time.Now(), 0); err != nil {
		tb.Fatal(err)
	}
	return fullCompany{st: st, svc: svc, agent: conformance.Device(tb, backend, c.ID, "fp-agent")}
}

func numberOf(i int) string { return fmt.Sprintf("+1555100%04d", i) }

// helloOf is an agent's hello announcing these WhatsApp numbers.
func helloOf(numbers ...int) proto.Hello {
	var h proto.Hello
	for _, i := range numbers {
		h.WhatsApp = append(h.WhatsApp, proto.WhatsAppNumber{Phone: numberOf(i)})
	}
	return h
}

// An agent's hello that announces numbers its company has already (the
// usual hello: an agent links again) is checked against the company's
// bound of 1,000 without reading the company's numbers: the check looks up
// the announced ones, and counts the company's only when one of them is
// new. It read the company's 1,000 records before, on every agent hello.
// The refusals stay where they were: a hello whose new numbers would take
// the company past its bound, counted with the numbers it already has.
func TestCheckAnnounceReadsTheAnnouncedNumbersOnly(t *testing.T) {
	t.Parallel()
	f := newFullCompany(t, channel.MaxNumbersPerCompany)
	check := func(hello proto.Hello) (int64, error) {
		t.Helper()
		before := f.st.records.Load()
		_, err := f.svc.CheckAnnounce(context.Background(), f.agent, hello)
		return f.st.records.Load() - before, err
	}
	read, err := check(helloOf(0, 10, 200, 500, 999))
	t.Logf("a hello re-announcing 5 of the company's 1,000 numbers: %d number records read", read)
	if err != nil {
		t.Fatalf("re-announcing 5 of the company's numbers: %v", err)
	}
	if read > 5 {
		t.Errorf("a hello re-announcing 5 of the company's 1,000 numbers read %d number records, want at most the 5 it announces", read)
	}
	refused := func(name string, hello proto.Hello) {
		t.Helper()
		_, err := check(hello)
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Field != "whatsapp" || pe.Code != problem.ValidationFailed || pe.Message != "whatsapp would take the company past 1000 WhatsApp numbers, the most it may have." {
			t.Errorf("%s: %v, want the company's bound on whatsapp", name, err)
		}
	}
	refused("a new number beside 4 known ones", helloOf(0, 1, 2, 3, channel.MaxNumbersPerCompany))
	refused("a new number alone", helloOf(channel.MaxNumbersPerCompany+7))
	// iMessage is counted apart: the company has none.
	if _, err := check(proto.Hello{IMessage: []proto.IMessageHandle{{Handle: "ana@example.com"}}}); err != nil {
		t.Errorf("a first iMessage handle: %v", err)
	}
}

// One place left: one new number fits, whatever the known ones beside
// it; two do not.
func TestCheckAnnounceCountsOnlyTheNewNumbers(t *testing.T) {
	t.Parallel()
	f := newFullCompany(t, channel.MaxNumbersPerCompany-1)
	last := channel.MaxNumbersPerCompany - 1
	if _, err := f.svc.CheckAnnounce(context.Background(), f.agent, helloOf(0, 1, 2, 3, last)); err != nil {
		t.Errorf("the last place taken beside 4 known numbers: %v", err)
	}
	if _, err := f.svc.CheckAnnounce(context.Background(), f.agent, helloOf(last, last+1)); err == nil {
		t.Errorf("two new numbers in the last place: taken, want the company's bound")
	}
	checked, err := f.svc.CheckAnnounce(context.Background(), f.agent, helloOf(0, last))
	if err != nil {
		t.Fatalf("the last place: %v", err)
	}
	if _, err := f.svc.Announce(context.Background(), f.agent, checked); err != nil {
		t.Fatalf("announce the last place: %v", err)
	}
	if _, err := f.svc.CheckAnnounce(context.Background(), f.agent, helloOf(0, last)); err != nil {
		t.Errorf("the same hello again, the company full: %v", err)
	}
	if _, err := f.svc.CheckAnnounce(context.Background(), f.agent, helloOf(0, last+1)); err == nil {
		t.Errorf("a new number in a full company: taken, want the company's bound")
	}
}

// BenchmarkCheckAnnounce is the hub's check of an agent's hello that
// announces 5 WhatsApp numbers (SIMRELAY_TEST_STORE=postgres: on
// PostgreSQL): known, 5 its company has among its 1,000; new, 4 it has and
// a new one, among its 999. It reports the number records the check read
// per hello.
func BenchmarkCheckAnnounce(b *testing.B) {
	for _, r := range []struct {
		name    string
		company int
		hello   proto.Hello
	}{
		{"known", channel.MaxNumbersPerCompany, helloOf(0, 10, 200, 500, 999)},
		{"new", channel.MaxNumbersPerCompany - 1, helloOf(0, 10, 200, 500, 999)},
	} {
		b.Run(r.name, func(b *testing.B) {
			f := newFullCompany(b, r.company)
			before := f.st.records.Load()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.svc.CheckAnnounce(context.Background(), f.agent, r.hello); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(f.st.records.Load()-before)/float64(b.N), "records/op")
		})
	}
}
