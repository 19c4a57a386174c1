package gateway

import (
	"time"

	"golang.org/x/time/rate"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Flood control judges only what a phone sends unasked. Answers to the
// server's own frames cost nothing: an ack or status that frees a place in
// this link's window of sends, or that moves a job of this device a step on
// (queued, sending, sent, delivered or failed: each step happens once per
// job), is bounded by the jobs the server dispatched, and a phone draining a
// backlog sends three of them per job as fast as it can. Everything else is
// charged: the hello, inbound, unknown frame types, reports for unknown ids
// or another device's, refused reports, and repeats that move nothing. The
// hello is taken only when the link's first other charge makes its limiter:
// most links never need one. Pings and pongs
// never reach the reader, and do not count toward that limit; the phone's
// own pings have a bound of their own (pinged).

// PhonePingRate and PhonePingBurst bound the WebSocket pings a phone sends
// (PROTOCOL.md: at most one every 15 s): the server answers each with a
// pong, so without a bound one phone pinging as fast as it could kept a
// core of the server busy answering, unpunished. A phone that pings on
// every reconnect and on its own timer stays far within them.
const (
	PhonePingRate  = 1 // a second, on average
	PhonePingBurst = 10
)

// charge counts one unasked frame against the phone's flood limit, closing
// the link with 4029 once it is over; false means the link is closing.
// The reader charges what it reads; the answerer (answers.go) charges
// reports once their commit says they moved nothing.
func (c *conn) charge() bool {
	c.floodMu.Lock()
	if c.flood == nil {
		// Made at the first charge, not with the link: most phones never
		// send a frame unasked. A new limiter is full, as one made at the
		// hello would still be.
		c.flood = rate.NewLimiter(rate.Limit(c.hub.cfg.FrameRate), c.hub.cfg.FrameBurst)
		if c.helloAt != 0 {
			// The hello's frame, taken as it came: the limiter holds
			// what it would have had it been made then.
			c.flood.AllowN(time.Unix(0, c.helloAt), 1)
		}
	}
	flood := c.flood
	c.floodMu.Unlock()
	if flood.Allow() {
		return true
	}
	c.failFlood()
	return false
}

// pinged takes one of the phone's own pings: true answers it with a pong;
// over PhonePingRate it closes the link with 4029 and answers nothing. The
// library calls it while it reads (the reader's, or the close handshake's).
func (c *conn) pinged() bool {
	c.floodMu.Lock()
	if c.pings == nil {
		c.pings = rate.NewLimiter(PhonePingRate, PhonePingBurst)
	}
	pings := c.pings
	c.floodMu.Unlock()
	if pings.Allow() {
		return true
	}
	c.fail(proto.CloseFlood, "flood", "Too many pings; ping at most every 15 seconds.")
	return false
}

func (c *conn) failFlood() { c.fail(proto.CloseFlood, "flood", "Too many frames; slow down.") }

// answerError queues an error frame refusing a frame the phone sent unasked
// (already charged). The values it repeats from that frame are capped, and
// a queue with no room for it closes the link as flood (4029), not as slow
// (4008): the phone sends bad frames faster than it reads their answers.
func (c *conn) answerError(e proto.Error) bool {
	e.ID, e.ClientID, e.Field = echo(e.ID), echo(e.ClientID), echo(e.Field)
	return c.enqueue(e, proto.CloseFlood)
}

// echo cuts a value from the phone's frame to proto.MaxEchoBytes, on a
// UTF-8 boundary, before it goes back in an error frame.
func echo(s string) string { return proto.CutBytes(s, proto.MaxEchoBytes) }
