package web

import (
	"testing"

	"github.com/simrelay/simrelay/store"
)

// BenchmarkMessageChangedUnwatched is what every send and every report pays
// the console's broker when no tab of the company is open: the change noted
// (the clock read, the company's entry written under the broker's lock) and
// nothing rendered. Parallel runs it from every core at once, as the
// requests and the links' answerers do, each for a company of its own.
func BenchmarkMessageChangedUnwatched(b *testing.B) {
	b.Run("One", func(b *testing.B) {
		br := NewBroker(StreamConfig{}, nil)
		m := store.Message{CompanyID: 1}
		b.ReportAllocs()
		for b.Loop() {
			br.MessageChanged(m)
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		br := NewBroker(StreamConfig{}, nil)
		var next uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			br.mu.Lock()
			next++
			m := store.Message{CompanyID: next}
			br.mu.Unlock()
			for pb.Next() {
				br.MessageChanged(m)
			}
		})
	})
}
