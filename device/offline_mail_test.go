package device_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/store"
)

// A company's phones all lose their links at once (or are made to): each
// is reported offline, but the admins are mailed about OfflineMailsPerHour
// of them in the hour, not one mail per phone, since every phone the
// company pairs would otherwise add a mail per admin each hour, outside
// the companies' mail bounds and the storage budget.
func TestOfflineMailsBoundedPerCompany(t *testing.T) {
	t.Parallel()
	st, c, svc := alerting(t)
	ctx := context.Background()
	phones := device.OfflineMailsPerHour + 5
	var fps []string
	for i := range phones {
		fps = append(fps, fmt.Sprintf("pixel-%d", i))
	}
	tokens, err := svc.Provision(ctx, c.ID, 0, fps)
	if err != nil {
		t.Fatal(err)
	}
	p := svc.NewPresence(func(string, uint64) bool { return false })
	for _, tok := range tokens {
		dev, err := svc.Authenticate(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if dev, err = svc.Hello(ctx, dev, device.CheckedHello{}); err != nil {
			t.Fatal(err)
		}
		p.Down(dev)
	}
	for _, fp := range fps {
		poll.Within(t, 10*time.Second, fp+" reported offline", func() bool {
			d, err := svc.Get(ctx, c.ID, fp)
			if err != nil {
				t.Fatal(err)
			}
			return d.Health != nil && d.Health.Presence == store.PresenceOffline
		})
	}
	p.Stop()
	mails, err := st.Mails(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(mails) != device.OfflineMailsPerHour {
		t.Fatalf("%d offline mails queued for %d phones, want %d (OfflineMailsPerHour)", len(mails), phones, device.OfflineMailsPerHour)
	}
}
