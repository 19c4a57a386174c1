package logspacing

import (
	"testing"
	"time"
)

// The first occurrence is logged, the others within every are counted, and
// the next line due says how many were left out since the one before.
func TestDue(t *testing.T) {
	var s Spacer
	start := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	if n, ok := s.Due(start, 10*time.Second); !ok || n != 0 {
		t.Fatalf("first: %d, %v; want due with none suppressed", n, ok)
	}
	for i := range 3 {
		if _, ok := s.Due(start.Add(time.Duration(i+1)*3*time.Second), 10*time.Second); ok {
			t.Fatalf("occurrence %d within 10 s of the line is due", i+2)
		}
	}
	if n, ok := s.Due(start.Add(10*time.Second), 10*time.Second); !ok || n != 3 {
		t.Fatalf("10 s on: %d, %v; want due with 3 suppressed", n, ok)
	}
	if _, ok := s.Due(start.Add(11*time.Second), 10*time.Second); ok {
		t.Fatal("1 s after the second line is due")
	}
}
