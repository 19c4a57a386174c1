package retention

import (
	"testing"
	"time"
)

// TestSweep: the first scan is due at once, the next only ScanEvery later,
// and a scan drops exactly the entries written Life or more before it.
func TestSweep(t *testing.T) {
	const life = 48 * time.Hour
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Sweep{Life: life}
	if !s.Due(start) {
		t.Fatal("first scan: not due, want due")
	}
	if s.Due(start.Add(ScanEvery - time.Second)) {
		t.Fatal("scan within ScanEvery of the last: due, want not")
	}
	now := start.Add(ScanEvery)
	if !s.Due(now) {
		t.Fatal("scan ScanEvery after the last: not due, want due")
	}
	m := map[string]time.Time{
		"old":  now.Add(-life),
		"kept": now.Add(-life + time.Second),
	}
	Prune(&s, m, now, func(at time.Time) time.Time { return at })
	if _, ok := m["old"]; ok {
		t.Error("entry written Life ago: kept, want dropped")
	}
	if _, ok := m["kept"]; !ok {
		t.Error("entry written within Life: dropped, want kept")
	}
}
