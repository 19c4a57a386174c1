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

// announce tells the watcher of every message of ms, then wakes whoever
// handles them: the link of each device with a queued message (once per
// device) and, if any is scheduled, the scheduler. Messages of other
// statuses (one a release failed) are told and wake nothing.
//
// Every message is told before anything is woken, and the order matters:
// an idle phone's link woken first can take a job at once, and the phone's
// sent and delivered, told from the link's goroutine, could then reach the
// watcher (the console's tabs) before the job's queued, which would arrive
// last and stand as its status. A link woken for a device's first message
// takes the batch's others too, so they are all told before any link.
func (s *Service) announce(ms ...store.Message) {
	for _, m := range ms {
		s.changed(m)
	}
	woken := map[string]bool{}
	scheduled := false
	for _, m := range ms {
		switch {
		case m.Status == store.MsgScheduled:
			scheduled = true
		case m.Status == store.MsgQueued && !woken[m.Device] && s.dispatch != nil:
			woken[m.Device] = true
			s.dispatch.Kick(m.Device, m.DeviceID)
		}
	}
	if scheduled {
		s.sched.Kick()
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
		if !s.releaseDue(ctx) {
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
// of their devices, releaseBatch a commit, until none is left or ctx ends
// (the next start releases the rest); false says the store failed (and it
// is logged).
func (s *Service) releaseDue(ctx context.Context) bool {
	for ctx.Err() == nil {
		msgs, err := s.store.ReleaseDue(s.now(), releaseBatch)
		if err != nil {
			s.log.Error("queue scheduled messages", "err", err)
			return false
		}
		s.announce(msgs...)
		if len(msgs) < releaseBatch {
			return true
		}
	}
	return true
}

// ReleaseDue queues the scheduled messages due by the service's clock now,
// for callers that do not wait for the scheduler (tests with a set clock).
func (s *Service) ReleaseDue() { s.releaseDue(context.Background()) }

// Cancel takes back a scheduled or queued message of the company: it
// becomes canceled and no phone is handed it afterwards. Once a phone has
// taken it (sending or later) it is a 409 conflict; another company's id
// is 404.
func (s *Service) Cancel(_ context.Context, companyID uint64, queueID string) (store.Message, error) {
	m, err := s.store.Cancel(companyID, store.CanonicalUUID(queueID), s.now())
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
