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

// A yearly period's months start on the period's day of the month, or on
// a month's last day when it has none, as Stripe's months do: a year holds
// twelve of them. Adding a month to the one before drifted (31 January, 3
// March, 3 April ...), and a year from 31 August had thirteen allowances.
func TestYearlyPeriodHasTwelveMonths(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{Provider: (*Stripe)(nil)}}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, start := range []time.Time{day(2026, 8, 31), day(2027, 1, 31), day(2026, 9, 15), day(2027, 2, 28)} {
		sub := store.Subscription{PeriodStart: start, PeriodEnd: start.AddDate(1, 0, 0)}
		var starts []time.Time
		for now := start; now.Before(sub.PeriodEnd); now = now.Add(24 * time.Hour) {
			from, to := s.window(sub, now)
			if now.Before(from) || !now.Before(to) {
				t.Fatalf("from %s at %s: window %s to %s", start.Format(time.DateOnly), now.Format(time.DateOnly), from.Format(time.DateOnly), to.Format(time.DateOnly))
			}
			if len(starts) == 0 || !starts[len(starts)-1].Equal(from) {
				starts = append(starts, from)
			}
		}
		if len(starts) != 12 {
			t.Errorf("a year from %s: %d months: %v", start.Format(time.DateOnly), len(starts), starts)
		}
		for i, m := range starts {
			want := start.Day()
			if last := time.Date(m.Year(), m.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day(); want > last {
				want = last
			}
			if m.Day() != want || m.Month() != (start.Month()+time.Month(i)-1)%12+1 {
				t.Errorf("a year from %s: month %d starts %s", start.Format(time.DateOnly), i+1, m.Format(time.DateOnly))
			}
		}
	}
	// A month-long period is its own window.
	sub := store.Subscription{PeriodStart: day(2027, 1, 31), PeriodEnd: day(2027, 2, 28)}
	if from, to := s.window(sub, day(2027, 2, 10)); !from.Equal(sub.PeriodStart) || !to.Equal(sub.PeriodEnd) {
		t.Errorf("a month's period: %s to %s", from, to)
	}
}
