package channel_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// lastHandleCompany is a company whose other agent holds all its iMessage
// handles but one (MaxNumbersPerCompany), and two agents of it whose
// hellos each announce a new WhatsApp number and a new handle: both pass
// CheckAnnounce, and only one of them fits.
type lastHandleCompany struct {
	st    store.Backend
	svc   *channel.Service
	c     store.Company
	a, b  store.Device
	hello map[uint64]proto.Hello
}

func newLastHandleCompany(t *testing.T) lastHandleCompany {
	t.Helper()
	st := storetest.Open(t)
	svc, err := channel.New(channel.Config{}, st, slog.New(slog.DiscardHandler), time.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := conformance.Company(t, st)
	other := conformance.Device(t, st, c.ID, "fp-other")
	handles := make([]string, channel.MaxNumbersPerCompany-1)
	for i := range handles {
		handles[i] = fmt.Sprintf("h%04d@example.com", i)
	}
	if _, err := st.AnnounceNumbers(c.ID, other.ID, channel.IMessage, handles, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	f := lastHandleCompany{st: st, svc: svc, c: c, a: conformance.Device(t, st, c.ID, "fp-a"), b: conformance.Device(t, st, c.ID, "fp-b")}
	f.hello = map[uint64]proto.Hello{
		f.a.ID: {WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}}, IMessage: []proto.IMessageHandle{{Handle: "a@example.com"}}},
		f.b.ID: {WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550002222"}}, IMessage: []proto.IMessageHandle{{Handle: "b@example.com"}}},
	}
	return f
}

func (f lastHandleCompany) check(t *testing.T, d store.Device) channel.CheckedAnnounce {
	t.Helper()
	checked, err := f.svc.CheckAnnounce(context.Background(), d, f.hello[d.ID])
	if err != nil {
		t.Fatalf("%s: the check refused a hello with room for it: %v", d.Fingerprint, err)
	}
	return checked
}

// held is what the device holds of each channel, as stored.
func (f lastHandleCompany) held(t *testing.T, d store.Device) (whatsApp, iMessage int) {
	t.Helper()
	for _, ch := range []string{channel.WhatsApp, channel.IMessage} {
		nums, err := f.st.AgentNumbers(f.c.ID, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nums {
			if n.DeviceID != d.ID {
				continue
			}
			if ch == channel.WhatsApp {
				whatsApp++
			} else {
				iMessage++
			}
		}
	}
	return whatsApp, iMessage
}

// refusedForHandles says err is the hello's refusal for the company's
// bound on iMessage handles.
func refusedForHandles(err error) bool {
	pe, ok := problem.As(err)
	return ok && pe.Code == problem.ValidationFailed && pe.Field == channel.IMessage
}

// An agent's hello whose last iMessage handle another agent's hello took
// between its check and its write is refused whole: its WhatsApp number
// is not stored either. Written a channel at a time, the WhatsApp number
// was stored (a new number of the company, held by the agent) and the
// hello then refused for its handle.
func TestAnnounceIsAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newLastHandleCompany(t)
	checkedA, checkedB := f.check(t, f.a), f.check(t, f.b)
	if _, err := f.svc.Announce(context.Background(), f.b, checkedB); err != nil {
		t.Fatalf("the first hello's write: %v", err)
	}
	_, err := f.svc.Announce(context.Background(), f.a, checkedA)
	if !refusedForHandles(err) {
		t.Fatalf("the second hello's write: %v, want the refusal for the company's handles", err)
	}
	if wa, im := f.held(t, f.a); wa != 0 || im != 0 {
		t.Fatalf("the refused hello's device holds %d WhatsApp numbers and %d handles, want none", wa, im)
	}
	nums, err := f.st.AgentNumbers(f.c.ID, channel.WhatsApp)
	if err != nil || len(nums) != 1 || nums[0].Address != "+15550002222" {
		t.Fatalf("the company's WhatsApp numbers: %+v (%v), want the first hello's alone", nums, err)
	}
}

// Two hellos racing for the company's last handle: one is stored whole,
// the other refused whole, whichever wins.
func TestAnnounceRaceForTheLastHandle(t *testing.T) {
	t.Parallel()
	f := newLastHandleCompany(t)
	devs := []store.Device{f.a, f.b}
	checked := []channel.CheckedAnnounce{f.check(t, f.a), f.check(t, f.b)}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range devs {
		wg.Go(func() { _, errs[i] = f.svc.Announce(context.Background(), devs[i], checked[i]) })
	}
	wg.Wait()
	won := 0
	for i, d := range devs {
		wa, im := f.held(t, d)
		switch {
		case errs[i] == nil:
			won++
			if wa != 1 || im != 1 {
				t.Errorf("%s, stored: holds %d WhatsApp numbers and %d handles, want 1 and 1", d.Fingerprint, wa, im)
			}
		case refusedForHandles(errs[i]):
			if wa != 0 || im != 0 {
				t.Errorf("%s, refused: holds %d WhatsApp numbers and %d handles, want none", d.Fingerprint, wa, im)
			}
		default:
			t.Errorf("%s: %v", d.Fingerprint, errs[i])
		}
	}
	if won != 1 {
		t.Fatalf("%d hellos stored, want exactly one (%v)", won, errs)
	}
}
