package web

import (
	"testing"

	"github.com/simrelay/simrelay/store"
)

// BenchmarkMessageChangedUnwatched is what every send and every report pays
// the console's broker when no tab of the company is open: the change noted
// (the clock read, the company's entries of the topics it concerns written
// under the broker's lock) and nothing rendered. SMS and WhatsApp are a
// message of a phone and of a WhatsApp number, whose topics name the device
// and the number. Parallel runs it from every core at once, as the requests
// and the links' answerers do, each for a company of its own.
func BenchmarkMessageChangedUnwatched(b *testing.B) {
	for _, c := range []struct {
		name string
		m    store.Message
	}{
		{"SMS", store.Message{CompanyID: 1, Device: "3f9c2a7d5e1b4c8a", Channel: "sms"}},
		{"WhatsApp", store.Message{CompanyID: 1, Device: "agent-3f9c2a7d", Channel: "whatsapp", NumberRef: "wa-12"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			br := NewBroker(StreamConfig{}, nil)
			b.ReportAllocs()
			for b.Loop() {
				br.MessageChanged(c.m)
			}
		})
	}
	b.Run("Parallel", func(b *testing.B) {
		br := NewBroker(StreamConfig{}, nil)
		var next uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			br.mu.Lock()
			next++
			m := store.Message{CompanyID: next, Device: "3f9c2a7d5e1b4c8a", Channel: "sms"}
			br.mu.Unlock()
			for pb.Next() {
				br.MessageChanged(m)
			}
		})
	})
}

// TestMessageChangedUnwatchedAllocatesNothing: a change of a company with
// no tab open is noted without an allocation, whatever the message's
// channel: its topics are the device's and the number's ids as they are,
// no string built for them.
func TestMessageChangedUnwatchedAllocatesNothing(t *testing.T) {
	br := NewBroker(StreamConfig{}, nil)
	for _, m := range []store.Message{
		{CompanyID: 1, Device: "3f9c2a7d5e1b4c8a", Channel: "sms"},
		{CompanyID: 1, Device: "agent-3f9c2a7d", Channel: "whatsapp", NumberRef: "wa-12"},
	} {
		if n := testing.AllocsPerRun(100, func() { br.MessageChanged(m) }); n != 0 {
			t.Errorf("a %s message's change allocates %v times, want none", m.Channel, n)
		}
	}
}
