package postgres

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// inboundBuild builds a received message's event as the webhook service
// does: one body, one delivery for each active entry.
func inboundBuild(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
	var ds []store.WebhookDelivery
	for _, e := range set.Entries {
		if e.Active {
			ds = append(ds, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d-%s", e.ID, m.UUID), EventType: "sms:received", WebhookID: e.ID,
				CreatedAt: m.CreatedAt, NextAttemptAt: m.CreatedAt})
		}
	}
	return store.WebhookEvent{ID: "ev-" + m.UUID, Body: []byte(`{"event":"sms:received","id":"` + m.UUID + `"}`)}, ds, nil
}

// withWebhooks gives the company n active webhook entries and the store an
// inbound builder (inboundBuild).
func withWebhooks(tb testing.TB, s *Store, companyID uint64, n int) {
	tb.Helper()
	if _, err := s.UpdateWebhookSet(companyID, time.Now(), func(set *store.WebhookSet) error {
		for i := range n {
			set.Entries = append(set.Entries, store.WebhookEntry{URL: fmt.Sprintf("https://hooks.example/in/%d", i), Active: true})
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	s.SetInboundEvents(store.InboundEvents{Build: inboundBuild})
}

// BenchmarkInbound measures received messages (StoreInbound, a phone's
// inbound frame) as the server stores them: the default daily storage
// budget, a company with 3 active webhook entries, each message an event
// with 3 deliveries; from one phone one at a time, and from 8 phones of
// the company at once. It reports messages/s and the statements and round
// trips each costs, BEGIN and COMMIT included.
func BenchmarkInbound(b *testing.B) {
	run := func(b *testing.B, devices int, parallel bool) {
		s, stmts := openCounted(b, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
		c, _ := conformance.Company(b, s)
		withWebhooks(b, s, c.ID, 3)
		devs := make([]store.Device, devices)
		for i := range devs {
			devs[i] = conformance.Device(b, s, c.ID, fmt.Sprintf("bench-in-%d", i))
		}
		var seq, dev atomic.Uint64
		receive := func(d store.Device) {
			n := seq.Add(1)
			m := store.Message{CompanyID: c.ID, DeviceID: d.ID, ClientID: fmt.Sprintf("c-%d", n), UUID: fmt.Sprintf("in-%d", n),
				Channel: "sms", Phone: "+15550100000", Text: "Thanks, see you at 5", SIMSlot: "SIM1", Segments: 1}
			if _, dup, err := s.StoreInbound(&m, time.Now); err != nil || dup {
				b.Error(err, dup)
			}
		}
		stmts.n.Store(0)
		stmts.trips.Store(0)
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				d := devs[int(dev.Add(1)-1)%len(devs)]
				for pb.Next() {
					receive(d)
				}
			})
		} else {
			for range b.N {
				receive(devs[0])
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(stmts.n.Load())/float64(b.N), "stmts/op")
		b.ReportMetric(float64(stmts.trips.Load())/float64(b.N), "trips/op")
	}
	b.Run("OnePhone", func(b *testing.B) { run(b, 1, false) })
	b.Run("EightPhones", func(b *testing.B) {
		b.SetParallelism(8)
		run(b, 8, true)
	})
}
