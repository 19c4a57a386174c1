package sms

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// A single send and a bulk one answer the store's refusals alike: each
// refusal its code and field (and, for a spent budget or plan, its
// Retry-After in seconds), and an error the store does not name passes
// unchanged.
func TestEnqueueRefusal(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := &Service{now: func() time.Time { return now }}
	for _, tt := range []struct {
		err   error
		code  problem.Code
		field string
		retry int // 0: none
	}{
		{fmt.Errorf("enqueue: %w", store.ErrPoolGone), problem.NotFound, "pool", 0},
		{&store.OptOutError{Phone: "+15550001", Index: -1}, problem.RecipientOptedOut, "phone", 0},
		{&store.OptOutError{Phone: "+15550001", Index: 3}, problem.RecipientOptedOut, "messages[3].phone", 0},
		{fmt.Errorf("enqueue: %w", store.ErrDeviceGone), problem.NotFound, "device_fingerprint", 0},
		{fmt.Errorf("enqueue: %w", store.ErrDeviceDisabled), problem.DeviceDisabled, "", 0},
		{&store.BudgetError{Limit: 1000, Reset: now.Add(time.Hour)}, problem.StorageBudgetExceeded, "", 3600},
		// The plan's messages used up: a single send, and a bulk one that
		// does not fit in what is left, until the period ends (a second
		// and a half away, rounded up).
		{fmt.Errorf("enqueue: %w", &store.PlanLimitError{What: store.LimitMessages, Limit: 100, PeriodEnd: now.Add(1500 * time.Millisecond), Used: 100, Asked: 1}), problem.PlanLimitReached, "", 2},
		{&store.PlanLimitError{What: store.LimitMessages, Limit: 100, PeriodEnd: now.Add(time.Hour), Used: 98, Asked: 5}, problem.PlanLimitReached, "", 3600},
	} {
		pe, ok := problem.As(s.enqueueRefusal(tt.err))
		if !ok || pe.Code != tt.code || pe.Field != tt.field || pe.RetryAfter != tt.retry {
			t.Errorf("%v: %+v, want %s on %q, Retry-After %d", tt.err, pe, tt.code, tt.field, tt.retry)
		}
	}
	other := errors.New("disk on fire")
	if err := s.enqueueRefusal(other); err != other {
		t.Errorf("an error the store does not name: %v, want it unchanged", err)
	}
}
