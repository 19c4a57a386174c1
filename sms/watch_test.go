package sms_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
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

func (o *order) MessageChanged(m store.Message) { o.add("told " + m.Text + " " + m.Status) }
func (o *order) Kick(fingerprint string)        { o.add("woke " + fingerprint) }

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
