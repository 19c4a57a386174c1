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

// liveTopic begins the topic of a company's live events: "live.<company>"
// for its messages, "live.<company>.device" (deviceTopic after it) for its
// devices' links coming and going. A node subscribed to "live.*" alone
// (one from before the devices' events) hears none of the latter: "*" is
// one token.
const (
	liveTopic   = "live."
	deviceTopic = ".device"
)

// liveGapCheck is how often Live looks whether the bus reconnected: core
// NATS keeps nothing for a node while it is away, so the tabs of a node
// that came back may have missed events, and onGap makes them reload.
// Once a second adds at most a second to the three the browser waits
// before it reconnects (the stream's "retry: 3000").
const liveGapCheck = time.Second

// Live carries the console's live events between nodes, one topic per
// company. Offer never blocks the committing path that calls it: it hands
// the event to the bus's Publish, whose queue (bounded in signals and
// bytes, shared with the node's other signals) one goroutine hands to the
// NATS client in order, so the other nodes hear a node's events in the
// order offered. An event dropped on the way (the bus's queue full, the
// client's reconnection buffer full, the bus closed or closing before it
// was sent) or offered after Close is counted in Dropped; the bus logs its
// drops. A goroutine owned by Live, ended by Close, looks for the bus's
// reconnections (onGap) in the count the bus's reconnect handler keeps,
// never under the client's lock: a reconnection's handshake with a silent
// server holds it for the connect timeout, and Close, which a node's
// shutdown calls, waits for the goroutine.
type Live struct {
	bus     *Bus
	log     *slog.Logger
	onGap   func()
	dropped atomic.Uint64
	looks   atomic.Uint64 // the looks at the bus's reconnections begun
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// StartLive subscribes to every company's live events of the other nodes,
// handing each to deliver (on the bus's goroutine for the subscription:
// deliver must not block). After the bus reconnected it calls onGap (nil:
// nothing), from Live's goroutine: what the other nodes published
// meanwhile never arrives. The subscription ends with the bus.
func StartLive(bus *Bus, deliver func(company uint64, body []byte) error, onGap func(), log *slog.Logger) (*Live, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onGap == nil {
		onGap = func() {}
	}
	l := &Live{bus: bus, log: log, onGap: onGap, stop: make(chan struct{}), done: make(chan struct{})}
	if err := l.subscribe("", "live event", deliver); err != nil {
		return nil, err
	}
	go l.run()
	return l, nil
}

// subscribe hands deliver every company's events on the topics
// "live.<company>"+suffix, logging those it could not take as what.
func (l *Live) subscribe(suffix, what string, deliver func(company uint64, body []byte) error) error {
	err := l.bus.Subscribe(liveTopic+"*"+suffix, func(m Message) {
		id := strings.TrimSuffix(strings.TrimPrefix(m.Topic, liveTopic), suffix)
		company, err := strconv.ParseUint(id, 10, 64)
		if err == nil {
			err = deliver(company, m.Data)
		}
		if err != nil {
			l.log.Warn(what+" from the bus ignored", "topic", m.Topic, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("%ss: %w", what, err)
	}
	return nil
}

// Offer publishes a company's event for the other nodes. It never blocks:
// the event joins the bus's queue, or is dropped and counted (the queue
// full, or after Close).
func (l *Live) Offer(company uint64, body []byte) {
	l.offer(liveTopic+strconv.FormatUint(company, 10), body)
}

// offer is Offer on the topic given.
func (l *Live) offer(topic string, body []byte) {
	select {
	case <-l.stop:
		l.dropped.Add(1)
		return
	default:
	}
	l.bus.publish(topic, body, &l.dropped)
}

// OfferDevice publishes a company's device event (a link came or went) for
// the other nodes, as Offer does a message's: in the same queue, counted in
// Dropped the same way.
func (l *Live) OfferDevice(company uint64, body []byte) {
	l.offer(liveTopic+strconv.FormatUint(company, 10)+deviceTopic, body)
}

// HearDevices subscribes to every company's device events of the other
// nodes (OfferDevice), handing each to deliver as StartLive does messages
// (on the bus's goroutine: deliver must not block). A reconnection of the
// bus calls StartLive's onGap for these too. The subscription ends with
// the bus.
func (l *Live) HearDevices(deliver func(company uint64, body []byte) error) error {
	return l.subscribe(deviceTopic, "live device event", deliver)
}

// Dropped is how many events offered never reached the bus: dropped on
// the way, or offered after Close.
func (l *Live) Dropped() uint64 { return l.dropped.Load() }

// Close stops looking for the bus's reconnections; later Offers are
// dropped. Close it before the bus.
func (l *Live) Close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

func (l *Live) run() {
	defer close(l.done)
	check := time.NewTicker(liveGapCheck)
	defer check.Stop()
	reconnects := l.bus.link.reconnects.Load()
	for {
		select {
		case <-check.C:
			l.looks.Add(1)
			if n := l.bus.link.reconnects.Load(); n != reconnects {
				reconnects = n
				l.log.Info("bus reconnected: this node's live views reload, they may have missed events")
				l.onGap()
			}
		case <-l.stop:
			return
		}
	}
}
