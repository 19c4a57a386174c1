package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// BenchmarkEnqueueBulk measures bulk sends of 1,000 messages (the most a
// request takes) from one device: all to one number, and each to its own.
// The conversations the messages join are kept by the messages table's
// triggers in the same transaction; one number's 1,000 messages are one
// conversation, 1,000 numbers' are 1,000. It reports milliseconds per
// bulk. ThousandNumbersRecipientsCap sends from a SIM with a daily
// recipients cap.
func BenchmarkEnqueueBulk(b *testing.B) {
	const n = 1000
	run := func(b *testing.B, numbers int, recipientsCap int64) {
		s, _ := openCounted(b, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
		s.SetPlans(benchPlans{})
		c, _ := conformance.Company(b, s)
		conformance.Device(b, s, c.ID, "bench-bulk")
		if recipientsCap > 0 {
			if _, err := s.SetSIMCaps(c.ID, "bench-bulk", map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: recipientsCap}}, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
		answer := func([]store.Message) (int, []byte) { return 202, nil }
		ms := make([]store.Message, n)
		b.ResetTimer()
		for k := range b.N {
			for i := range ms {
				ms[i] = store.Message{UUID: fmt.Sprintf("bulk-%d-%d", k, i), CompanyID: c.ID, Device: "bench-bulk", SIMSlot: "SIM1",
					Channel: "sms", Phone: fmt.Sprintf("+1555%07d", i%numbers), Text: "Your code is 123456"}
			}
			if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, time.Now, nil, answer); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/bulk")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("OneNumber", func(b *testing.B) { run(b, 1, 0) })
	b.Run("ThousandNumbers", func(b *testing.B) { run(b, n, 0) })
	// From a SIM with a daily recipients cap: the first request's 1,000
	// recipients are new, every later one's known.
	b.Run("ThousandNumbersRecipientsCap", func(b *testing.B) { run(b, n, 1_000_000) })
}
