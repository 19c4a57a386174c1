package device_test

import (
	"context"
	"testing"
	"time"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// A phone links again just as the offline check of its last link runs:
// the check asked the hub before the new link registered (no link), and
// writes offline after the new link's hello and its registration read the
// device online. The device must end up reported online, as its link is
// up: Up waits for the check rather than trust what it read.
func TestPresenceUpDuringOfflineCheck(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	svc := device.New(device.Config{PublicURL: "http://127.0.0.1"}, st, time.Now)
	svc.SetAlerts(device.Alerts{OfflineGrace: time.Millisecond})
	ctx := context.Background()
	tokens, err := svc.Provision(ctx, c.ID, 0, []string{"pixel-1"})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := svc.Authenticate(ctx, tokens[0])
	if err != nil {
		t.Fatal(err)
	}
	if dev, err = svc.Hello(ctx, dev, "", nil, "", nil); err != nil {
		t.Fatal(err)
	}
	asked, answer := make(chan struct{}), make(chan bool, 1)
	p := svc.NewPresence(func(string) bool { asked <- struct{}{}; return <-answer })
	defer p.Stop()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			answer <- false // let Stop end
			t.Fatalf("no %s within 10 s", what)
		}
	}

	p.Down(dev) // the link ended
	wait(asked, "offline check")
	// The phone links again while the check has its answer: its hello,
	// then the read after registering, both see it online.
	if _, err := svc.Hello(ctx, dev, "", nil, "", nil); err != nil {
		t.Fatal(err)
	}
	fresh, err := svc.Get(ctx, c.ID, dev.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	up := make(chan struct{})
	go func() { p.Up(fresh); close(up) }()
	answer <- false // the hub had no link when asked
	wait(up, "return from Up")
	p.Stop()

	got, err := svc.Get(ctx, c.ID, dev.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	if got.Health == nil || got.Health.Presence != store.PresenceOnline {
		t.Fatalf("device reported %+v with its link up, want online", got.Health)
	}
}
