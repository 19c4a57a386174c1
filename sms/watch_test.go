package sms_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// order records, in one list, what the watcher is told and which links are
// woken.
type order struct {
	mu  sync.Mutex
	log []string
}

func (o *order) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, s)
}

func (o *order) MessageChanged(m store.Message)    { o.add("told " + m.Text + " " + m.Status) }
func (o *order) Kick(fingerprint string, _ uint64) { o.add("woke " + fingerprint) }

func (o *order) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.log
	o.log = nil
	return out
}

// A send is told to the watcher (the console's tabs) before its link is
// woken: woken first, the phone's sent and delivered could reach a tab
// before the send's queued, which then arrived last.
func TestSendIsToldBeforeItsLinkIsWoken(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	activeDevice(t, st, c.ID)
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
	o := &order{}
	svc.SetWatcher(o)
	svc.SetDispatcher(o)

	if _, _, err := svc.Send(context.Background(), sms.SendInput{CompanyID: c.ID, Device: "pixel-1", Phone: "+15550100000", Message: "one", SIMSlot: "SIM1"}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := o.take(), []string{"told one queued", "woke pixel-1"}; !slices.Equal(got, want) {
		t.Errorf("a send: got %q, want %q", got, want)
	}

	if _, _, err := svc.SendBulk(context.Background(), sms.BulkInput{CompanyID: c.ID, Device: "pixel-1", SIMSlot: "SIM1",
		Messages: []sms.BulkItem{{Phone: "+15550100001", Message: "two"}, {Phone: "+15550100002", Message: "three"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := o.take(), []string{"told two queued", "told three queued", "woke pixel-1"}; !slices.Equal(got, want) {
		t.Errorf("a bulk send: got %q, want %q", got, want)
	}
}

// Scheduled messages released together are all told to the watcher before
// their link is woken: a link woken for the first takes the second too,
// whose sent could otherwise reach a tab before its queued.
func TestReleasedMessagesAreToldBeforeTheirLinkIsWoken(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	activeDevice(t, st, c.ID)
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	o := &order{}
	svc.SetWatcher(o)
	svc.SetDispatcher(o)

	at := clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, text := range []string{"one", "two"} {
		if _, _, err := svc.Send(context.Background(), sms.SendInput{CompanyID: c.ID, Device: "pixel-1", Phone: "+15550100000", Message: text, SIMSlot: "SIM1", SendAt: at}, nil); err != nil {
			t.Fatal(err)
		}
	}
	o.take()
	clock.Advance(2 * time.Hour)
	svc.ReleaseDue()
	if got, want := o.take(), []string{"told one queued", "told two queued", "woke pixel-1"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// failoverHub is a hub on which pixel-1 has been offline for ever and
// pixel-2 is online.
type failoverHub struct{}

func (failoverHub) Online(fp string, _ uint64) bool       { return fp == "pixel-2" }
func (failoverHub) OfflineSince(string, uint64) time.Time { return time.Time{} }
func (failoverHub) HoldDevice(_ string, _ uint64, fn func(uint64, bool) error) error {
	return fn(0, false)
}

// Jobs the failover moves are all told to the watcher before the link
// they moved to is woken, as released messages are.
func TestMovedJobsAreToldBeforeTheirLinkIsWoken(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	activeDevice(t, st, c.ID)
	other := store.Device{Fingerprint: "pixel-2", CompanyID: c.ID, Name: "Q", Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("u"), CreatedAt: time.Now()}
	if err := st.ProvisionDevices([]store.Device{other}); err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(time.Now())
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), clock.Now)
	if err := svc.SetFailoverHub(failoverHub{}); err != nil {
		t.Fatal(err)
	}
	o := &order{}
	svc.SetWatcher(o)
	svc.SetDispatcher(o)
	name, after := "fo", int64(60)
	members := []sms.PoolMemberInput{{Device: "pixel-1", SIMSlot: "SIM1"}, {Device: "pixel-2", SIMSlot: "SIM1"}}
	if _, err := svc.CreatePool(context.Background(), c.ID, sms.PoolInput{Name: &name, FailoverAfter: &after, Members: &members}); err != nil {
		t.Fatal(err)
	}
	var onFirst []string
	for i := range 4 {
		m, _, err := svc.Send(context.Background(), sms.SendInput{CompanyID: c.ID, Pool: "fo", Phone: fmt.Sprintf("+1555010000%d", i), Message: fmt.Sprint(i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.Device == "pixel-1" {
			onFirst = append(onFirst, m.Text)
		}
	}
	if len(onFirst) != 2 {
		t.Fatalf("pixel-1 got %q of the pool's 4 sends, want 2", onFirst)
	}
	o.take()
	clock.Advance(2 * time.Minute)
	if moved := svc.Failover(); len(moved) != 2 {
		t.Fatalf("the failover moved %d jobs, want 2", len(moved))
	}
	want := []string{"told " + onFirst[0] + " queued", "told " + onFirst[1] + " queued", "woke pixel-2"}
	got := o.take()
	if len(got) == 3 && got[0] > got[1] { // the store's order of the two
		got[0], got[1] = got[1], got[0]
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
