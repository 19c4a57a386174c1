package webhook

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// A company marked closing (DELETE /company: store MarkCompanyClosing)
// gets no push from the mark on: its deliveries stored before the mark,
// which the removal's first step has not taken yet (it failed, or runs on
// another node, or later), end without being sent, while another
// company's delivery, due with them, arrives. They were attempted until
// the removal took them: a company that asked to be removed went on
// receiving its events.
func TestClosingCompanyGetsNoPush(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := webhooktest.NewReceiver(t, true, nil)
	cfg := Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: short}
	// The events are stored before any worker runs: the closing company's
	// deliveries wait when the mark comes.
	builder, err := New(cfg, f.st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	f.configure(builder, EntryInput{URL: rc.URL + "/closing"}, EntryInput{URL: "mailto:ana@example.com", Events: []string{"sms.received"}})
	other := store.Company{Name: "Beta", APIKeyHash: []byte("kb")}
	if err := f.st.CreateCompany(&other, &store.User{FirstName: "Bo", Email: "bo@example.com", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.ProvisionDevices([]store.Device{{Fingerprint: "phone-b", CompanyID: other.ID, Status: store.DeviceActive, TokenHash: []byte("t-b")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := builder.Replace(context.Background(), other.ID, []EntryInput{{URL: rc.URL + "/open"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.inbound(builder, f.device, "SIM1", time.Now())
	}
	f.inbound(builder, "phone-b", "SIM1", time.Now())
	if n, _, err := f.st.WebhookOutboxSize(f.company); err != nil || n != 6 {
		t.Fatalf("the closing company's outbox: %d deliveries (%v), want 6", n, err)
	}
	if _, err := f.st.MarkCompanyClosing(f.company, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}

	mails := &mailCount{}
	svc, err := New(cfg, f.st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	svc.SetMailer(mails)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, c := range []uint64{f.company, other.ID} {
		eventually(t, "the deliveries ended", func() bool {
			n, _, err := f.st.WebhookOutboxSize(c)
			return err == nil && n == 0
		})
	}
	for _, r := range rc.Requests() {
		if r.Path != "/open" {
			t.Errorf("a push of the company marked closing reached %s", r.Path)
		}
	}
	if got := mails.n.Load(); got != 0 {
		t.Errorf("%d mails of the company marked closing sent, want none", got)
	}
	if len(rc.Requests()) != 1 {
		t.Errorf("%d requests, want the open company's one", len(rc.Requests()))
	}
	for _, l := range f.lines() {
		if l.State != store.WebhookFailed || !strings.HasPrefix(l.Error, "not sent: the company is being removed") {
			t.Errorf("a closing company's delivery logged %s %q, want failed, not sent", l.State, l.Error)
		}
	}
}

// mailCount is a mail outbox that counts what it is given.
type mailCount struct{ n atomic.Int64 }

func (m *mailCount) Send(context.Context, mail.Message) error {
	m.n.Add(1)
	return nil
}
