package channel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// rowMissing is the agents' store with its reads of a company answering
// store.ErrNotFound, as a record of another kind that is missing (a bug,
// a race on another record) would: the device and its company are there.
type rowMissing struct{ channel.Store }

func (s rowMissing) Company(id uint64) (store.Company, error) {
	return store.Company{}, fmt.Errorf("store: company %d: %w", id, store.ErrNotFound)
}

func (s rowMissing) DeviceCompany(companyID, deviceID uint64) (store.Company, error) {
	return store.Company{}, fmt.Errorf("store: company %d of device %d: %w", companyID, deviceID, store.ErrNotFound)
}

// markedAfterRead is the agents' store with its company's mark
// (MarkCompanyClosing) committed right after the read of a device's
// company (DeviceCompany) found it open, before the inbound's write: as a
// removal accepted on another node between the two.
type markedAfterRead struct {
	channel.Store
	st store.Backend
}

func (s markedAfterRead) DeviceCompany(companyID, deviceID uint64) (store.Company, error) {
	c, err := s.Store.DeviceCompany(companyID, deviceID)
	if err != nil {
		return c, err
	}
	if _, err := s.st.MarkCompanyClosing(companyID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		return store.Company{}, err
	}
	return c, nil
}

// goneRig is an agent of a company whose hello announced one WhatsApp
// number, with the agents' service over the store as wrap gives it.
type goneRig struct {
	st    store.Backend
	svc   *channel.Service
	c     store.Company
	agent store.Device
}

const goneNumber = "+15550101111"

func newGoneRig(t *testing.T, wrap func(channel.Store) channel.Store) goneRig {
	t.Helper()
	st := storetest.Open(t)
	c, _ := conformance.Company(t, st)
	agent := conformance.Device(t, st, c.ID, "fp-agent")
	if _, err := st.AnnounceNumbers(c.ID, agent.ID, channel.WhatsApp, []string{goneNumber}, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	var cs channel.Store = st
	if wrap != nil {
		cs = wrap(cs)
	}
	svc, err := channel.New(channel.Config{}, cs, slog.New(slog.DiscardHandler), time.Now, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	return goneRig{st: st, svc: svc, c: c, agent: agent}
}

func (r goneRig) inbound() error {
	_, err := r.svc.Inbound(context.Background(), r.agent, proto.Inbound{ClientID: "wa-1", Channel: channel.WhatsApp,
		From: "+15550000002", To: goneNumber, Message: "hello"})
	return err
}

func (r goneRig) check() error {
	_, err := r.svc.CheckAnnounce(context.Background(), r.agent, proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: goneNumber}}})
	return err
}

// An agent's inbound is refused as its device's removal (error not_found,
// which the agent drops: PROTOCOL.md section 10.2), and its hello's
// numbers' check answers store.ErrDeviceGone (the hub closes the link
// 4503), on the store's word that the device is gone and on nothing else:
// a company closing, whose removal has not taken its devices yet, is gone
// too, and the message is not stored; a read that answers
// store.ErrNotFound, the device and its company there, is a server fault,
// never a removal. Any store.ErrNotFound from the region's read was taken
// for the company's removal, a company closing stored the message, and
// the check found a closing or removed company's numbers fine or
// store.ErrNotFound.
func TestAgentGoneOnTheStoresWord(t *testing.T) {
	t.Parallel()
	gone := func(t *testing.T, r goneRig) {
		t.Helper()
		if err := r.inbound(); !problem.Is(err, problem.NotFound) {
			t.Errorf("inbound: got %v, want error not_found (the device is gone)", err)
		}
		if err := r.check(); !errors.Is(err, store.ErrDeviceGone) || errors.Is(err, store.ErrNotFound) {
			t.Errorf("the hello's numbers' check: %v, want store.ErrDeviceGone alone", err)
		}
	}

	t.Run("RowMissing", func(t *testing.T) {
		t.Parallel()
		r := newGoneRig(t, func(s channel.Store) channel.Store { return rowMissing{s} })
		for what, err := range map[string]error{"inbound": r.inbound(), "the hello's numbers' check": r.check()} {
			if _, ok := problem.As(err); ok || !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrDeviceGone) {
				t.Errorf("%s, a read that found no row of another kind: %v, want the store's error as it is (a server fault)", what, err)
			}
		}
	})

	t.Run("Closing", func(t *testing.T) {
		t.Parallel()
		r := newGoneRig(t, nil)
		if _, err := r.st.MarkCompanyClosing(r.c.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
			t.Fatal(err)
		}
		gone(t, r)
		if n, err := r.st.StatsTotals(r.c.ID); err != nil || n.Received != 0 {
			t.Errorf("a closing company's messages received: %+v (%v), want none", n, err)
		}
	})

	// The write itself refuses a company closing: a mark between the
	// read of the company and the write had the message stored and
	// acknowledged, and the removal took it after.
	t.Run("ClosingAfterTheRead", func(t *testing.T) {
		t.Parallel()
		var st store.Backend
		r := newGoneRig(t, func(s channel.Store) channel.Store {
			st = s.(store.Backend)
			return markedAfterRead{Store: s, st: st}
		})
		if err := r.inbound(); !problem.Is(err, problem.NotFound) {
			t.Errorf("inbound: got %v, want error not_found (the device is gone)", err)
		}
		if co, err := r.st.Company(r.c.ID); err != nil || co.ClosingAt.IsZero() {
			t.Fatalf("the company after the inbound: %+v (%v), want it closing", co, err)
		}
		if n, err := r.st.StatsTotals(r.c.ID); err != nil || n.Received != 0 {
			t.Errorf("messages received of a company marked closing after its read: %+v (%v), want none", n, err)
		}
	})

	t.Run("Removed", func(t *testing.T) {
		t.Parallel()
		r := newGoneRig(t, nil)
		if _, err := r.st.MarkCompanyClosing(r.c.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
			t.Fatal(err)
		}
		conformance.RemoveCompany(t, r.st, r.c.ID, 1000)
		gone(t, r)
	})

	t.Run("DeviceDeleted", func(t *testing.T) {
		t.Parallel()
		r := newGoneRig(t, nil)
		if _, err := r.st.DeleteDevice(r.c.ID, r.agent.Fingerprint, time.Now()); err != nil {
			t.Fatal(err)
		}
		gone(t, r)
	})
}
