package sms_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// PROTOCOL.md limits an inbound's client_id to 128 and from to 64 UTF-8
// bytes: at the limit in multi-byte text it is stored, one byte over (far
// fewer characters) is refused.
func TestInboundLimitsCountUTF8Bytes(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	dev := activeDevice(t, st, c.ID)
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
	bytes := func(n int) string { return strings.Repeat("é", n/2) + strings.Repeat("a", n%2) }
	inbound := func(clientID, from string) error {
		_, err := svc.Inbound(context.Background(), dev, proto.Inbound{ClientID: clientID, Channel: "sms", From: from, Message: "hi"})
		return err
	}
	if err := inbound(bytes(128), "+15550100000"); err != nil {
		t.Fatalf("client_id of 128 bytes: got %v, want it stored", err)
	}
	if pe, ok := problem.As(inbound(bytes(129), "+15550100000")); !ok || pe.Field != "client_id" {
		t.Fatalf("client_id of 129 bytes (65 characters): got %v, want validation_failed on client_id", pe)
	}
	if err := inbound("c2", bytes(64)); err != nil {
		t.Fatalf("from of 64 bytes: got %v, want it stored", err)
	}
	if pe, ok := problem.As(inbound("c3", bytes(65))); !ok || pe.Field != "from" {
		t.Fatalf("from of 65 bytes (33 characters): got %v, want validation_failed on from", pe)
	}
}

// activeDevice provisions an active device, pixel-1, in the company and
// returns it as the store holds it.
func activeDevice(t *testing.T, st store.Backend, companyID uint64) store.Device {
	t.Helper()
	dev := store.Device{Fingerprint: "pixel-1", CompanyID: companyID, Name: "P", Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t"), CreatedAt: time.Now()}
	if err := st.ProvisionDevices([]store.Device{dev}); err != nil {
		t.Fatal(err)
	}
	dev, err := st.CompanyDevice(companyID, dev.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore).
func TestMain(m *testing.M) { storetest.Main(m) }

// onePerPeriod is a plan of one message a period, the period ending at end.
type onePerPeriod struct{ end time.Time }

func (p onePerPeriod) Limits(store.Subscription, bool, time.Time) store.PlanLimits {
	return store.PlanLimits{Messages: 1, Devices: -1, PeriodStart: p.end.AddDate(0, -1, 0), PeriodEnd: p.end}
}

// A send over the plan's messages answers plan_limit_reached with a
// Retry-After of the seconds until the period renews, rounded up as every
// Retry-After is: rounded down, a client that waited it came back before
// the period's end and was refused again.
func TestPlanLimitRetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st.SetPlans(onePerPeriod{end})
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	activeDevice(t, st, c.ID)
	now := end.Add(-1500 * time.Millisecond) // 1.5 s before the period renews
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), func() time.Time { return now })
	send := func() error {
		_, _, err := svc.Send(context.Background(), sms.SendInput{CompanyID: c.ID, Device: "pixel-1", Phone: "+15550100001", Message: "hi"}, nil)
		return err
	}
	if err := send(); err != nil {
		t.Fatalf("the period's one message: %v", err)
	}
	pe, ok := problem.As(send())
	if !ok || pe.Code != problem.PlanLimitReached {
		t.Fatalf("the second message: got %v, want plan_limit_reached", pe)
	}
	if pe.RetryAfter != 2 {
		t.Fatalf("1.5 s before the period renews: Retry-After %d, want 2", pe.RetryAfter)
	}
}
