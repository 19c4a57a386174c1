package channel

import (
	"fmt"
	"time"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// Pacing is one channel's governor settings: the rolling caps of a number
// past its warm-up (halved during it), and the gap between dispatches.
type Pacing struct {
	Caps pacing.Caps
	Gap  pacing.Gap
}

// Config tunes the service; zero fields take the defaults of
// pacing (contract section 10, "Pacing defaults"; docs/pacing.md says why),
// but for an Exact config's.
type Config struct {
	WhatsApp Pacing
	IMessage Pacing
	// Warmup is how long a new number's caps stay halved.
	Warmup time.Duration
	// MessageTTL is how long a send may wait for its agent (the SMS TTL).
	MessageTTL time.Duration
	// Shared says other nodes send through the same store (a cluster): a
	// number's caps are then counted from the sends the store holds, under
	// the number's row lock, at every send (pacing.Check), not from this
	// process's memory, which would miss the other nodes' sends. The gap
	// between dispatches stays in memory: only the node holding the
	// number's agent link dispatches, and a link that moves starts from the
	// store's last dispatch (Governor.Dispatch's lastTaken).
	Shared bool
	// Exact says every field is meant as given, zeros included: a cap of 0
	// is no cap, a gap of 0 to 0 no gap, a Warmup of 0 none, and a
	// MessageTTL of 0 gives a send no time to wait for its agent.
	// Otherwise a zero field takes its default. simrelay serve sets it:
	// its flags start at the defaults and take 0s as "none" for the gap
	// and the warm-up (docs/pacing.md), and it refuses the other zeros
	// itself, a cap below 1 and a TTL under a minute, before New sees them.
	Exact bool
}

// Limits of the input, and why.
const (
	// MaxContentChars is WhatsApp's own limit of a text message.
	MaxContentChars = 4096
	// MaxMediaURL is what browsers and most proxies take.
	MaxMediaURL = 2048
	// MaxAnnounced bounds the numbers (and the handles) one hello may
	// announce: far more than one phone or Mac holds, and a bound on what
	// one agent can make the server store.
	MaxAnnounced = 20
	// MaxMediaPerMessage bounds the files one inbound message names
	// (media.MaxPerMessage): WhatsApp sends one per message, iMessage a few.
	MaxMediaPerMessage = 10
	// MaxNumbersPerCompany bounds the numbers (and, apart, the handles) one
	// company's agents may announce over time, so that an agent announcing
	// new numbers on every reconnect cannot grow the store and the
	// governor's memory without end; far more than a company runs.
	MaxNumbersPerCompany = 1000
	// DefaultMessageTTL is the SMS TTL: 24 h.
	DefaultMessageTTL = 24 * time.Hour
	// maxIdempotencyKey bounds stored keys, as for SMS.
	maxIdempotencyKey = 255
)

// Defaults fills zero fields with the defaults, but for an Exact config,
// whose zeros are meant.
func (c *Config) Defaults() {
	if c.Exact {
		return
	}
	fill := func(p *Pacing, caps pacing.Caps, gap pacing.Gap) {
		if p.Caps.PerMinute <= 0 {
			p.Caps.PerMinute = caps.PerMinute
		}
		if p.Caps.PerHour <= 0 {
			p.Caps.PerHour = caps.PerHour
		}
		if p.Caps.PerDay <= 0 {
			p.Caps.PerDay = caps.PerDay
		}
		if p.Gap.Min <= 0 && p.Gap.Max <= 0 {
			p.Gap = gap
		}
	}
	fill(&c.WhatsApp, pacing.Caps{PerMinute: pacing.DefaultWhatsAppPerMinute, PerHour: pacing.DefaultWhatsAppPerHour, PerDay: pacing.DefaultWhatsAppPerDay},
		pacing.Gap{Min: pacing.DefaultWhatsAppGapMin, Max: pacing.DefaultWhatsAppGapMax})
	fill(&c.IMessage, pacing.Caps{PerMinute: pacing.DefaultIMessagePerMinute, PerHour: pacing.DefaultIMessagePerHour, PerDay: pacing.DefaultIMessagePerDay},
		pacing.Gap{Min: pacing.DefaultIMessageGapMin, Max: pacing.DefaultIMessageGapMax})
	if c.Warmup <= 0 {
		c.Warmup = pacing.DefaultWarmup
	}
	if c.MessageTTL <= 0 {
		c.MessageTTL = DefaultMessageTTL
	}
}

// Validate refuses settings the governor cannot keep. It reads c as New
// does, after Defaults: a cap still 0 there, which only an Exact config
// keeps, is no cap, and passes.
func (c Config) Validate() error {
	for _, ch := range []struct {
		name string
		p    Pacing
	}{{"whatsapp", c.WhatsApp}, {"imessage", c.IMessage}} {
		p := ch.p
		for _, v := range []int{p.Caps.PerMinute, p.Caps.PerHour, p.Caps.PerDay} {
			if v < 0 || v > pacing.MaxCap {
				return fmt.Errorf("channel: %s caps must be 0 (no cap) to %d", ch.name, pacing.MaxCap)
			}
		}
		if p.Gap.Min < 0 || p.Gap.Max < p.Gap.Min {
			return fmt.Errorf("channel: %s gap: the minimum %s must be 0 or more and at most the maximum %s", ch.name, p.Gap.Min, p.Gap.Max)
		}
	}
	return nil
}

func (c Config) pacing(channel string) Pacing {
	if channel == store.ChannelNameIMessage {
		return c.IMessage
	}
	return c.WhatsApp
}
