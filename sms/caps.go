package sms

import (
	"context"
	"errors"
	"fmt"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Per-SIM caps (docs/routing.md).

// MaxSIMCap bounds each cap: far above any carrier's, small enough that
// no count overflows.
const MaxSIMCap = 1_000_000

// SIMCapsInput is one SIM's caps as a request sets them; nil is no cap.
type SIMCapsInput struct {
	Slot             string
	PerDay           *int64
	PerMonth         *int64
	RecipientsPerDay *int64
}

// SIMCaps returns the caps and today's and this month's use of both SIMs
// of the company's device.
func (s *Service) SIMCaps(_ context.Context, companyID uint64, fingerprint string) ([]store.SIMUsage, error) {
	out, err := s.store.SIMUsages(companyID, fingerprint, s.now())
	return out, deviceError(err)
}

// SetSIMCaps replaces the caps of each SIM given (the other keeps its own).
func (s *Service) SetSIMCaps(_ context.Context, companyID uint64, fingerprint string, in []SIMCapsInput) ([]store.SIMUsage, error) {
	if len(in) == 0 || len(in) > 2 {
		return nil, problem.Invalid("sims", "must hold 1 or 2 SIMs")
	}
	caps := map[string]store.SIMCaps{}
	for i, c := range in {
		at := fmt.Sprintf("sims[%d].", i)
		if !proto.IsSIMSlot(c.Slot) {
			return nil, problem.Invalid(at+"slot", "must be SIM1 or SIM2")
		}
		if _, dup := caps[c.Slot]; dup {
			return nil, problem.Invalid(at+"slot", "names a SIM given before")
		}
		var sc store.SIMCaps
		for _, f := range []struct {
			name string
			v    *int64
			to   *int64
		}{{"per_day", c.PerDay, &sc.PerDay}, {"per_month", c.PerMonth, &sc.PerMonth}, {"recipients_per_day", c.RecipientsPerDay, &sc.RecipientsPerDay}} {
			if f.v == nil {
				continue
			}
			if *f.v < 1 || *f.v > MaxSIMCap {
				return nil, problem.Invalid(at+f.name, fmt.Sprintf("must be 1 to %d, or null for no cap", MaxSIMCap))
			}
			*f.to = *f.v
		}
		caps[c.Slot] = sc
	}
	out, err := s.store.SetSIMCaps(companyID, fingerprint, caps, s.now())
	return out, deviceError(err)
}

func deviceError(err error) error {
	if errors.Is(err, store.ErrDeviceGone) {
		return problem.New(problem.NotFound, "No such device.")
	}
	return err
}
