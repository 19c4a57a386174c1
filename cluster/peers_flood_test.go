package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/poll"
)

// A flood of forged "alive" messages (a party that can publish on the bus,
// each message a new name) keeps a node's census at MaxPeers names, and
// the node's answers to newcomers paced (floodForged); a real node that
// comes after the flood's names went stale is counted again.
func TestPeersBoundedUnderAForgedFlood(t *testing.T) {
	t.Parallel()
	buses := floodBuses(t, "victim", "forger", "late")
	victim, forger, late := buses[0], buses[1], buses[2]
	const every = 200 * time.Millisecond
	var clock atomic.Int64 // the census's clock, moved by the test
	clock.Store(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).UnixNano())
	p, err := NewPeers(victim, every, func() time.Time { return time.Unix(0, clock.Load()) })
	if err != nil {
		t.Fatal(err)
	}
	floodForged(t, victim, forger, topicAlive, func(d []byte) bool { return string(d) == "victim" },
		func(i int) []byte { return fmt.Appendf(nil, "forged-%d", i) })
	poll.Until(t, "the census is full", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.seen) >= MaxPeers
	})
	p.mu.Lock()
	n := len(p.seen)
	p.mu.Unlock()
	if n > MaxPeers {
		t.Fatalf("the census holds %d names after %d forged ones, want at most %d", n, forged, MaxPeers)
	}
	// Once the forged names are stale, a real node beating is counted
	// again (forged names still queued when the clock moves take the room
	// of a beat or two, as a flood still going on would).
	poll.Until(t, "a real node heard after the flood is counted", func() bool {
		if live := p.Live(); len(live) == 1 && live[0] == "late" {
			return true
		}
		clock.Add(int64(3*every + time.Millisecond))
		late.Publish(topicAlive, []byte("late"))
		return false
	})
}

// The same flood on the settings subject (each message a new node that
// asks for the others' settings) keeps the settings' map at MaxPeers names
// and the node's answers paced.
func TestSettingsBoundedUnderAForgedFlood(t *testing.T) {
	t.Parallel()
	buses := floodBuses(t, "victim", "forger")
	victim, forger := buses[0], buses[1]
	s, err := NewSettings(victim, map[string]string{"rate-general": "100/1m0s"}, time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	floodForged(t, victim, forger, topicSettings, func(d []byte) bool { return strings.Contains(string(d), `"node":"victim"`) },
		func(i int) []byte {
			return fmt.Appendf(nil, `{"node":"forged-%d","settings":{"rate-general":"1/1m0s"},"ask":true}`, i)
		})
	s.mu.Lock()
	n := len(s.others)
	s.mu.Unlock()
	if n > MaxPeers {
		t.Fatalf("the settings hold %d nodes after %d forged ones, want at most %d", n, forged, MaxPeers)
	}
}

// floodForged publishes forged messages (msg(0) to msg(forged-1)) on topic
// from forger, waits until victim's bus has delivered what it will of them
// (the bus may drop part of a flood: its handlers' queues are bounded),
// and checks that victim answered the newcomers paced (pacedReply): the
// first at once, the rest together a spacing later, so at most one answer
// per replyEvery of the flood, not one per forged name. isVictim tells the
// victim's answers among the topic's messages.
func floodForged(t *testing.T, victim, forger *Bus, topic string, isVictim func([]byte) bool, msg func(i int) []byte) {
	t.Helper()
	var answers, delivered atomic.Int64
	if err := forger.Subscribe(topic, func(m Message) {
		if isVictim(m.Data) {
			answers.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := victim.Subscribe(topic, func(Message) { delivered.Add(1) }); err != nil {
		t.Fatal(err)
	}
	// The server has every subscription before the flood (a SUB still on
	// its way misses what is published meanwhile).
	for _, b := range []*Bus{victim, forger} {
		if err := b.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for i := range forged {
		forger.Publish(topic, msg(i))
	}
	last := int64(-1)
	poll.Until(t, "the victim's bus delivers the flood", func() bool {
		d := delivered.Load()
		settled := d == last && d > MaxPeers
		last = d
		return settled
	})
	poll.Until(t, "the newcomers are answered", func() bool { return answers.Load() >= 2 })
	took := time.Since(start)
	if got, most := answers.Load(), 2+int64(took/replyEvery); got > most {
		t.Errorf("the victim answered %d times for %d forged newcomers in %s, want at most %d (one per %s)", got, forged, took.Round(time.Millisecond), most, replyEvery)
	}
}

// forged is the size of a forged flood.
const forged = 5000

// floodBuses joins a new bus as each of names, ready to publish.
func floodBuses(t *testing.T, names ...string) []*Bus {
	t.Helper()
	url := natstest.Start(t)
	ctx := context.Background()
	var out []*Bus
	for _, name := range names {
		b, err := Connect(ctx, Config{URL: url, Node: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
