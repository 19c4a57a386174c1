package boltstore

import (
	"bytes"
	"testing"
	"time"
)

// TestSIMKeyLayout holds the SIM counters' keys to the layout the stores
// already hold: devKey, the slot, a zero byte and the rest, and the day and
// the month as time.Format writes them.
func TestSIMKeyLayout(t *testing.T) {
	at := time.Date(2026, 11, 29, 23, 59, 59, 0, time.FixedZone("", -5*3600)) // 30 Nov in UTC
	for _, c := range []struct {
		slot string
		rest [][]byte
	}{
		{"SIM1", nil},
		{"SIM2", [][]byte{{'d'}, []byte("20261130")}},
		{"", [][]byte{[]byte("20261130"), []byte("+15551234567")}},
		{"SIM1", [][]byte{{}, {'m'}, []byte("202611")}},
	} {
		want := devKey(1<<40+7, 255, append([]byte(c.slot), 0), bytes.Join(c.rest, nil))
		if got := simKey(1<<40+7, 255, c.slot, c.rest...); !bytes.Equal(got, want) {
			t.Errorf("simKey(%q, %q) = %x, want %x", c.slot, c.rest, got, want)
		}
	}
	if got, want := dayStamp(at), []byte(at.UTC().Format("20060102")); !bytes.Equal(got, want) {
		t.Errorf("dayStamp = %s, want %s", got, want)
	}
	if got, want := monthStamp(at), []byte(at.UTC().Format("200601")); !bytes.Equal(got, want) {
		t.Errorf("monthStamp = %s, want %s", got, want)
	}
	day := []byte("20261130")
	if n := testing.AllocsPerRun(100, func() { keySink = simKey(1, 2, "SIM1", []byte{'d'}, day) }); n != 1 {
		t.Errorf("simKey: %v allocations, want 1", n)
	}
}

// keySink keeps a key past the call, as a bucket's Put does.
var keySink []byte
