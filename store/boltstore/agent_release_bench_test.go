package boltstore

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAgentRelease is the store's part of an agent's hello that names
// its jobs (AgentRelease): the agent holds 8 numbers with 4 sends each
// handed to it, all named in its hello (the usual hello, which releases
// nothing), in a company whose other agent has a backlog of queued sends,
// half of them handed to it. Its time and allocations a hello are the
// figures of docs/performance.md ("An agent job's hand-out record").
func BenchmarkAgentRelease(b *testing.B) {
	for _, backlog := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprint("backlog=", backlog), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{BulkLoad: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			c := Company{Name: "Bench", APIKeyHash: []byte("k")}
			if err := s.CreateCompany(&c, &User{Email: "b@example.com", PasswordHash: "x"}); err != nil {
				b.Fatal(err)
			}
			if err := s.ProvisionDevices([]Device{
				{Fingerprint: "agent", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t1")},
				{Fingerprint: "other", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t2")},
			}); err != nil {
				b.Fatal(err)
			}
			agent, err := s.Device("agent")
			if err != nil {
				b.Fatal(err)
			}
			other, err := s.Device("other")
			if err != nil {
				b.Fatal(err)
			}
			queue := func(d Device, numbers, sends int, handed func(i int) bool) []string {
				addrs := make([]string, numbers)
				for i := range addrs {
					addrs[i] = fmt.Sprintf("+1555%03d%04d", d.ID, i)
				}
				nums, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameWhatsApp, addrs, time.Now(), 0)
				if err != nil {
					b.Fatal(err)
				}
				var uuids []string
				for i := range sends {
					n := nums[i%numbers]
					m := Message{UUID: fmt.Sprintf("%s-%d", d.Fingerprint, i), CompanyID: c.ID, Channel: n.Channel, NumberRef: n.PublicID, Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
					out, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, time.Now, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					if handed(i) {
						if ok, err := s.AgentHandOut(c.ID, d.ID, out.ID); err != nil || !ok {
							b.Fatalf("hand out: %v (%v)", ok, err)
						}
						uuids = append(uuids, out.UUID)
					}
				}
				return uuids
			}
			if backlog > 0 {
				queue(other, 100, backlog, func(i int) bool { return i%2 == 0 })
			}
			held := queue(agent, 8, 32, func(int) bool { return true })
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				got, err := s.AgentRelease(c.ID, agent.ID, held)
				if err != nil || len(got) != 0 {
					b.Fatalf("released %v (%v), want nothing", got, err)
				}
			}
		})
	}
}
