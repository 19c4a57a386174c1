package bench

import "testing"

// A phase a zero length or count skipped (--send-for 0s) is not measured,
// whether the run went to its end or a signal cut a later phase.
func TestSkippedPhaseIsNotMeasured(t *testing.T) {
	t.Parallel()
	r := Report{Skipped: []string{PhaseSends, PhaseWebhook}}
	for phase, want := range map[string]bool{PhaseIdle: true, PhaseSends: false, PhaseLatency: true, PhaseWebhook: false} {
		if got := r.Measured(phase); got != want {
			t.Errorf("Measured(%q) = %v, want %v", phase, got, want)
		}
	}
	r.Interrupted = PhaseLists
	if r.Measured(PhaseSends) || !r.Measured(PhaseDrain) || r.Measured(PhaseLists) {
		t.Errorf("interrupted at %q: Measured(sends, drain, lists) = %v, %v, %v; want false, true, false",
			PhaseLists, r.Measured(PhaseSends), r.Measured(PhaseDrain), r.Measured(PhaseLists))
	}
}
