package agent

import (
	"context"
	"sync"
	"time"
	"unicode/utf16"
)

// DefaultPerMinute is the agent's own SMS pace, in message parts per
// minute: Android lets one app send about 30 parts a minute before it asks
// the user (PROTOCOL.md 17.4), and 25 keeps a margin for parts other apps
// or a retry add. A modem has no such quota but the carrier may; the same
// default is safe there.
const DefaultPerMinute = 25

// Pacer spaces sends evenly: one part every minute/perMinute, so no
// rolling minute ever holds more than perMinute parts.
type Pacer struct {
	gap  time.Duration
	mu   sync.Mutex
	next time.Time
}

// NewPacer returns a pacer for perMinute parts a minute; 0 or less means
// no pacing (nil).
func NewPacer(perMinute int) *Pacer {
	if perMinute <= 0 {
		return nil
	}
	return &Pacer{gap: time.Minute / time.Duration(perMinute)}
}

// Wait blocks until parts more parts may go, and books them.
func (p *Pacer) Wait(ctx context.Context, parts int) error {
	p.mu.Lock()
	now := time.Now()
	start := p.next
	if start.Before(now) {
		start = now
	}
	p.next = start.Add(time.Duration(max(parts, 1)) * p.gap)
	p.mu.Unlock()
	if d := start.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Segments is how many SMS parts a text needs: 160 GSM-7 characters in one
// part, 153 per part beyond; 70 UTF-16 units in UCS-2, 67 per part beyond.
// A character is never split between two parts, as phones split a long
// text: an escape and its character, or an emoji's surrogate pair, that
// would straddle a part's end go whole into the next part (the server's
// count, sms.Segments, does the same).
func Segments(text string) int {
	gsm := true
	septets := 0
	for _, r := range text {
		if r > 0x7e || (r < 0x20 && r != '\n' && r != '\r') || r == '`' {
			gsm = false
		}
		septets += gsmWidth(r)
	}
	if !gsm {
		return fill(text, len(utf16.Encode([]rune(text))), 70, 67, func(r rune) int { return utf16.RuneLen(r) })
	}
	return fill(text, septets, 160, 153, gsmWidth)
}

// gsmWidth is the septets r takes in GSM-7: two for an escaped character.
func gsmWidth(r rune) int {
	switch r {
	case '[', ']', '{', '}', '\\', '^', '~', '|':
		return 2
	}
	return 1
}

// fill is how many parts text of total units takes: one when it fits in
// single, else parts of multi units filled in order, a character wider
// than the room left in a part starting the next.
func fill(text string, total, single, multi int, width func(rune) int) int {
	if total <= single {
		return 1
	}
	n, room := 1, multi
	for _, r := range text {
		w := width(r)
		if w > room {
			n, room = n+1, multi
		}
		room -= w
	}
	return n
}
