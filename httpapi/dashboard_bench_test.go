package httpapi

import (
	"fmt"
	"testing"

	"github.com/simrelay/simrelay/store"
)

// BenchmarkAnalyticsByDevice merges the byDevice list of a fleet: 10,000
// phones plus 50, each counted in the range, their fingerprints in no
// particular order of their ids.
func BenchmarkAnalyticsByDevice(b *testing.B) {
	const n = 10050
	regs := make([]store.StatsDevice, n)
	counts := make(map[uint64]store.Counts, n)
	for i := range regs {
		id := uint64(i + 1)
		regs[i] = store.StatsDevice{ID: id, Fingerprint: fmt.Sprintf("phone-%05d", i*7919%n), Name: fmt.Sprint("Phone ", i), Live: true}
		counts[id] = store.Counts{Sent: 100, Delivered: 99, Received: 50}
	}
	for b.Loop() {
		if out := byDevice(regs, nil, counts); len(out) != n {
			b.Fatalf("%d items, want %d", len(out), n)
		}
	}
}
