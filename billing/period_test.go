package billing

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// In Stripe mode the period is the one Stripe sent; past its end, until the
// renewal event arrives, the next periods follow on from it.
func TestStripePeriodRollsOnFromTheLastOne(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{Provider: (*Stripe)(nil)}}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	sub := store.Subscription{PeriodStart: day(2026, 11, 20), PeriodEnd: day(2026, 12, 20)}
	for _, c := range []struct {
		now      time.Time
		from, to time.Time
	}{
		{day(2026, 11, 25), day(2026, 11, 20), day(2026, 12, 20)},
		{day(2026, 12, 20), day(2026, 12, 20), day(2027, 1, 20)},
		{day(2027, 2, 1), day(2027, 1, 20), day(2027, 2, 20)},
	} {
		from, to := s.period(sub, c.now)
		if !from.Equal(c.from) || !to.Equal(c.to) {
			t.Errorf("at %s: got %s to %s, want %s to %s", c.now.Format(time.DateOnly), from.Format(time.DateOnly), to.Format(time.DateOnly), c.from.Format(time.DateOnly), c.to.Format(time.DateOnly))
		}
	}
	// Self-hosted: the calendar month.
	self := &Service{}
	if from, to := self.period(sub, day(2026, 11, 25)); !from.Equal(day(2026, 11, 1)) || !to.Equal(day(2026, 12, 1)) {
		t.Errorf("self-hosted: got %s to %s, want the calendar month", from, to)
	}
}
