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
// the node's answers to newcomers paced (pacedReply), not one per forged name; a real
// node that comes after the flood's names went stale is counted again.
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
	var answers atomic.Int64
	if err := forger.Subscribe(topicAlive, func(m Message) {
		if string(m.Data) == "victim" {
			answers.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	var delivered atomic.Int64
	if err := victim.Subscribe(topicAlive, func(Message) { delivered.Add(1) }); err != nil {
		t.Fatal(err)
	}
	// The server has every subscription before the flood (a SUB still on
	// its way misses what is published meanwhile).
	for _, b := range []*Bus{victim, forger} {
		if err := b.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	const forged = 5000
	start := time.Now()
	for i := range forged {
		forger.Publish(topicAlive, fmt.Appendf(nil, "forged-%d", i))
	}
	forger.Publish(topicAlive, []byte("last-forged"))
	// The bus may drop some of a flood (its handlers' queues are bounded):
	// wait until what it delivers has stopped growing.
	last := int64(-1)
	poll.Until(t, "the victim's bus delivers the flood", func() bool {
		d := delivered.Load()
		settled := d == last && d > MaxPeers
		last = d
		return settled
	})
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
	// The first forged newcomer is answered at once and the rest together
	// a spacing later (pacedReply): two answers, not one per name.
	poll.Until(t, "the newcomers are answered", func() bool { return answers.Load() >= 2 })
	took := time.Since(start)
	if got, most := answers.Load(), 2+int64(took/replyEvery); got > most {
		t.Errorf("the victim answered %d times for %d forged newcomers in %s, want at most %d (one per %s)", got, forged, took.Round(time.Millisecond), most, replyEvery)
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
	var answers, delivered atomic.Int64
	if err := forger.Subscribe(topicSettings, func(m Message) {
		if strings.Contains(string(m.Data), `"node":"victim"`) {
			answers.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := victim.Subscribe(topicSettings, func(Message) { delivered.Add(1) }); err != nil {
		t.Fatal(err)
	}
	// The server has every subscription before the flood (a SUB still on
	// its way misses what is published meanwhile).
	for _, b := range []*Bus{victim, forger} {
		if err := b.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	const forged = 5000
	start := time.Now()
	for i := range forged {
		forger.Publish(topicSettings, fmt.Appendf(nil, `{"node":"forged-%d","settings":{"rate-general":"1/1m0s"},"ask":true}`, i))
	}
	last := int64(-1)
	poll.Until(t, "the victim's bus delivers the flood", func() bool {
		d := delivered.Load()
		settled := d == last && d > MaxPeers
		last = d
		return settled
	})
	s.mu.Lock()
	n := len(s.others)
	s.mu.Unlock()
	if n > MaxPeers {
		t.Fatalf("the settings hold %d nodes after %d forged ones, want at most %d", n, forged, MaxPeers)
	}
	poll.Until(t, "the newcomers are answered", func() bool { return answers.Load() >= 2 })
	took := time.Since(start)
	if got, most := answers.Load(), 2+int64(took/replyEvery); got > most {
		t.Errorf("the victim answered %d times for %d forged asks in %s, want at most %d", got, forged, took.Round(time.Millisecond), most)
	}
}

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
