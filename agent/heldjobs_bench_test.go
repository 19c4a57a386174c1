package agent

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// BenchmarkHeldJobs is the journal's read at each link's hello (HeldJobs):
// a busy agent's journal of a day, 5,000 WhatsApp jobs done and reported
// (kept 24 hours past their expiry, DefaultJobRetention) and 20 taken,
// each with a text of 300 bytes. Its time and allocations a hello are the
// figures of docs/performance.md ("An agent job's hand-out record").
func BenchmarkHeldJobs(b *testing.B) {
	j, err := OpenJournal(filepath.Join(b.TempDir(), "j.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	now := time.Now()
	text := strings.Repeat("x", 300)
	if err := j.db.Update(func(tx *bolt.Tx) error {
		for i := range 5020 {
			r := jobRecord{Send: proto.Send{ID: fmt.Sprintf("job-%05d", i), Channel: proto.ChannelWhatsApp, To: "+15551234567", Message: text, From: "+15550001111", ExpiresAt: stamp(now.Add(time.Hour))},
				State: StateDone, TakenAt: now, DoneAt: now, Final: proto.StatusSent, Reported: true}
			if i%251 == 0 {
				r.State, r.DoneAt, r.Final, r.Reported = StateTaken, time.Time{}, "", false
			}
			if err := putJob(tx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ids, ok, err := j.HeldJobs(proto.MaxHelloJobs)
		if err != nil || !ok || len(ids) != 20 {
			b.Fatalf("held %d (%v, %v), want 20", len(ids), ok, err)
		}
	}
}
