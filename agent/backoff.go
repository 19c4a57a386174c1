package agent

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

// Defaults of PROTOCOL.md section 14.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	DefaultStableAfter = time.Minute
	// DefaultProbeEvery is how often a disabled or deleted device probes
	// the server (section 13, close 4503 and HTTP 403): at most every 15 min.
	DefaultProbeEvery = 15 * time.Minute
	replacedLimit     = 3
	replacedWindow    = 10 * time.Minute
)

// FatalError ends Run: the agent must not reconnect until its user acts.
type FatalError struct{ Reason string }

func (e *FatalError) Error() string { return e.Reason }

// closedError is a close frame with a do-not-reconnect code (4500-4999).
type closedError struct {
	code   int
	reason string
}

func (e *closedError) Error() string { return fmt.Sprintf("closed %d %s", e.code, e.reason) }

func closeReason(err error) string {
	var cl *closedError
	if errors.As(err, &cl) {
		return cl.reason
	}
	return ""
}

func closeCode(err error) int {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return int(ce.Code)
	}
	var cl *closedError
	if errors.As(err, &cl) {
		return cl.code
	}
	return 0
}

// backoff is the reconnect schedule of PROTOCOL.md section 14: full
// jitter, a quick return after 4012, a short wait that never grows while
// the server's database does not answer (1013, 503 unavailable),
// Retry-After on 429 and other 503s, floors
// after 4008, 4029 and 4009, a stop after the third 4009 in ten minutes,
// and probes every 15 minutes for a disabled or deleted device. The fixed
// waits of the section are in units of base (1 s by default).
type backoff struct {
	base, max, stable, probe time.Duration
	attempt                  int
	replaced                 []time.Time
}

// next returns how long to wait after a link that ended with err and was
// up for upFor (0 when it was never welcomed), or a *FatalError.
func (b *backoff) next(err error, upFor time.Duration, now time.Time) (time.Duration, error) {
	if upFor >= b.stable {
		b.attempt = 0
	}
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.Status {
		case http.StatusUnauthorized:
			return 0, &FatalError{Reason: "the server refused the device token (HTTP 401: the device was deleted or paired again elsewhere): pair this agent again"}
		case http.StatusForbidden:
			return b.probe, nil
		}
	}
	code := closeCode(err)
	switch code {
	case proto.CloseBadToken:
		return 0, &FatalError{Reason: "the device token was revoked (close 4501: the device was paired again): pair this agent again"}
	case proto.CloseUnsupportedVer:
		return 0, &FatalError{Reason: "the server does not speak this agent's protocol version (close 4510): update simrelay-agent"}
	case proto.CloseDeviceGone:
		return b.probe, nil
	case proto.CloseReplaced:
		b.replaced = append(b.replaced, now)
		kept := b.replaced[:0]
		for _, t := range b.replaced {
			if now.Sub(t) <= replacedWindow {
				kept = append(kept, t)
			}
		}
		b.replaced = kept
		if len(kept) >= replacedLimit {
			return 0, &FatalError{Reason: "another client uses this device token (replaced 3 times within 10 minutes, close 4009): stop the other copy or pair again"}
		}
	default:
		if !proto.ShouldReconnect(code) { // a 4500-4999 code this agent does not know
			return 0, &FatalError{Reason: fmt.Sprintf("the server closed the link with %d (%s), a code that means: do not reconnect until the user acts; check the server's log and restart the agent", code, closeReason(err))}
		}
	}
	if client.TryAgainSoon(err) {
		// The server's database does not answer (close 1013, or 503
		// unavailable): back within seconds of its return, the count
		// left as it was; a --reconnect-max under the base is the longest
		// wait here too.
		return jitter(min(b.base, b.max), min(client.SoonUnits*b.base, b.max)), nil
	}
	ceiling := b.max
	if b.attempt < 30 {
		ceiling = min(b.base<<b.attempt, b.max)
	}
	wait := jitter(0, ceiling)
	b.attempt++
	switch code {
	case proto.CloseRestarting:
		b.attempt = 0
		return jitter(b.base, 5*b.base), nil
	case proto.CloseTooSlow, proto.CloseFlood:
		wait = max(wait, 10*b.base)
	case proto.CloseReplaced:
		wait = max(wait, jitter(30*b.base, 60*b.base))
	}
	if apiErr != nil && apiErr.RetryAfter > 0 {
		wait += apiErr.RetryAfter
	}
	return wait, nil
}

func jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}
