package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testclock"
)

// takeAndClear journals n received messages named prefix-0... and clears
// them at the source at now, as the agent does once the server stored them.
func takeAndClear(t *testing.T, j *Journal, prefix string, n int, now time.Time) {
	t.Helper()
	msgs := make([]proto.Inbound, n)
	keys := make([]string, n)
	refs := make([][]string, n)
	files := make([][]spooled, n)
	for i := range msgs {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
		msgs[i] = proto.Inbound{ClientID: "s1:" + keys[i], Channel: proto.ChannelSMS, From: "+15557654321", Message: "hi"}
	}
	if _, err := j.takeInbound(msgs, keys, refs, files, "", ""); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if _, _, err := j.ackInbound(m.ClientID, false); err != nil {
			t.Fatal(err)
		}
		if err := j.forgetInbound(m.ClientID, now); err != nil {
			t.Fatal(err)
		}
	}
}

func inboundIDCount(t *testing.T, j *Journal) int {
	t.Helper()
	n := 0
	if err := j.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketInboundIDs).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// An agent that receives every day keeps the ids of the messages cleared
// in the last retention period and no more: the bucket of known ids, and
// the file, stop growing.
func TestClearedInboundIDsStayBounded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.db.NoSync = true // a month of messages, one commit each: the test is about what the file holds, not about fsync
	const perDay, keep = 100, 3 * 24 * time.Hour
	clk := testclock.New(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	var sizeAt10 int64
	for day := range 30 {
		takeAndClear(t, j, fmt.Sprintf("d%d", day), perDay, clk.Now())
		// 7 ids to a commit: a day's prune takes many.
		if n, err := j.pruneInboundIDsBy(clk.Now(), keep, 7); err != nil || (day >= 3 && n != perDay) {
			t.Fatalf("day %d: pruned %d, %v; want the %d of 3 days ago", day, n, err, perDay)
		}
		if n := inboundIDCount(t, j); n > 3*perDay {
			t.Fatalf("day %d: %d ids known, want at most the last 3 days' %d", day, n, 3*perDay)
		}
		if day == 10 {
			sizeAt10 = fileSize(t, path)
		}
		clk.Advance(24 * time.Hour)
	}
	if s := fileSize(t, path); s > sizeAt10 {
		t.Fatalf("the journal grew from %d bytes on day 10 to %d on day 30", sizeAt10, s)
	}
	// The ids of the last days are still known: those messages, read again
	// at the source, are not forwarded twice.
	if seen, err := j.seenInbound("s1:d29-0"); err != nil || seen != SeenCleared {
		t.Fatalf("a message cleared today: %v %v, want SeenCleared", seen, err)
	}
	if seen, err := j.seenInbound("s1:d20-0"); err != nil || seen != SeenNew {
		t.Fatalf("a message cleared 9 days ago: %v %v, want forgotten", seen, err)
	}
}

// A message the journal still holds (not yet acknowledged by the server,
// or not yet cleared at the source) keeps its id whatever its age; a
// cleared id in the format of an earlier release (the bare seq, without
// the time it was cleared) is kept a full retention period from the first
// prune that finds it; one of this release goes keep after its clear.
func TestPruneKeepsHeldIDsAndDatesOldOnes(t *testing.T) {
	t.Parallel()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const keep = 7 * 24 * time.Hour
	clk := testclock.New(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	if _, err := j.takeInbound([]proto.Inbound{{ClientID: "s1:held", Channel: proto.ChannelSMS, From: "+15557654321", Message: "hi"}},
		[]string{"held"}, [][]string{nil}, [][]spooled{nil}, "", ""); err != nil {
		t.Fatal(err)
	}
	takeAndClear(t, j, "old", 1, clk.Now())
	takeAndClear(t, j, "new", 1, clk.Now())
	// "old-0" as a journal of an earlier release holds it: the bare seq.
	if err := j.db.Update(func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketInboundIDs)
		seq, _ := inboundSeq(ids.Get([]byte("s1:old-0")))
		return ids.Put([]byte("s1:old-0"), append([]byte(nil), seq...))
	}); err != nil {
		t.Fatal(err)
	}
	if seen, err := j.seenInbound("s1:old-0"); err != nil || seen != SeenCleared {
		t.Fatalf("an id of the earlier format: %v %v, want SeenCleared", seen, err)
	}
	clk.Advance(keep / 2)
	if n, err := j.pruneInboundIDs(clk.Now(), keep); err != nil || n != 0 {
		t.Fatalf("prune half a period after the clear: %d %v, want none", n, err)
	}
	clk.Advance(keep / 2)
	if n, err := j.pruneInboundIDs(clk.Now(), keep); err != nil || n != 1 {
		t.Fatalf("prune a period after the clear: %d %v, want 1", n, err)
	}
	want := map[string]Seen{"s1:held": SeenHeld, "s1:old-0": SeenCleared, "s1:new-0": SeenNew}
	for id, w := range want {
		if got, err := j.seenInbound(id); err != nil || got != w {
			t.Errorf("%s: %v %v, want %v", id, got, err, w)
		}
	}
	clk.Advance(keep / 2)
	if n, err := j.pruneInboundIDs(clk.Now(), keep); err != nil || n != 1 {
		t.Fatalf("prune a period after the earlier format's id was first seen: %d %v, want 1", n, err)
	}
	if got, _ := j.seenInbound("s1:old-0"); got != SeenNew {
		t.Fatalf("the earlier format's id: %v, want forgotten", got)
	}
	clk.Advance(100 * keep)
	if _, err := j.pruneInboundIDs(clk.Now(), keep); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.seenInbound("s1:held"); got != SeenHeld {
		t.Fatalf("a held message after 100 periods: %v, want SeenHeld", got)
	}
	// keep <= 0: nothing is forgotten.
	takeAndClear(t, j, "kept", 1, clk.Now())
	clk.Advance(1000 * keep)
	if n, err := j.pruneInboundIDs(clk.Now(), 0); err != nil || n != 0 {
		t.Fatalf("prune with no retention: %d %v, want none", n, err)
	}
}

// keyForgetter is memTransport with a ClearedKeyRetention.
type keyForgetter struct {
	*memTransport
	keep time.Duration
}

func (k keyForgetter) ClearedKeyRetention() time.Duration { return k.keep }

// The running agent's hourly prune forgets the ids of messages cleared
// longer ago than the transport's ClearedKeyRetention, on the agent's
// clock; with a transport that has none, it keeps them for ever.
func TestRunningAgentForgetsClearedIDsPerTransport(t *testing.T) {
	t.Parallel()
	const keep = 45 * 24 * time.Hour
	for _, tc := range []struct {
		name   string
		tr     func(*memTransport) Transport
		forget bool
	}{
		{"with ClearedKeys", func(m *memTransport) Transport { return keyForgetter{m, keep} }, true},
		{"without", func(m *memTransport) Transport { return m }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &fakeHub{t: t}
			h.script = func(_ int, ws *websocket.Conn, frames <-chan proto.Frame) {
				for f := range frames {
					if in, ok := f.(*proto.Inbound); ok {
						write(context.Background(), ws, proto.InboundAck{ClientID: in.ClientID, ID: 7, UUID: "u"})
					}
				}
			}
			mem := &memTransport{inbox: make(chan Received, 1)}
			clk := testclock.New(time.Now())
			a, j, _ := startAgentSet(t, h, tc.tr(mem), filepath.Join(t.TempDir(), "j.db"), func(a *Agent) {
				a.pruneEvery = 10 * time.Millisecond
				a.clock.wall = clk.Now
			})
			mem.inbox <- Received{Key: "m1", Channel: proto.ChannelSMS, From: "+15557654321", Text: "hi", At: time.Now()}
			poll.Until(t, "the message is stored by the server and cleared at the source", func() bool {
				seen, err := j.seenInbound("s1:m1")
				return err == nil && seen == SeenCleared
			})
			a.prune()
			clk.Advance(keep - time.Second)
			a.prune()
			if seen, _ := j.seenInbound("s1:m1"); seen != SeenCleared {
				t.Fatalf("a second short of the retention: %v, want SeenCleared", seen)
			}
			clk.Advance(time.Second)
			if tc.forget {
				poll.Until(t, "the id is forgotten once the retention is past", func() bool {
					seen, err := j.seenInbound("s1:m1")
					return err == nil && seen == SeenNew
				})
				return
			}
			clk.Advance(1000 * keep)
			a.prune()
			if seen, _ := j.seenInbound("s1:m1"); seen != SeenCleared {
				t.Fatalf("a transport without ClearedKeys: %v, want the id kept", seen)
			}
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
