package channel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// sweepOnce runs the service's periodic work once (Run with its context
// ended: it prunes and sweeps, then returns).
func sweepOnce(svc *channel.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	svc.Run(ctx)
}

// The governor holds a number's state only while it carries something:
// a removed company's numbers go at its removal, and a number idle a day
// and a quarter of an hour (every window empty, its gap long over) at the
// next sweep. A number still at its day cap keeps its state across the
// sweeps before that, and is refused.
func TestGovernorForgetsRemovedAndIdleNumbers(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	wa := channel.Pacing{Caps: pacing.Caps{PerMinute: 10, PerHour: 100, PerDay: 2}, Gap: pacing.Gap{Min: time.Second, Max: time.Second}}
	svc, err := channel.New(channel.Config{WhatsApp: wa, IMessage: wa}, st, slog.New(slog.DiscardHandler), clk.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := conformance.Company(t, st)
	kept, _ := conformance.Company(t, st)
	announce := func(c store.Company, fp string, addrs ...string) (store.Device, []store.AgentNumber) {
		t.Helper()
		d := conformance.Device(t, st, c.ID, fp)
		// Seen a month ago: past the warm-up, its caps are the caps.
		nums, err := st.AnnounceNumbers(c.ID, d.ID, channel.WhatsApp, addrs, clk.Now().AddDate(0, -1, 0), 0)
		if err != nil {
			t.Fatal(err)
		}
		return d, nums
	}
	send := func(c store.Company, n store.AgentNumber) error {
		t.Helper()
		_, _, err := svc.Send(context.Background(), channel.SendInput{CompanyID: c.ID, Channel: channel.WhatsApp, NumberID: n.PublicID,
			To: "+15557654321", Content: "hi"}, func(store.Message) (int, []byte) { return 202, nil })
		return err
	}
	goneDev, goneNums := announce(gone, "fp-gone", "+15550001111", "+15550002222", "+15550003333")
	_, keptNums := announce(kept, "fp-kept", "+15550004444")
	for _, n := range goneNums {
		if err := send(gone, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := svc.Ready(goneDev, goneNums[0].ID); err != nil { // a dispatch: the same number
		t.Fatal(err)
	}
	for range 2 {
		if err := send(kept, keptNums[0]); err != nil {
			t.Fatal(err)
		}
	}
	if n := svc.GovernorNumbers(); n != 4 {
		t.Fatalf("the governor holds %d numbers, want 4", n)
	}

	conformance.RemoveCompany(t, st, gone.ID, 1000)
	svc.ForgetCompany(gone.ID)
	if n := svc.GovernorNumbers(); n != 1 {
		t.Fatalf("after the company's removal the governor holds %d numbers, want 1", n)
	}

	capped := func(when string) {
		t.Helper()
		var pe *problem.Error
		if err := send(kept, keptNums[0]); !errors.As(err, &pe) || pe.Code != problem.NumberCapped {
			t.Fatalf("%s: a third send in the day answered %v, want number_capped", when, err)
		}
	}
	clk.Advance(2 * time.Hour)
	sweepOnce(svc)
	if n := svc.GovernorNumbers(); n != 1 {
		t.Fatalf("two hours on the governor holds %d numbers, want 1: the day window holds the sends", n)
	}
	capped("two hours on")
	clk.Advance(22*time.Hour + 14*time.Minute)
	sweepOnce(svc)
	capped("within the day")

	clk.Advance(2 * time.Minute) // a day and a quarter of an hour after the last send
	sweepOnce(svc)
	if n := svc.GovernorNumbers(); n != 0 {
		t.Fatalf("a day on the governor holds %d numbers, want none", n)
	}
	if err := send(kept, keptNums[0]); err != nil {
		t.Fatalf("a day on: %v", err)
	}
}

// A company whose removal ended elsewhere (another node of a cluster, or
// simrelay admin delete-company beside the running server: nothing tells
// this node) leaves the governor at Run's next look for removed companies,
// not a day later with the idle numbers; another company's numbers stay.
func TestGovernorForgetsCompaniesRemovedElsewhere(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), clk.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	channel.SetRemovedEvery(svc, 10*time.Millisecond)
	gone, _ := conformance.Company(t, st)
	kept, _ := conformance.Company(t, st)
	for i, c := range []store.Company{gone, gone, kept} {
		d := conformance.Device(t, st, c.ID, fmt.Sprintf("fp-elsewhere-%d", i))
		nums, err := st.AnnounceNumbers(c.ID, d.ID, channel.WhatsApp, []string{fmt.Sprintf("+1555000%04d", i)}, clk.Now().AddDate(0, -1, 0), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.Send(context.Background(), channel.SendInput{CompanyID: c.ID, Channel: channel.WhatsApp, NumberID: nums[0].PublicID,
			To: "+15557654321", Content: "hi"}, func(store.Message) (int, []byte) { return 202, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := svc.GovernorNumbers(); n != 3 {
		t.Fatalf("the governor holds %d numbers, want 3", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	conformance.RemoveCompany(t, st, gone.ID, 1000) // as another node or the admin command does
	poll.Until(t, "the removed company's numbers leave the governor, the kept one's stay", func() bool { return svc.GovernorNumbers() == 1 })
}
