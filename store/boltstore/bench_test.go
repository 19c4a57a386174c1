package boltstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func benchStore(b *testing.B) (*Store, Company) {
	b.Helper()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c := Company{Name: "Bench", APIKeyHash: []byte("k")}
	u := User{Email: "b@example.com", PasswordHash: "x"}
	if err := s.CreateCompany(&c, &u); err != nil {
		b.Fatal(err)
	}
	if err := s.ProvisionDevices([]Device{{Fingerprint: "bench", CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t")}}); err != nil {
		b.Fatal(err)
	}
	return s, c
}

// BenchmarkEnqueueGrouped is the send path: many concurrent sends, each
// durable (fsync'd) before it returns, sharing commits.
func BenchmarkEnqueueGrouped(b *testing.B) {
	s, c := benchStore(b)
	now := time.Now
	b.SetParallelism(64) // 64 x GOMAXPROCS concurrent senders, as a busy API has
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			m := Message{UUID: fmt.Sprintf("%p-%d", pb, i), CompanyID: c.ID, Device: "bench", Phone: "+15551234567", Text: "hello", SIMSlot: "SIM1", ExpiresAt: time.Now().Add(time.Hour)}
			if _, _, err := s.Enqueue(&m, IdempotencyKey{}, now, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkEnqueueOneTxEach is the same write with one transaction (and one
// fsync) per record, for comparison.
func BenchmarkEnqueueOneTxEach(b *testing.B) {
	s, c := benchStore(b)
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			m := Message{ID: 0, UUID: fmt.Sprintf("%p-%d", pb, i), CompanyID: c.ID, DeviceID: 1, Device: "bench", Phone: "+15551234567", Text: "hello", SIMSlot: "SIM1", Direction: Outbound, Status: MsgQueued}
			err := s.db.Update(func(tx *bolt.Tx) error {
				id, err := tx.Bucket(bucketMessages).NextSequence()
				if err != nil {
					return err
				}
				m.ID, m.CreatedAt = id, time.Now()
				if err := insertMessage(tx, &m); err != nil {
					return err
				}
				return tx.Bucket(bucketQueue).Put(msgDevKey(m, itob(id)), nil)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkHistoryPage reads page 2 of a 10,000-message conversation in a
// store of 200,000 messages.
func BenchmarkHistoryPage(b *testing.B) {
	s, c := benchStore(b)
	var batch []Message
	at := time.Now().Add(-time.Hour)
	for i := range 200000 {
		phone := fmt.Sprintf("+1555%07d", i%20)
		batch = append(batch, Message{UUID: fmt.Sprint("u", i), CompanyID: c.ID, Device: "bench", Direction: Outbound, Status: MsgDelivered, Phone: phone, Text: "x", CreatedAt: at})
		at = at.Add(time.Millisecond)
		if len(batch) == 20000 {
			if err := s.ImportMessages(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	for b.Loop() {
		msgs, total, err := s.History(c.ID, "bench", "+15550000007", 2, 50)
		if err != nil || len(msgs) != 50 || total != 10000 {
			b.Fatalf("got %d of %d: %v", len(msgs), total, err)
		}
	}
}

// BenchmarkSendAndAck is the throughput phase of simrelay bench in the
// store: 64 x GOMAXPROCS concurrent senders, each op one send to one of
// 1,000 devices and its phone's ack, both durable, sharing commits. Besides
// time and allocations it reports what the commits wrote per op: bytes of
// dirty pages and write calls (bbolt's TxStats).
func BenchmarkSendAndAck(b *testing.B) {
	s, c := benchStore(b)
	const devices = 1000
	ds := make([]Device, devices)
	for i := range ds {
		ds[i] = Device{Fingerprint: fmt.Sprintf("fp-%d", i), CompanyID: c.ID, Status: DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte(fmt.Sprint("t", i))}
	}
	if err := s.ProvisionDevices(ds); err != nil {
		b.Fatal(err)
	}
	ids := make([]uint64, devices)
	for i := range ds {
		d, err := s.Device(ds[i].Fingerprint)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = d.ID
	}
	var n atomic.Uint64
	before := s.db.Stats().TxStats
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			dev := i % devices
			m := Message{UUID: fmt.Sprintf("u-%d", i), CompanyID: c.ID, Device: ds[dev].Fingerprint, Channel: "sms", Phone: fmt.Sprintf("+1555%07d", i%5000), Text: "Your code is 123456", SIMSlot: "SIM1", Segments: 1, ExpiresAt: time.Now().Add(time.Hour)}
			out, _, err := s.Enqueue(&m, IdempotencyKey{}, time.Now, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := s.Transition(c.ID, ids[dev], out.UUID, MsgSending, "", "", time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	after := s.db.Stats().TxStats
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
	b.ReportMetric(float64(after.GetPageAlloc()-before.GetPageAlloc())/float64(b.N), "pagebytes/op")
	b.ReportMetric(float64(after.GetWrite()-before.GetWrite())/float64(b.N), "writes/op")
}

// BenchmarkAgentMessagesPage reads the newest page of a WhatsApp number that
// holds 1,000,000 messages: the page and the number's total.
func BenchmarkAgentMessagesPage(b *testing.B) {
	s, c := benchStore(b)
	ns, err := s.AnnounceNumbers(c.ID, 1, ChannelNameWhatsApp, []string{"+15550001111"}, time.Now(), 10)
	if err != nil || len(ns) != 1 {
		b.Fatalf("announce: %v (%v)", ns, err)
	}
	n := ns[0]
	const total = 1000000
	at := time.Now().Add(-time.Hour)
	for i := 0; i < total; i += 100000 {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			for j := i; j < i+100000; j++ {
				id, err := tx.Bucket(bucketMessages).NextSequence()
				if err != nil {
					return err
				}
				m := Message{ID: id, UUID: fmt.Sprint("a", j), CompanyID: c.ID, Channel: ChannelNameWhatsApp, NumberID: n.ID, Direction: Outbound, Status: MsgDelivered, Phone: "+15557654321", Text: "x", CreatedAt: at}
				if err := insertAgentMessage(tx, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		msgs, got, err := s.AgentMessages(c.ID, n.ID, 1, 50)
		if err != nil || len(msgs) != 50 || got != total {
			b.Fatalf("got %d of %d: %v", len(msgs), got, err)
		}
	}
}

// BenchmarkAgentDispatch is agent links' dispatch of WhatsApp jobs, 64
// numbers at once (64 links, or one link's numbers, each on its own
// goroutine, each dispatching its share one job after another), each
// commit durable: the read of the number's
// next job, then (HandOut) the record that it goes to the device, then
// the agent's ack. ReadAck is the dispatch without the record, for
// comparison: the record is one more grouped commit per job.
func BenchmarkAgentDispatch(b *testing.B) {
	for _, handOut := range []bool{false, true} {
		name := "ReadAck"
		if handOut {
			name = "ReadHandOutAck"
		}
		b.Run(name, func(b *testing.B) {
			s, c := benchStore(b)
			const numbers = 64
			addrs := make([]string, numbers)
			for i := range addrs {
				addrs[i] = fmt.Sprintf("+1555000%04d", i)
			}
			// One hello announces them all: a hello that leaves a number out lets it go.
			nums, err := s.AnnounceNumbers(c.ID, 1, ChannelNameWhatsApp, addrs, time.Now(), 0)
			if err != nil || len(nums) != numbers {
				b.Fatalf("announce: %v (%v)", nums, err)
			}
			for i := range b.N {
				n := nums[i%numbers]
				m := Message{UUID: fmt.Sprint("d", i), CompanyID: c.ID, Channel: n.Channel, NumberRef: n.PublicID, Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
				if _, _, err := s.EnqueueAgent(&m, IdempotencyKey{}, time.Now, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			var done atomic.Int64
			var wg sync.WaitGroup
			for k := range numbers {
				wg.Add(1)
				go func() { // one number's link: its share of the jobs, one after another
					defer wg.Done()
					n := nums[k]
					var cursor uint64
					for {
						jobs, err := s.AgentPending(c.ID, 1, n.ID, cursor, 1)
						if err != nil {
							b.Error(err)
							return
						}
						if len(jobs) == 0 {
							return
						}
						j := jobs[0]
						cursor = j.ID
						if handOut {
							if ok, err := s.AgentHandOut(c.ID, 1, j.ID); err != nil || !ok {
								b.Errorf("hand out %d: %v (%v)", j.ID, ok, err)
								return
							}
						}
						if _, _, err := s.Transition(c.ID, 1, j.UUID, MsgSending, "", "", time.Now()); err != nil {
							b.Error(err)
							return
						}
						done.Add(1)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if done.Load() != int64(b.N) {
				b.Fatalf("dispatched %d of %d", done.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkHelloWrite is the store's part of a phone's hello: the device
// write of UpdateDeviceWith. sms: a phone whose record says it holds no
// WhatsApp number or iMessage handle (Device.NoNumbers, as a new
// registration's does), which reads nothing more; agent: one that holds
// a number, whose hello also seeks the index of the numbers held. Their
// bytes and allocations a hello are the figures of docs/performance.md
// ("A hello that announces no number").
func BenchmarkHelloWrite(b *testing.B) {
	for _, agent := range []bool{false, true} {
		name := "sms"
		if agent {
			name = "agent"
		}
		b.Run(name, func(b *testing.B) {
			s, c := benchStore(b)
			d, err := s.CompanyDevice(c.ID, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if agent {
				if _, err := s.AnnounceNumbers(c.ID, d.ID, ChannelNameWhatsApp, []string{"+15550001111"}, time.Now(), 0); err != nil {
					b.Fatal(err)
				}
			}
			at := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := s.UpdateDeviceWith(c.ID, d.ID, func(d *Device) ([]DeviceEvent, error) {
					d.LastSeenAt = at.Add(time.Duration(i))
					return nil, nil
				})
				if err != nil || got.NoNumbers == agent {
					b.Fatalf("hello: holds none %v (%v)", got.NoNumbers, err)
				}
			}
		})
	}
}
