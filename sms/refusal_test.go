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
// refusal its code and field, and an error the store does not name passes
// unchanged.
func TestEnqueueRefusal(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := &Service{now: func() time.Time { return now }}
	for _, tt := range []struct {
		err   error
		code  problem.Code
		field string
	}{
		{fmt.Errorf("enqueue: %w", store.ErrPoolGone), problem.NotFound, "pool"},
		{&store.OptOutError{Phone: "+15550001", Index: -1}, problem.RecipientOptedOut, "phone"},
		{&store.OptOutError{Phone: "+15550001", Index: 3}, problem.RecipientOptedOut, "messages[3].phone"},
		{fmt.Errorf("enqueue: %w", store.ErrDeviceGone), problem.NotFound, "device_fingerprint"},
		{fmt.Errorf("enqueue: %w", store.ErrDeviceDisabled), problem.DeviceDisabled, ""},
		{&store.BudgetError{Limit: 1000, Reset: now.Add(time.Hour)}, problem.StorageBudgetExceeded, ""},
	} {
		pe, ok := problem.As(s.enqueueRefusal(tt.err))
		if !ok || pe.Code != tt.code || pe.Field != tt.field {
			t.Errorf("%v: %+v, want %s on %q", tt.err, pe, tt.code, tt.field)
		}
	}
	other := errors.New("disk on fire")
	if err := s.enqueueRefusal(other); err != other {
		t.Errorf("an error the store does not name: %v, want it unchanged", err)
	}
}
