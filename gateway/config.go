package gateway

import (
	"time"

	"github.com/simrelay/simrelay/sms"
)

// Defaults, and why.
const (
	DefaultHelloTimeout = 10 * time.Second // the contract's hello deadline
	// DefaultPingInterval keeps NAT mappings of mobile carriers (often 60-120 s) alive.
	DefaultPingInterval = 45 * time.Second
	// A phone silent for two ping intervals (90 s, the contract's bound) is
	// dropped: a ping waits for its pong until then. DefaultPongTimeout is
	// the least it waits, however late it was sent (the server was busy):
	// a round trip on a poor mobile network, far less than the wait a ping
	// sent on time has (at least 0.8 of the interval).
	DefaultPongTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultQueueLen bounds frames waiting for one phone; a phone that lets
	// this many pile up is too slow and is closed (4008).
	DefaultQueueLen = 64
	// DefaultQueueBytes bounds the same queue in bytes, so that what a phone
	// that never reads can make the server hold is known: a few frames near
	// the 64 KiB frame limit would otherwise fill memory long before the
	// frame count. 256 KiB holds the 64 frames of ordinary traffic (sends
	// of a long SMS are about 7 KB) with room to spare.
	DefaultQueueBytes = 256 << 10
	// DefaultMaxInflight is the contract's window of un-acked sends per link.
	DefaultMaxInflight = 16
	// DefaultFrameRate and DefaultFrameBurst bound what one phone sends
	// unasked (inbound, unknown frames, reports that answer nothing); a burst
	// of inbound SMS after a reconnect fits easily. Answers to the server's
	// own sends are not counted: they are bounded by what it sent.
	DefaultFrameRate  = 50
	DefaultFrameBurst = 200
	// DefaultSendBuffer is the kernel send buffer (SO_SNDBUF) each link's
	// socket asks for, so that a phone that stops reading pins a known part
	// of the server's kernel memory until its write deadline or its queue's
	// overflow ends the link: Linux doubles the size asked for (room for its
	// own bookkeeping), 256 KiB, where its autotuning grows a socket's
	// buffer up to net.ipv4.tcp_wmem's maximum (4 MiB by default) behind a
	// phone that reads nothing. Thousands of such phones would hold
	// gigabytes of the tcp_mem that every connection of the host shares.
	//
	// A healthy phone never waits on it: the bytes a link has in flight are
	// bounded by its window of un-acked sends (16, about 7 KB for a long
	// SMS: 112 KB), which fits, as does the largest frame (64 KiB) whole.
	// On 4G at a 100 ms round trip 128 KiB passes about 1.3 MB/s (10
	// Mbit/s), where a link carries a few KB a second. It is below the
	// 208 KiB to which a stock kernel (net.core.wmem_max) cuts a request.
	// The HTTP API's own connections (downloads, exports) keep autotuning.
	DefaultSendBuffer = 128 << 10
)

// Config tunes the hub.
type Config struct {
	HelloTimeout time.Duration
	// PingInterval is the time between pings (jittered ±20%); a phone
	// silent for twice the interval is dropped.
	PingInterval time.Duration
	// PongTimeout is the least a ping waits for its pong (and the most its
	// write may take).
	PongTimeout  time.Duration
	WriteTimeout time.Duration
	QueueLen     int
	QueueBytes   int // bytes of frames waiting for one phone; one frame always fits an empty queue
	MaxInflight  int
	FrameRate    float64 // unasked frames per second a phone may send on average
	FrameBurst   int
	// SendBuffer is the kernel send buffer (SO_SNDBUF) a link's socket asks
	// for, which also ends the kernel's autotuning of it.
	SendBuffer int
	// JobLife is the longest a job handed to a phone may stay queued
	// (sms.MaxQueuedLife): how long the hub remembers a device's links
	// after they end (forget.go).
	JobLife time.Duration
}

func (c *Config) defaults() {
	orDefault(&c.HelloTimeout, DefaultHelloTimeout)
	orDefault(&c.PingInterval, DefaultPingInterval)
	orDefault(&c.PongTimeout, DefaultPongTimeout)
	orDefault(&c.WriteTimeout, DefaultWriteTimeout)
	orDefault(&c.QueueLen, DefaultQueueLen)
	orDefault(&c.QueueBytes, DefaultQueueBytes)
	orDefault(&c.MaxInflight, DefaultMaxInflight)
	orDefault(&c.FrameRate, DefaultFrameRate)
	orDefault(&c.FrameBurst, DefaultFrameBurst)
	orDefault(&c.SendBuffer, DefaultSendBuffer)
	orDefault(&c.JobLife, sms.MaxQueuedLife(sms.DefaultMessageTTL))
}

// orDefault replaces a zero or negative setting with its default.
func orDefault[T int | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
