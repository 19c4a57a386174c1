package gateway

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
)

// Two numbers on one link, one with a long gap: the other's jobs go out
// by its own short gap, not when the long one's wait ends. The link armed
// one timer for the earliest wait and kept it while a sooner one came, so
// the short-gap number's second job waited the other's hour. And a gap
// shortened (PATCH gap_seconds) lets the job it held go by the new gap.
func TestAgentGapOfOneNumberHoldsNotAnother(t *testing.T) {
	t.Parallel()
	st := storetest.OpenWith(t, storetest.Options{})
	var agents *channel.Service
	r := newRigHub(t, st, Config{}, time.Now, nil, hubSetup{wire: func(h *Hub, log *slog.Logger) {
		var err error
		agents, err = channel.New(channel.Config{}, st, log, time.Now, rand.NewPCG(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		agents.SetDispatcher(h)
		h.SetAgents(agents)
	}})
	ws, _, err := r.dial(r.pair("gap-agent-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}},
		WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550101111"}, {Phone: "+15550102222"}}})
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", w)
	}
	ctx := context.Background()
	numbers, err := agents.Numbers(ctx, r.company, channel.WhatsApp)
	if err != nil || len(numbers) != 2 {
		t.Fatalf("numbers after the hello: %v, %v; want the two announced", numbers, err)
	}
	slow, fast := numbers[0].PublicID, numbers[1].PublicID // by address: ...1111 first
	gap := func(id string, secs float64) {
		t.Helper()
		if _, err := agents.Update(ctx, r.company, channel.WhatsApp, id, channel.Patch{Gap: &channel.GapPatch{Min: &secs, Max: &secs}}); err != nil {
			t.Fatal(err)
		}
	}
	gap(slow, 3600)
	gap(fast, 0.2)
	send := func(id, text string) {
		t.Helper()
		if _, _, err := agents.Send(ctx, channel.SendInput{CompanyID: r.company, Channel: channel.WhatsApp, NumberID: id,
			To: "+15551234567", Content: text}, nil); err != nil {
			t.Fatal(err)
		}
	}
	job := func(want string) {
		t.Helper()
		if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.Message != want {
			t.Fatalf("got %#v, want the job %q", s, want)
		}
	}
	send(slow, "slow 1")
	job("slow 1")
	send(slow, "slow 2") // held for an hour
	send(fast, "fast 1")
	job("fast 1")
	send(fast, "fast 2") // held for 0.2 s
	job("fast 2")
	// The hour's gap shortened: the job it held goes by the new gap, not
	// after the pause drawn from the old one.
	gap(slow, 0.2)
	job("slow 2")
}
