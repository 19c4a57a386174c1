package channel

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Number is a WhatsApp number or iMessage handle as clients see it: the
// stored record, its effective caps and gap now, and its sends today.
type Number struct {
	store.AgentNumber
	// Caps are the caps in force now (the number's own or the channel's,
	// halved during the warm-up); Warmup says whether it is on.
	Caps   pacing.Caps
	Warmup bool
	Gap    pacing.Gap
	// SentToday counts the accepted sends since midnight UTC.
	SentToday int
}

// Devices are the devices the numbers are on, fingerprint to device id (a
// number whose agent device is gone has none): what a list asks the hub's
// presence about, once for all its numbers.
func Devices(list ...Number) map[string]uint64 {
	ids := make(map[string]uint64, len(list))
	for _, n := range list {
		if n.DeviceID != 0 {
			ids[n.Device] = n.DeviceID
		}
	}
	return ids
}

// today is the start of now's UTC day: what SentToday counts from.
func today(now time.Time) time.Time { return now.UTC().Truncate(24 * time.Hour) }

func (s *Service) view(n store.AgentNumber, now time.Time) (Number, error) {
	sent, err := s.store.AgentSendsSince(n.CompanyID, n.ID, today(now))
	if err != nil {
		return Number{}, err
	}
	return s.viewSent(n, now, sent), nil
}

// viewSent is n's view at now, with sent sends today.
func (s *Service) viewSent(n store.AgentNumber, now time.Time, sent int) Number {
	return Number{AgentNumber: n, Caps: s.caps(n, now), Warmup: now.Sub(n.FirstSeen) < s.cfg.Warmup, Gap: s.gap(n), SentToday: sent}
}

// Numbers lists the company's numbers (WhatsApp) or handles (iMessage):
// their records and each one's sends today in one store read, however many
// there are (a company may have 1,000 a channel).
func (s *Service) Numbers(_ context.Context, companyID uint64, channel string) ([]Number, error) {
	now := s.now()
	list, sent, err := s.store.AgentNumbersSentSince(companyID, channel, today(now))
	if err != nil {
		return nil, err
	}
	out := make([]Number, 0, len(list))
	for i, n := range list {
		out = append(out, s.viewSent(n, now, sent[i]))
	}
	return out, nil
}

// Number returns one of the company's numbers by its public id; another
// company's, or another channel's, is not_found.
func (s *Service) Number(_ context.Context, companyID uint64, channel, id string) (Number, error) {
	n, err := s.store.AgentNumber(companyID, channel, id)
	if errors.Is(err, store.ErrNotFound) {
		return Number{}, problem.New(problem.NotFound, "No such "+noun(channel)+".")
	}
	if err != nil {
		return Number{}, err
	}
	return s.view(n, s.now())
}

// Patch changes a number; nil fields stay as they are. A cap of 0, or a
// gap with both ends 0, goes back to the server's default.
type Patch struct {
	Status *string
	Caps   *CapsPatch
	Gap    *GapPatch
}

// CapsPatch sets some of a number's caps.
type CapsPatch struct {
	PerMinute, PerHour, PerDay *int
}

// GapPatch sets a number's gap, in seconds.
type GapPatch struct {
	Min, Max *float64
}

// maxGapSeconds bounds a gap: an hour between two messages is slower than
// any real use, and keeps a typo from parking a number for days.
const maxGapSeconds = 3600

// Update changes a number's status, caps or gap.
func (s *Service) Update(_ context.Context, companyID uint64, channel, id string, p Patch) (Number, error) {
	if p.Status != nil && *p.Status != store.NumberActive && *p.Status != store.NumberPaused {
		return Number{}, problem.Invalid("status", "must be active or paused")
	}
	check := func(field string, v *int) error {
		if v != nil && (*v < 0 || *v > pacing.MaxCap) {
			return problem.Invalid(field, "must be 0 (the server's default) to 65535")
		}
		return nil
	}
	if p.Caps != nil {
		// In the order the API's docs list them, so that a PATCH with two bad
		// caps is always told of the same one.
		for _, f := range []struct {
			field string
			v     *int
		}{{"caps.per_minute", p.Caps.PerMinute}, {"caps.per_hour", p.Caps.PerHour}, {"caps.per_day", p.Caps.PerDay}} {
			if err := check(f.field, f.v); err != nil {
				return Number{}, err
			}
		}
	}
	var gapMin, gapMax time.Duration
	if p.Gap != nil {
		if p.Gap.Min == nil || p.Gap.Max == nil {
			field := "gap_seconds.min"
			if p.Gap.Min != nil {
				field = "gap_seconds.max"
			}
			return Number{}, problem.Invalid(field, "is required: give both ends of the gap (0 and 0 for the server's default)")
		}
		if *p.Gap.Min < 0 || *p.Gap.Min > maxGapSeconds {
			return Number{}, problem.Invalid("gap_seconds.min", "must be 0 to 3600 seconds")
		}
		if *p.Gap.Max < *p.Gap.Min || *p.Gap.Max > maxGapSeconds {
			return Number{}, problem.Invalid("gap_seconds.max", "must be at least gap_seconds.min and at most 3600 seconds")
		}
		gapMin, gapMax = time.Duration(*p.Gap.Min*float64(time.Second)), time.Duration(*p.Gap.Max*float64(time.Second))
	}
	n, err := s.store.UpdateAgentNumber(companyID, channel, id, s.now(), func(n *store.AgentNumber) error {
		if p.Status != nil {
			n.Status = *p.Status
		}
		if p.Caps != nil {
			set := func(dst *int, v *int) {
				if v != nil {
					*dst = *v
				}
			}
			set(&n.Caps.PerMinute, p.Caps.PerMinute)
			set(&n.Caps.PerHour, p.Caps.PerHour)
			set(&n.Caps.PerDay, p.Caps.PerDay)
		}
		if p.Gap != nil {
			n.GapMin, n.GapMax = gapMin, gapMax
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return Number{}, problem.New(problem.NotFound, "No such "+noun(channel)+".")
	}
	if err != nil {
		return Number{}, err
	}
	if n.Status == store.NumberActive && s.dispatch != nil && n.Device != "" {
		if p.Status != nil || p.Gap != nil {
			// Resumed (or set active again): a job whose hand-out the
			// pause refused, passed over by the link, goes now. A new gap
			// may let a job go sooner: a release has the link check its
			// numbers again, where a kick leaves a number it knows waits
			// for its gap (Waits) until the pause it drew ends.
			s.dispatch.Release(n.Device, n.DeviceID)
		} else {
			s.dispatch.Kick(n.Device, n.DeviceID)
		}
	}
	return s.view(n, s.now())
}

// Page is one page of a number's messages.
type Page struct {
	Messages           []store.Message
	Total, Page, Pages int
}

// DefaultPageLimit and MaxPageLimit are /chat/messages' page sizes (the
// specification's default 50, at most 100): the contract pages a number's
// messages as /chat/messages does, so a client's paging code serves both.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 100
)

// Messages returns one page of a number's messages, both directions, newest first.
func (s *Service) Messages(_ context.Context, companyID uint64, channel, id string, page, limit int) (Page, error) {
	if id == "" {
		return Page{}, problem.Invalid(idField(channel), "is required")
	}
	if page < 1 {
		return Page{}, problem.OutOfRange("page", 1, math.MaxInt)
	}
	if limit < 1 || limit > MaxPageLimit {
		return Page{}, problem.OutOfRange("limit", 1, MaxPageLimit)
	}
	// The record alone: its view (the day's sends counted) is not shown here.
	n, err := s.store.AgentNumber(companyID, channel, id)
	if errors.Is(err, store.ErrNotFound) {
		// The id is a query parameter here: name it, as /chat/messages
		// names its device_fingerprint.
		return Page{}, &problem.Error{Code: problem.NotFound, Field: idField(channel), Message: "No such " + noun(channel) + "."}
	}
	if err != nil {
		return Page{}, err
	}
	msgs, total, err := s.store.AgentMessages(companyID, n.ID, page, limit)
	if err != nil {
		return Page{}, err
	}
	return Page{Messages: msgs, Total: total, Page: page, Pages: (total + limit - 1) / limit}, nil
}

// Message returns one of the company's messages of channel by its id (UUID).
func (s *Service) Message(_ context.Context, companyID uint64, channel, id string) (store.Message, error) {
	m, err := s.store.MessageByUUID(companyID, store.CanonicalUUID(id))
	if errors.Is(err, store.ErrNotFound) || (err == nil && m.Channel != channel) {
		return store.Message{}, problem.New(problem.NotFound, "No such message.")
	}
	return m, err
}
