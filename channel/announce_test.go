package channel_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/conformance"
)

// A hello that names one number twice, in one spelling or two, announces
// it once: the link carries each number's jobs once. Listed twice, the
// number's queue was read twice on every pass, and a job handed to the
// agent and not acked yet was handed to it again once its gap ended,
// taking the place of the number's next job.
func TestAnnounceNamesEachNumberOnce(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), time.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := conformance.Company(t, st)
	d := conformance.Device(t, st, c.ID, "fp-agent")
	hello := proto.Hello{
		WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}, {Phone: "+1 555 000 1111"}, {Phone: "+15550002222"}},
		IMessage: []proto.IMessageHandle{{Handle: "Ana@Example.com"}, {Handle: "ana@example.com"}},
	}
	for range 2 { // a new number, then one the device holds
		checked, err := svc.CheckAnnounce(context.Background(), d, hello)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := svc.Announce(context.Background(), d, checked)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 3 || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
			t.Fatalf("Announce = %v, want three numbers, each once", ids)
		}
	}
}
