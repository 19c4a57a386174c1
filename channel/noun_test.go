package channel_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store/conformance"
)

// An inbound to a number or handle the agent never announced names it with
// its article: "a WhatsApp number", "an iMessage handle".
func TestInboundToUnknownNumberNamesItRight(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), time.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := conformance.Company(t, st)
	d := conformance.Device(t, st, c.ID, "fp-agent")
	for _, tc := range []struct{ channel, to, want string }{
		{channel.WhatsApp, "+15550001111", "to is not a WhatsApp number of this company: announce it in hello first."},
		{channel.IMessage, "someone@example.com", "to is not an iMessage handle of this company: announce it in hello first."},
	} {
		_, err := svc.Inbound(context.Background(), d, proto.Inbound{ClientID: "c-" + tc.channel, Channel: tc.channel, To: tc.to, From: "+15557654321", Message: "hi"})
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Field != "to" || pe.Message != tc.want {
			t.Errorf("%s: got %v, want the field to: %q", tc.channel, err, tc.want)
		}
	}
}
