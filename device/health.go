package device

import (
	"context"
	"errors"
	"fmt"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/linebreak"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// HealthInterval is the shortest time between two health reports of a
// device that the server stores; an earlier one is refused with a
// retry_after (PROTOCOL.md section 8.11).
const HealthInterval = proto.HealthIntervalSeconds * time.Second

// BatteryLowPercent is the threshold of device.battery_low: a report under
// it raises the event once, and a report at or above it arms it again.
// A phone at 15 % has an hour or two left under load: time to plug it in.
const BatteryLowPercent = 15

// ValidHealth checks a health report and returns it as stored, fields
// named from prefix ("health." in a hello, "" in a health frame).
func ValidHealth(h proto.Health, prefix string) (store.DeviceHealth, error) {
	out := store.DeviceHealth{Battery: h.Battery, Charging: h.Charging, Signal: h.Signal, Network: h.Network}
	if h.Battery != nil && (*h.Battery < 0 || *h.Battery > 100) {
		return out, problem.Invalid(prefix+"battery", "must be a percentage from 0 to 100")
	}
	if h.Signal != nil && (*h.Signal < 0 || *h.Signal > 100) {
		return out, problem.Invalid(prefix+"signal", "must be a percentage from 0 to 100")
	}
	if !validNetwork(h.Network) {
		return out, problem.Invalid(prefix+"network", fmt.Sprintf("must be at most %d lower-case letters, digits, dashes or underscores, such as lte or wifi", proto.MaxNetworkBytes))
	}
	if len(h.SIMs) > 2 {
		return out, problem.Invalid(prefix+"sims", "must list at most two SIMs: a phone has no more slots")
	}
	seen := map[string]bool{}
	for i, sim := range h.SIMs {
		field := fmt.Sprintf("%ssims[%d]", prefix, i)
		if !proto.IsSIMSlot(sim.Slot) {
			return out, problem.Invalid(field+".slot", "must be SIM1 or SIM2")
		}
		if seen[sim.Slot] {
			return out, problem.Invalid(field+".slot", "names a slot twice")
		}
		seen[sim.Slot] = true
		sim.Operator = linebreak.Replace(sim.Operator) // mended, as a SIM's carrier is
		if len(sim.Operator) > proto.MaxOperatorBytes {
			return out, problem.Invalid(field+".operator", fmt.Sprintf("must be at most %d bytes of UTF-8", proto.MaxOperatorBytes))
		}
		out.SIMs = append(out.SIMs, store.SIMHealth(sim))
	}
	return out, nil
}

func validNetwork(v string) bool {
	if len(v) > proto.MaxNetworkBytes {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// applyHealth makes h the device's last report, keeping the alert state,
// and says whether the report crossed under the battery threshold.
func applyHealth(d *store.Device, h store.DeviceHealth, now time.Time) (batteryLow bool) {
	wasLow := d.Health != nil && d.Health.BatteryLow
	if d.Health != nil {
		h.Presence, h.OfflineMailAt = d.Health.Presence, d.Health.OfflineMailAt
	}
	h.ReportedAt = now.UTC()
	switch {
	case h.Battery == nil:
		h.BatteryLow = wasLow // unknown: nothing crossed
	case *h.Battery < BatteryLowPercent:
		h.BatteryLow, batteryLow = true, !wasLow
	}
	d.Health = &h
	return batteryLow
}

// Health stores a health frame as the device's last report. A report
// sooner than HealthInterval after the last one is refused with a
// retry_after: the phone sends its newest state then.
func (s *Service) Health(_ context.Context, dev store.Device, h proto.Health) error {
	report, err := ValidHealth(h, "")
	if err != nil {
		return err
	}
	now := s.now()
	_, err = s.store.UpdateDeviceWith(dev.CompanyID, dev.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		if d.Health != nil && !d.Health.ReportedAt.IsZero() {
			if wait := d.Health.ReportedAt.Add(HealthInterval).Sub(now); wait > 0 {
				return nil, &problem.Error{Code: problem.RateLimited, RetryAfter: int((wait + time.Second - 1) / time.Second),
					Message: fmt.Sprintf("a phone reports its health at most once every %d seconds; send the newest state after retry_after", proto.HealthIntervalSeconds)}
			}
		}
		if applyHealth(d, report, now) {
			return raised(EventBatteryLow, now), nil
		}
		return nil, nil
	})
	if pe, ok := problem.As(err); ok {
		return pe
	}
	if errors.Is(err, store.ErrDeviceGone) {
		return errNoDevice
	}
	return err
}
