package sms

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Scheduled sends and cancels.

// MaxScheduleAhead is how far ahead send_at may be: a month covers every
// campaign calendar we were asked about, and bounds how long a scheduled
// message holds its place (and its plan credit) in the store.
const MaxScheduleAhead = 30 * 24 * time.Hour

// releaseBatch bounds the messages one scheduler step queues in one commit.
const releaseBatch = 1000

// parseSendAt reads an optional send_at: RFC 3339, in the future, at most
// MaxScheduleAhead ahead. Empty means send now (the zero time).
func parseSendAt(v, field string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := ParseTime(v)
	if err != nil {
		return time.Time{}, problem.Invalid(field, "must be an RFC 3339 time such as 2026-11-22T10:04:05.123Z")
	}
	switch {
	case !t.After(now):
		return time.Time{}, problem.Invalid(field, "must be in the future; leave it out to send now")
	case t.Sub(now) > MaxScheduleAhead:
		return time.Time{}, problem.Invalid(field, "must be at most 30 days ahead")
	}
	return t.UTC(), nil
}

// ttlStart is when a message's time to live starts: at its send_at when
// scheduled, otherwise now.
func ttlStart(now, sendAt time.Time) time.Time {
	if sendAt.IsZero() {
		return now
	}
	return sendAt
}

// optedOut is the answer to a send to an opted-out recipient.
func optedOut(err error) error {
	var oe *store.OptOutError
	field := "phone"
	if errors.As(err, &oe) && oe.Index >= 0 {
		field = fmt.Sprintf("messages[%d].phone", oe.Index)
	}
	return &problem.Error{Code: problem.RecipientOptedOut, Field: field,
		Message: "The recipient opted out of messages from this company (it answered STOP, or was added to the list)."}
}

// queued wakes whoever handles a new message: the device's link for a
// queued one, the scheduler for a scheduled one.
func (s *Service) queued(m store.Message) {
	if m.Status == store.MsgScheduled {
		s.sched.Kick()
		return
	}
	if s.dispatch != nil {
		s.dispatch.Kick(m.Device)
	}
}

// runScheduler queues scheduled messages at their send_at until ctx ends.
// It sleeps until the earliest send_at in the store's due-time index, or
// until a new scheduled message wakes it to read that index again, so a
// restart resumes from the index and nothing scans the messages. On a
// cluster it also wakes every cfg.SchedulePoll, for messages scheduled on
// other nodes.
func (s *Service) runScheduler(ctx context.Context) {
	for ctx.Err() == nil {
		var until time.Time // zero: nothing scheduled, sleep until woken
		if !s.releaseDue() {
			until = s.now().Add(expireEvery) // a failing store is tried again later, not in a tight loop
		} else if at, ok, err := s.store.NextDue(); err != nil {
			s.log.Error("scheduler: read the next scheduled message", "err", err)
			until = s.now().Add(expireEvery)
		} else if ok {
			until = at
		}
		if p := s.cfg.SchedulePoll; p > 0 {
			if poll := s.now().Add(p); until.IsZero() || poll.Before(until) {
				until = poll
			}
		}
		s.sched.Wait(ctx, until, s.now)
	}
}

// releaseDue queues every scheduled message that is due and wakes the links
// of their devices; false says the store failed (and it is logged).
func (s *Service) releaseDue() bool {
	for {
		msgs, err := s.store.ReleaseDue(s.now(), releaseBatch)
		if err != nil {
			s.log.Error("queue scheduled messages", "err", err)
			return false
		}
		// Every message is told before any link is woken (Watcher): a
		// link woken for the batch's first message of its device takes
		// the others too.
		for _, m := range msgs {
			s.changed(m)
		}
		kicked := map[string]bool{}
		for _, m := range msgs {
			if m.Status == store.MsgQueued && !kicked[m.Device] && s.dispatch != nil {
				kicked[m.Device] = true
				s.dispatch.Kick(m.Device)
			}
		}
		if len(msgs) < releaseBatch {
			return true
		}
	}
}

// ReleaseDue queues the scheduled messages due by the service's clock now,
// for callers that do not wait for the scheduler (tests with a set clock).
func (s *Service) ReleaseDue() { s.releaseDue() }

// Cancel takes back a scheduled or queued message of the company: it
// becomes canceled and no phone is handed it afterwards. Once a phone has
// taken it (sending or later) it is a 409 conflict; another company's id
// is 404.
func (s *Service) Cancel(_ context.Context, companyID uint64, queueID string) (store.Message, error) {
	m, err := s.store.Cancel(companyID, queueID, s.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return m, problem.New(problem.NotFound, "No queued message with this id.")
	case errors.Is(err, store.ErrNotCancelable):
		return m, problem.New(problem.Conflict, "The message is "+m.Status+": only a scheduled or queued message can be canceled.")
	case err == nil:
		s.changed(m)
	}
	return m, err
}
