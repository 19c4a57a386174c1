package device_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// PROTOCOL.md section 3: the length limits of device_name, carrier,
// fcm_token and app_version count UTF-8 bytes, not characters. Each case is
// at the exact boundary with multi-byte text: the limit in bytes passes,
// one byte more (still far fewer characters) is refused.
func TestLengthLimitsCountUTF8Bytes(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	svc := device.New(device.Config{PublicURL: "http://127.0.0.1"}, st, time.Now)
	ctx := context.Background()
	register := func(in device.RegisterInput) error {
		p, err := svc.CreatePairing(ctx, c.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		in.PairingCode, in.DeviceFingerprint = p.Code, "pixel-1"
		_, err = svc.Register(ctx, in)
		return err
	}
	// bytes returns text of exactly n bytes made of two-byte characters
	// (and one ASCII letter when n is odd).
	bytes := func(n int) string { return strings.Repeat("é", n/2) + strings.Repeat("a", n%2) }

	cases := []struct {
		field string
		limit int
		set   func(in *device.RegisterInput, v string)
	}{
		{"device_name", 100, func(in *device.RegisterInput, v string) { in.DeviceName = v }},
		{"sims[0].carrier", 64, func(in *device.RegisterInput, v string) { in.SIMs = []store.SIM{{Slot: "SIM1", Carrier: v}} }},
		{"fcm_token", 4096, func(in *device.RegisterInput, v string) { in.FCMToken = v }},
		{"app_version", 64, func(in *device.RegisterInput, v string) { in.AppVersion = v }},
	}
	for _, tc := range cases {
		t.Run("register "+tc.field, func(t *testing.T) {
			var in device.RegisterInput
			tc.set(&in, bytes(tc.limit))
			if err := register(in); err != nil {
				t.Fatalf("%d bytes: got %v, want it accepted", tc.limit, err)
			}
			tc.set(&in, bytes(tc.limit+1))
			if pe, ok := problem.As(register(in)); !ok || pe.Field != tc.field {
				t.Fatalf("%d bytes (%d characters): got %v, want validation_failed on %s", tc.limit+1, (tc.limit+1)/2+1, pe, tc.field)
			}
		})
	}

	t.Run("patch device_name", func(t *testing.T) {
		name := bytes(100)
		if _, err := svc.Update(ctx, c.ID, "pixel-1", device.Patch{DeviceName: &name}); err != nil {
			t.Fatalf("100 bytes: got %v, want it accepted", err)
		}
		name = bytes(101)
		if pe, ok := problem.As(errOf(svc.Update(ctx, c.ID, "pixel-1", device.Patch{DeviceName: &name}))); !ok || pe.Field != "device_name" {
			t.Fatalf("101 bytes: got %v, want validation_failed on device_name", pe)
		}
	})
	t.Run("hello app_version", func(t *testing.T) {
		dev, err := svc.Get(ctx, c.ID, "pixel-1")
		if err != nil {
			t.Fatal(err)
		}
		checked, err := svc.CheckHello("", nil, bytes(64), nil)
		if err != nil {
			t.Fatalf("64 bytes: got %v, want it accepted", err)
		}
		if dev, err = svc.Hello(ctx, dev, checked); err != nil || dev.AppVersion != bytes(64) {
			t.Fatalf("64 bytes: stored %q (%v), want them", dev.AppVersion, err)
		}
		_, err = svc.CheckHello("", nil, bytes(65), nil)
		if pe, ok := problem.As(err); !ok || pe.Field != "app_version" {
			t.Fatalf("65 bytes: got %v, want validation_failed on app_version", err)
		}
	})
}

func errOf(_ store.Device, err error) error { return err }

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore).
func TestMain(m *testing.M) { storetest.Main(m) }
