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
