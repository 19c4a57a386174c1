package cluster

import (
	"context"
	"sync/atomic"
	"time"
)

// ConnectPingingEvery is Connect with the client's pings every pings
// instead of pingEvery, maxPingsOut unchanged: a test of what the pings
// notice, without waiting out the production bound of 15 s.
func ConnectPingingEvery(ctx context.Context, cfg Config, pings time.Duration) (*Bus, error) {
	return connect(ctx, cfg, pings)
}

// PingBound is how long a silent bus goes unnoticed at most: the client
// counts the connection lost when maxPingsOut pings wait unanswered, the
// first sent up to a ping interval after the bus went silent.
func PingBound(pings time.Duration) time.Duration { return time.Duration(maxPingsOut+1) * pings }

// ProductionPings is the ping interval Connect gives the client.
const ProductionPings = pingEvery

// QueueSize is how many signals wait for the bus's sender at most.
const QueueSize = queueSize

// Waiting is how many signals (and marks) wait in the queue for the bus's
// sender.
func (b *Bus) Waiting() int { return len(b.out) }

// PublishCounted is Publish, adding one to tally when the signal is
// dropped, as Live counts its events.
func (b *Bus) PublishCounted(topic string, data []byte, tally *atomic.Uint64) {
	b.publish(topic, data, tally)
}

// ConnectedAfter is what Connected says once the client's handlers ran in
// the order given, each "connect", "disconnect", "reconnect" or "close".
func ConnectedAfter(handlers ...string) bool {
	l := new(linkState)
	for _, h := range handlers {
		switch h {
		case "connect":
			l.connected()
		case "reconnect":
			l.reconnected()
		case "disconnect", "close":
			l.lost()
		default:
			panic("no handler " + h)
		}
	}
	return l.up.Load()
}

// Looks is how many looks at the bus's reconnections Live's goroutine has
// begun.
func (l *Live) Looks() uint64 { return l.looks.Load() }
