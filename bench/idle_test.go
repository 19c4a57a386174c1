package bench

import (
	"strings"
	"testing"
)

// A run whose server's RSS fell while its phones linked (a few phones after
// a seeding returned memory to the system) has no RSS figure per phone: the
// progress line says so, as the report's table does, rather than print a
// negative size ("idle: -891.8 KB RSS (-905.0 KB anonymous), ...").
func TestIdleLineHasNoNegativeMemoryPerPhone(t *testing.T) {
	t.Parallel()
	line := idleLine(Report{Phones: 20, RSSPerPhoneKB: -891.8, AnonPerPhoneKB: -905.0, HeapPerPhoneKB: 89.2,
		LiveHeapPerPhoneKB: 39.2, StackPerPhoneKB: 3.2, GoroutinesPerPhone: 1})
	if strings.Contains(line, "-891.8") || strings.Contains(line, "-905.0") {
		t.Errorf("the idle line prints a negative memory per phone: %s", line)
	}
	if !strings.Contains(line, "not measured") || !strings.Contains(line, "89.2 KB heap in use") {
		t.Errorf("the idle line does not say the RSS was not measured, with the other figures: %s", line)
	}

	line = idleLine(Report{Phones: 10000, RSSPerPhoneKB: 10.6, AnonPerPhoneKB: 10.0, HeapPerPhoneKB: 5.3,
		LiveHeapPerPhoneKB: 4.1, StackPerPhoneKB: 2.4, GoroutinesPerPhone: 1})
	if want := "idle: 10.6 KB RSS (10.0 KB anonymous), 5.3 KB heap in use (4.1 KB live), 2.4 KB stack and 1.00 goroutines per phone"; line != want {
		t.Errorf("idle line\n got %s\nwant %s", line, want)
	}
}

// The heap and stack per phone fall too at a few phones; a negative one is
// not measured either ("-12.8 KB stack" at 5 phones).
func TestIdleLineHasNoNegativeHeapOrStack(t *testing.T) {
	t.Parallel()
	line := idleLine(Report{Phones: 5, RSSPerPhoneKB: 3, AnonPerPhoneKB: 2, HeapPerPhoneKB: 99.2, LiveHeapPerPhoneKB: -11.8,
		StackPerPhoneKB: -12.8, GoroutinesPerPhone: 1})
	if strings.Contains(line, "-11.8") || strings.Contains(line, "-12.8") || !strings.Contains(line, "not measured") {
		t.Errorf("the idle line prints a negative heap or stack per phone, or does not say it was not measured: %s", line)
	}
}
