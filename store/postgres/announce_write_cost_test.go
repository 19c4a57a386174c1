package postgres

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// An agent's hello that announces its WhatsApp numbers and iMessage
// handles again (an agent linking again, the usual hello) is one
// transaction (AnnounceAgentNumbers), where it was one a channel
// (AnnounceNumbers twice): fewer statements and round trips, and one
// commit. Logged with -v, for docs/performance.md.
func TestAnnounceBothChannelsCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "announce-write-cost")
	wa, im := []string{"+15550001111", "+15550002222"}, []string{"ana@example.com"}
	sets := []store.Announced{{Channel: store.ChannelNameWhatsApp, Addresses: wa}, {Channel: store.ChannelNameIMessage, Addresses: im}}
	if _, err := s.AnnounceAgentNumbers(c.ID, d.ID, sets, time.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	cost := func(write func() error) (stmts, trips int64) {
		t.Helper()
		n0, t0 := counted.n.Load(), counted.trips.Load()
		if err := write(); err != nil {
			t.Fatal(err)
		}
		return counted.n.Load() - n0, counted.trips.Load() - t0
	}
	ps, pt := cost(func() error {
		if _, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, wa, time.Now(), 1000); err != nil {
			return err
		}
		_, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameIMessage, im, time.Now(), 1000)
		return err
	})
	ws, wt := cost(func() error {
		_, err := s.AnnounceAgentNumbers(c.ID, d.ID, sets, time.Now(), 1000)
		return err
	})
	t.Logf("a hello's numbers and handles announced again: a write a channel %d statements in %d round trips; one write %d in %d", ps, pt, ws, wt)
	if ws >= ps || wt >= pt {
		t.Errorf("one write: %d statements in %d round trips, want fewer than a write a channel's %d in %d", ws, wt, ps, pt)
	}
}

// A hello under the company's limit of numbers that announces the numbers
// its agent holds (the usual hello) reads each channel's numbers once,
// locked, where it read them twice, unlocked to see whether one is new
// (which takes the company's row lock first) and then locked; one that
// announces a new number reads them again after that lock, as before. The
// answers are the numbers as announced either way.
func TestAnnounceReadsEachChannelOnce(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	s := openStore(t, Options{Tracer: sqlTracer(func(sql string) {
		if strings.HasPrefix(sql, announcedRows) {
			reads.Add(1)
		}
	})})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "announce-once")
	wa, im := []string{"+15550001111", "+15550002222"}, []string{"ana@example.com"}
	announce := func(wa, im []string) int64 {
		t.Helper()
		r0 := reads.Load()
		sets := []store.Announced{{Channel: store.ChannelNameWhatsApp, Addresses: wa}, {Channel: store.ChannelNameIMessage, Addresses: im}}
		out, err := s.AnnounceAgentNumbers(c.ID, d.ID, sets, time.Now(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range out {
			if n.DeviceID != d.ID {
				t.Errorf("%s answered held by device %d, want %d", n.Address, n.DeviceID, d.ID)
			}
			got = append(got, n.Address)
		}
		if want := slices.Concat(wa, im); !slices.Equal(got, want) {
			t.Errorf("announced %q, answered %q", want, got)
		}
		return reads.Load() - r0
	}
	fresh := announce(wa, im)
	known := announce(wa, im)
	oneNew := announce(append(slices.Clone(wa), "+15550003333"), im)
	t.Logf("reads of a channel's numbers by a hello of two channels under a limit: all new %d, all known %d, one new %d", fresh, known, oneNew)
	if known != 2 {
		t.Errorf("a hello of known numbers in two channels read the channels' numbers %d times, want once each", known)
	}
	if fresh > 4 || oneNew > 4 {
		t.Errorf("a hello with a new number read the channels' numbers %d (all new) and %d (one new) times, want at most twice each", fresh, oneNew)
	}
}

// BenchmarkAnnounceAgentNumbers is the usual hello's write: two WhatsApp
// numbers and an iMessage handle the agent holds already, announced again
// under the server's limit of numbers.
//
//	SIMRELAY_TEST_STORE=postgres go test -run '^$' -bench BenchmarkAnnounceAgentNumbers -benchtime 3000x ./store/postgres
func BenchmarkAnnounceAgentNumbers(b *testing.B) {
	s, _ := openCounted(b, Options{})
	c, _ := conformance.Company(b, s)
	d := conformance.Device(b, s, c.ID, "announce-bench")
	sets := []store.Announced{{Channel: store.ChannelNameWhatsApp, Addresses: []string{"+15550001111", "+15550002222"}},
		{Channel: store.ChannelNameIMessage, Addresses: []string{"ana@example.com"}}}
	if _, err := s.AnnounceAgentNumbers(c.ID, d.ID, sets, time.Now(), 1000); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.AnnounceAgentNumbers(c.ID, d.ID, sets, time.Now(), 1000); err != nil {
			b.Fatal(err)
		}
	}
}

// A hello under a limit that announces a number new to the company beside
// one its agent holds lets the held number's row go before it waits for
// the company's row lock (back to its savepoint), so a write that holds the
// company's lock and then wants that number (another hello of a new
// number) never waits for it in turn: the company first, then the
// numbers, in every write.
func TestAnnounceLetsTheNumbersGoBeforeTheCompany(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "announce-order")
	held := "+15550001111"
	if _, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{held}, time.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	company, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer company.Rollback(ctx)
	if _, err := company.Exec(ctx, "SELECT 1 FROM companies WHERE id = $1 FOR UPDATE", id(c.ID)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{held, "+15550002222"}, time.Now(), 1000)
		done <- err
	}()
	waitLocksOrEnd(t, s, 1, func() bool { return len(done) > 0 })
	if len(done) > 0 {
		t.Fatalf("the hello of a new number ended without waiting for the company's lock: %v", <-done)
	}
	// The hello waits for the company: the held number is free meanwhile.
	var n int
	if err := company.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM agent_numbers WHERE company_id = $1 AND address = $2 FOR UPDATE NOWAIT) l",
		id(c.ID), held).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the held number's row, locked by the company's holder while the hello waits: %d (%v), want it free", n, err)
	}
	if err := company.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the hello after the company's lock went: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hello still waits 30 s after the company's lock went")
	}
	nums, err := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp)
	if err != nil || len(nums) != 2 {
		t.Fatalf("the company's numbers: %+v (%v), want both", nums, err)
	}
}
