package sms_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// rowMissing is the store with its reads of a company answering
// store.ErrNotFound, as a record of another kind that is missing (a bug,
// a race on another record) would: the device and its company are there.
type rowMissing struct{ store.Backend }

func (s rowMissing) Company(id uint64) (store.Company, error) {
	return store.Company{}, fmt.Errorf("store: company %d: %w", id, store.ErrNotFound)
}

func (s rowMissing) DeviceCompany(companyID, deviceID uint64) (store.Company, error) {
	return store.Company{}, fmt.Errorf("store: company %d of device %d: %w", companyID, deviceID, store.ErrNotFound)
}

// markedAfterRead is the store with its company's mark (MarkCompanyClosing)
// committed right after the read of a device's company (DeviceCompany)
// found it open, before the inbound's write: as a removal accepted on
// another node between the two.
type markedAfterRead struct{ store.Backend }

func (s markedAfterRead) DeviceCompany(companyID, deviceID uint64) (store.Company, error) {
	c, err := s.Backend.DeviceCompany(companyID, deviceID)
	if err != nil {
		return c, err
	}
	if _, err := s.MarkCompanyClosing(companyID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		return store.Company{}, err
	}
	return c, nil
}

// An inbound is refused as its device's removal (error not_found, which
// the phone drops: PROTOCOL.md section 10.2) on the store's word that the
// device is gone (store.ErrDeviceGone) and on nothing else: a company
// closing, whose removal has not taken its devices yet, is gone too, and
// nothing is stored; a read that answers store.ErrNotFound, the device
// and its company there, is a server fault, never a removal. Any
// store.ErrNotFound from the region's read was taken for the company's
// removal, and a company closing stored the message and acknowledged it.
func TestInboundGoneOnTheStoresWord(t *testing.T) {
	t.Parallel()
	in := proto.Inbound{ClientID: "c-1", Channel: proto.ChannelSMS, From: "+15550000001", Message: "hello"}
	gone := func(t *testing.T, err error) {
		t.Helper()
		if pe, ok := problem.As(err); !ok || pe.Code != problem.NotFound {
			t.Fatalf("got %v, want error not_found (the device is gone)", err)
		}
	}
	acme := func(t *testing.T) (store.Backend, store.Company, store.Device) {
		t.Helper()
		st := storetest.Open(t)
		c := storetest.Company(t, st, "Acme", "a@acme.test")
		return st, c, activeDevice(t, st, c.ID)
	}
	noneStored := func(t *testing.T, st store.Backend, companyID uint64, what string) {
		t.Helper()
		if got, err := st.InboundList(store.InboundQuery{CompanyID: companyID, Limit: 10}); err != nil || len(got) != 0 {
			t.Fatalf("inbound stored for %s: %+v (%v), want none", what, got, err)
		}
	}

	t.Run("RowMissing", func(t *testing.T) {
		t.Parallel()
		st, _, dev := acme(t)
		svc := sms.New(sms.Config{}, rowMissing{st}, slog.New(slog.DiscardHandler), time.Now)
		_, err := svc.Inbound(context.Background(), dev, in)
		if _, ok := problem.As(err); ok || !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a read that found no row of another kind: %v, want the store's error as it is (a server fault), not a refusal", err)
		}
	})

	t.Run("Closing", func(t *testing.T) {
		t.Parallel()
		st, c, dev := acme(t)
		svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
		if _, err := st.MarkCompanyClosing(c.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
			t.Fatal(err)
		}
		_, err := svc.Inbound(context.Background(), dev, in)
		gone(t, err)
		noneStored(t, st, c.ID, "a company closing")
	})

	// The write itself refuses a company closing: a mark between the
	// read of the company and the write had the message stored and
	// acknowledged, and the removal took it after.
	t.Run("ClosingAfterTheRead", func(t *testing.T) {
		t.Parallel()
		st, c, dev := acme(t)
		svc := sms.New(sms.Config{}, markedAfterRead{st}, slog.New(slog.DiscardHandler), time.Now)
		_, err := svc.Inbound(context.Background(), dev, in)
		gone(t, err)
		if co, err := st.Company(c.ID); err != nil || co.ClosingAt.IsZero() {
			t.Fatalf("the company after the inbound: %+v (%v), want it closing", co, err)
		}
		noneStored(t, st, c.ID, "a company marked closing after its read")
	})

	t.Run("DeviceDeleted", func(t *testing.T) {
		t.Parallel()
		st, c, dev := acme(t)
		svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
		if _, err := st.DeleteDevice(c.ID, dev.Fingerprint, time.Now()); err != nil {
			t.Fatal(err)
		}
		_, err := svc.Inbound(context.Background(), dev, in)
		gone(t, err)
	})
}
