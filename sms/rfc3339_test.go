package sms_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
)

// ParseTime takes RFC 3339 with the lower-case "t" and "z" of its section
// 5.6, and nothing Go's RFC 3339 layout refuses besides, nor an offset past
// RFC 3339's range (Go reads +00:60 as +01:00 and +24:00 as a day), nor a
// comma before the fraction of a second (Go reads it as a dot).
func TestParseTimeTakesLowerCase(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"2026-12-01T09:00:00Z", true},
		{"2026-12-01t09:00:00z", true},
		{"2026-12-01t09:00:00Z", true},
		{"2026-12-01T09:00:00z", true},
		{"2026-12-01t09:00:00.000z", true},
		{"2026-12-01t10:00:00+01:00", true},
		{"2026-12-01T08:01:00-00:59", true},
		{"2026-12-02T08:59:00+23:59", true},
		{"2026-12-01T10:00:00+00:60", false},
		{"2026-12-01T08:00:00-00:60", false},
		{"2026-12-02T09:00:00+24:00", false},
		{"2026-11-30T09:00:00-24:00", false},
		{"2026-12-01T09:00:00+00:99", false},
		// RFC 3339's time-secfrac is "." and digits; Go also reads a comma
		// there (ISO 8601's other separator), which no RFC 3339 time holds.
		{"2026-12-01T09:00:00.000Z", true},
		{"2026-12-01T09:00:00,000Z", false},
		{"2026-12-01t09:00:00,5z", false},
		{"2026-12-01T10:00:00,123+01:00", false},
		{"2026-12-01 09:00:00Z", false},
		{"2026-12-01x09:00:00Z", false},
		{"2026-12-01t09:00:00", false},
		{"2026-12-01t09:00:00zz", false},
		{"2026-12-01", false},
		{"z", false},
		{"", false},
	} {
		got, err := sms.ParseTime(c.in)
		switch {
		case c.ok && (err != nil || !got.Equal(want)):
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, want)
		case !c.ok && err == nil:
			t.Errorf("%q: got %v, want an error", c.in, got)
		}
	}
}

// A phone's received_at in lower case is stored as the phone's time.
func TestInboundReceivedAtInLowerCase(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	dev := activeDevice(t, st, c.ID)
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
	if _, err := svc.Inbound(context.Background(), dev, proto.Inbound{ClientID: "c1", Channel: "sms", From: "+15550100000", Message: "hi", ReceivedAt: "2026-11-22t10:04:05.123z"}); err != nil {
		t.Fatalf("received_at in lower case: %v", err)
	}
}
