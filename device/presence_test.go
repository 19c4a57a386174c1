package device_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store"
)

// A phone links again just as the offline check of its last link runs:
// the check asked the hub before the new link registered (no link), and
// writes offline after the new link's hello and its read after
// registering saw the device online, so the link's Up finds nothing to
// do. The device must end up reported online, as its link is up: the
// check, having written offline, asks the hub again.
func TestPresenceLinkDuringOfflineCheck(t *testing.T) {
	t.Parallel()
	// The offline mail is queued in the store's outbox (nothing sends it
	// here): a device reported online again must not have one.
	st, c, svc := alerting(t)
	ctx := context.Background()
	dev := linked(t, svc, c.ID, "pixel-1")
	// The hub is asked first before the new link registers (no link),
	// and answers only once the test let the link in; after that the link
	// is up.
	asked, release := make(chan struct{}, 1), make(chan struct{})
	var asks atomic.Int32
	p := svc.NewPresence(func(string, uint64) bool {
		if asks.Add(1) == 1 {
			asked <- struct{}{}
			<-release
			return false
		}
		return true
	})

	p.Down(dev) // the link ended
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("no offline check within 10 s")
	}
	// The phone links again while the check has its answer: its hello,
	// then the read after registering, both see it online.
	if _, err := svc.Hello(ctx, dev, device.CheckedHello{}); err != nil {
		t.Fatal(err)
	}
	fresh, err := svc.Get(ctx, c.ID, dev.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	p.Stop() // waits for the check
	p.Up(fresh)

	got, err := svc.Get(ctx, c.ID, dev.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	if got.Health == nil || got.Health.Presence != store.PresenceOnline {
		t.Fatalf("device reported %+v with its link up, want online", got.Health)
	}
	if mails, err := st.Mails(true); err != nil || len(mails) != 0 {
		t.Fatalf("mails queued: %d (%v), want no offline mail for a device back online", len(mails), err)
	}
}

// A device deleted while its offline check waits out the grace is not
// reported offline, and nothing of it is an error: deleting a phone within
// two minutes of its link ending is ordinary, and logged "store device
// offline" at ERROR with the store's not found every time.
func TestPresenceOfADeletedDeviceIsNoError(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	svc := device.New(device.Config{PublicURL: "http://127.0.0.1"}, st, time.Now)
	var logged syncbuf.Buffer
	svc.SetAlerts(device.Alerts{OfflineGrace: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	ctx := context.Background()
	dev := linked(t, svc, c.ID, "pixel-1")
	asked, release := make(chan struct{}, 1), make(chan struct{})
	p := svc.NewPresence(func(string, uint64) bool {
		asked <- struct{}{}
		<-release
		return false
	})
	p.Down(dev) // the link ended
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("no offline check within 10 s")
	}
	if _, err := svc.Delete(ctx, c.ID, dev.Fingerprint); err != nil {
		t.Fatal(err)
	}
	close(release)
	p.Stop() // waits for the check
	if s := logged.String(); s != "" {
		t.Fatalf("the offline check of a deleted device logged:\n%s", s)
	}
}

// alerting is a device service over a fresh store with a company whose
// admin verified the address, and offline mails queued in the store's
// outbox (nothing sends them) after a grace of a millisecond.
func alerting(t *testing.T) (store.Backend, store.Company, *device.Service) {
	t.Helper()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	users, err := st.CompanyUsers(c.ID)
	if err != nil || len(users) != 1 {
		t.Fatalf("the company's users: %v, %v", users, err)
	}
	if _, err := st.UpdateUser(users[0].ID, func(u *store.User) error { u.EmailVerified = true; return nil }); err != nil {
		t.Fatal(err)
	}
	svc := device.New(device.Config{PublicURL: "http://127.0.0.1"}, st, time.Now)
	mailer, err := mail.New(mail.Config{SMTPURL: "smtp://127.0.0.1:1"}, st, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	svc.SetAlerts(device.Alerts{OfflineGrace: time.Millisecond, Mailer: mailer})
	return st, c, svc
}

// linked provisions a phone of the company and stores its link's hello, as
// a link that registered would.
func linked(t *testing.T, svc *device.Service, companyID uint64, fingerprint string) store.Device {
	t.Helper()
	ctx := context.Background()
	tokens, err := svc.Provision(ctx, companyID, 0, []string{fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := svc.Authenticate(ctx, tokens[0])
	if err != nil {
		t.Fatal(err)
	}
	if dev, err = svc.Hello(ctx, dev, device.CheckedHello{}); err != nil {
		t.Fatal(err)
	}
	return dev
}

// A node that starts in a cluster leaves alone the devices linked on the
// other nodes: their links did not end with its last run. Checked after
// the grace, one whose phone was reconnecting at that moment (a blip of a
// second; the check then finds no link) was reported offline, and its
// admins mailed, for a link that had ended a second before. A device
// reported online and linked nowhere is checked, as before.
func TestResumeLeavesDevicesLinkedElsewhere(t *testing.T) {
	t.Parallel()
	st, c, svc := alerting(t)
	ctx := context.Background()
	elsewhere := linked(t, svc, c.ID, "pixel-elsewhere") // linked on another node
	gone := linked(t, svc, c.ID, "pixel-gone")           // its link ended with this node's last run
	asked := make(chan string, 4)
	p := svc.NewPresence(func(fp string, _ uint64) bool {
		asked <- fp
		return false // no link at the check: "elsewhere" is reconnecting then
	})
	if err := p.Resume(func(devs map[string]uint64) map[string]time.Time {
		if len(devs) != 2 {
			t.Errorf("asked which of %v are linked, want both devices", devs)
		}
		return map[string]time.Time{elsewhere.Fingerprint: time.Now()}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case fp := <-asked:
		if fp != gone.Fingerprint {
			t.Fatalf("the check after the start asked of %s, want %s alone", fp, gone.Fingerprint)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no offline check of the device linked nowhere within 10 s")
	}
	poll.Within(t, 10*time.Second, "the device linked nowhere reported offline", func() bool {
		d, err := svc.Get(ctx, c.ID, gone.Fingerprint)
		return err == nil && d.Health != nil && d.Health.Presence == store.PresenceOffline
	})
	p.Stop() // waits for a check still running
	close(asked)
	for fp := range asked { // the check asks again once it wrote offline
		if fp != gone.Fingerprint {
			t.Errorf("the check after the start asked of %s too", fp)
		}
	}
	got, err := svc.Get(ctx, c.ID, elsewhere.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	if got.Health == nil || got.Health.Presence != store.PresenceOnline {
		t.Errorf("the device linked elsewhere reads %+v, want online", got.Health)
	}
	if mails, err := st.Mails(true); err != nil || len(mails) != 1 {
		t.Errorf("mails queued: %d (%v), want one, of the device linked nowhere", len(mails), err)
	}
}
