package cluster

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLiveQueue is how many live events wait for the bus. Events come
// after commits, a few per send; a thousand covers a burst of several
// hundred sends while the connection is slow, and past it an event is
// dropped: a console tab on another node misses it and shows the change
// when it next loads (the stream's contract, web/events.go), nothing in the
// store is lost.
const DefaultLiveQueue = 1024

// DefaultLiveQueueBytes bounds the bytes of the events waiting too. An
// event is a message as the console shows it, most under a kilobyte, but
// one company's inbound messages of 10,000 characters each written out in
// JSON escapes (\u003c for a <) are some 60 KB: a queue of 1,024 of them
// held 60 MB of the node's memory while the bus's write waited, for every
// company's events. Past this an event is dropped, as past the count.
const DefaultLiveQueueBytes = 8 << 20

// liveTopic begins the topic of a company's live events: "live.<company>".
const liveTopic = "live."

// liveGapCheck is how often Live looks whether the bus reconnected: core
// NATS keeps nothing for a node while it is away, so the tabs of a node
// that came back may have missed events, and onGap makes them reload.
// Once a second adds at most a second to the three the browser waits
// before it reconnects (the stream's "retry: 3000").
const liveGapCheck = time.Second

// Live carries the console's live events between nodes, one topic per
// company. Offer never blocks the committing path that calls it: events
// wait in a bounded queue that one goroutine, owned by Live and ended by
// Close, publishes; on overflow they are dropped and counted. The queue is
// needed because publishing can wait: the NATS client writes to its socket
// under its own lock once its write buffer fills.
type Live struct {
	bus     *Bus
	log     *slog.Logger
	onGap   func()
	queue   chan liveEvent
	dropped atomic.Uint64
	// queued is the bytes of the events in queue, at most maxBytes.
	queued   atomic.Int64
	maxBytes int64
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

type liveEvent struct {
	company uint64
	body    []byte
}

// StartLive subscribes to every company's live events of the other nodes,
// handing each to deliver (on the bus's goroutine for the subscription:
// deliver must not block), and starts the publisher of Offer's queue
// (queue <= 0: DefaultLiveQueue). After the bus reconnected it calls onGap
// (nil: nothing), from the publisher's goroutine: what the other nodes
// published meanwhile never arrives. The subscription ends with the bus.
func StartLive(bus *Bus, queue int, deliver func(company uint64, body []byte) error, onGap func(), log *slog.Logger) (*Live, error) {
	if queue <= 0 {
		queue = DefaultLiveQueue
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onGap == nil {
		onGap = func() {}
	}
	l := &Live{bus: bus, log: log, onGap: onGap, queue: make(chan liveEvent, queue), maxBytes: DefaultLiveQueueBytes, stop: make(chan struct{}), done: make(chan struct{})}
	err := bus.Subscribe(liveTopic+"*", func(m Message) {
		company, err := strconv.ParseUint(strings.TrimPrefix(m.Topic, liveTopic), 10, 64)
		if err == nil {
			err = deliver(company, m.Data)
		}
		if err != nil {
			log.Warn("live event from the bus ignored", "topic", m.Topic, "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("live events: %w", err)
	}
	go l.run()
	return l, nil
}

// Offer queues a company's event for the other nodes. It never blocks:
// with the queue full (DefaultLiveQueue events, or DefaultLiveQueueBytes),
// or after Close, the event is dropped and counted.
func (l *Live) Offer(company uint64, body []byte) {
	select {
	case <-l.stop:
		l.dropped.Add(1)
		return
	default:
	}
	size := int64(len(body))
	if l.queued.Add(size) > l.maxBytes {
		l.queued.Add(-size)
		l.drop()
		return
	}
	select {
	case l.queue <- liveEvent{company, body}:
	default:
		l.queued.Add(-size)
		l.drop()
	}
}

// drop counts an event that never goes to the bus.
func (l *Live) drop() {
	if n := l.dropped.Add(1); n&(n-1) == 0 {
		// 1st, 2nd, 4th, 8th... drop: enough to see it, never a flood.
		l.log.Warn("live events dropped: the bus is slower than the commits", "dropped", n)
	}
}

// Dropped is how many events never went to the bus.
func (l *Live) Dropped() uint64 { return l.dropped.Load() }

// Close stops the publisher after it has handed the events already queued
// to the bus; later Offers are dropped. Close it before the bus.
func (l *Live) Close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

func (l *Live) run() {
	defer close(l.done)
	check := time.NewTicker(liveGapCheck)
	defer check.Stop()
	reconnects := l.bus.nc.Stats().Reconnects
	for {
		select {
		case <-check.C:
			if n := l.bus.nc.Stats().Reconnects; n != reconnects {
				reconnects = n
				l.log.Info("bus reconnected: this node's live views reload, they may have missed events")
				l.onGap()
			}
		case ev := <-l.queue:
			l.publish(ev)
		case <-l.stop:
			for {
				select {
				case ev := <-l.queue:
					l.publish(ev)
				default:
					return
				}
			}
		}
	}
}

func (l *Live) publish(ev liveEvent) {
	l.queued.Add(-int64(len(ev.body)))
	l.bus.Publish(liveTopic+strconv.FormatUint(ev.company, 10), ev.body)
}
