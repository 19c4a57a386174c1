package device

import (
	"strings"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/linebreak"
)

// FuzzValidHealth checks a phone's health report (a health frame, a
// hello's health): what ValidHealth takes holds percentages from 0 to 100,
// a network of at most MaxNetworkBytes lower-case letters, digits, dashes
// or underscores, at most two SIMs of distinct slots, and operators of at
// most MaxOperatorBytes with no line break.
func FuzzValidHealth(f *testing.F) {
	f.Add(true, 80, true, 75, "lte", uint8(2), "SIM1", "Vodafone", "SIM2", "O2")
	f.Add(true, 101, false, 0, "", uint8(0), "", "", "", "")
	f.Add(false, 0, true, -1, "LTE", uint8(1), "SIM1", "a\nb", "", "")
	f.Add(false, 0, false, 0, "5g-nsa_1", uint8(2), "SIM1", strings.Repeat("é", 40), "SIM1", "")
	f.Add(false, 0, false, 0, "wifi", uint8(3), "SIM2", "x", "SIM1", "y")
	f.Fuzz(func(t *testing.T, hasBattery bool, battery int, hasSignal bool, signal int, network string, sims uint8,
		slot1, op1, slot2, op2 string) {
		h := proto.Health{Network: network}
		if hasBattery {
			h.Battery = &battery
		}
		if hasSignal {
			h.Signal = &signal
		}
		for i, s := range []proto.SIMHealth{{Slot: slot1, Operator: op1}, {Slot: slot2, Operator: op2}, {Slot: "SIM1"}} {
			if i < int(sims%4) {
				h.SIMs = append(h.SIMs, s)
			}
		}
		out, err := ValidHealth(h, "health.")
		if err != nil {
			return
		}
		switch {
		case out.Battery != nil && (*out.Battery < 0 || *out.Battery > 100):
			t.Fatalf("battery %d taken", *out.Battery)
		case out.Signal != nil && (*out.Signal < 0 || *out.Signal > 100):
			t.Fatalf("signal %d taken", *out.Signal)
		case len(out.Network) > proto.MaxNetworkBytes || strings.TrimLeft(out.Network, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "":
			t.Fatalf("network %q taken", out.Network)
		case len(out.SIMs) > 2 || len(out.SIMs) != len(h.SIMs):
			t.Fatalf("%d SIMs taken of %d", len(out.SIMs), len(h.SIMs))
		}
		seen := map[string]bool{}
		for _, s := range out.SIMs {
			switch {
			case s.Slot != proto.SIM1 && s.Slot != proto.SIM2 || seen[s.Slot]:
				t.Fatalf("SIMs %+v taken", out.SIMs)
			case len(s.Operator) > proto.MaxOperatorBytes || strings.ContainsFunc(s.Operator, linebreak.Is):
				t.Fatalf("operator %q taken", s.Operator)
			}
			seen[s.Slot] = true
		}
	})
}
