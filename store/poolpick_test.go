package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestPicksLeastLoaded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		strategy, fallback string
		want               bool
	}{
		{PoolRoundRobin, "", false},
		{PoolLeastLoaded, "", true},
		{PoolSticky, PoolRoundRobin, false},
		{PoolSticky, PoolLeastLoaded, true},
	} {
		if got := (Pool{Strategy: tt.strategy, Fallback: tt.fallback}).PicksLeastLoaded(); got != tt.want {
			t.Errorf("%s (fallback %q): %v, want %v", tt.strategy, tt.fallback, got, tt.want)
		}
	}
}

// A member's device decides in this order: gone, disabled, its SIM's
// carrier-error streak (asked only of a device there and enabled), the
// caller's check.
func TestPoolMemberUnusable(t *testing.T) {
	t.Parallel()
	live, disabled := &Device{Status: DeviceActive}, &Device{Status: DeviceDisabled}
	asked := 0
	failing := func(f bool, err error) func() (bool, error) {
		return func() (bool, error) { asked++; return f, err }
	}
	refuse := func(d Device, slot string) error { return fmt.Errorf("slot %s refused", slot) }
	for _, tt := range []struct {
		name    string
		d       *Device
		failing func() (bool, error)
		check   DeviceCheck
		want    string
		asked   int
	}{
		{"gone", nil, failing(true, nil), refuse, "its device was deleted", 0},
		{"disabled", disabled, failing(true, nil), refuse, "its device is disabled", 0},
		{"failing", live, failing(true, nil), refuse, fmt.Sprintf("its SIM failed %d sends in a row with carrier errors", CarrierErrorStreak), 1},
		{"refused", live, failing(false, nil), refuse, "slot sim1 refused", 1},
		{"usable", live, failing(false, nil), nil, "", 1},
	} {
		asked = 0
		why, err := PoolMemberUnusable(tt.d, "sim1", tt.failing, tt.check)
		if err != nil || why != tt.want || asked != tt.asked {
			t.Errorf("%s: %q, %v, streak asked %d times; want %q, asked %d", tt.name, why, err, asked, tt.want, tt.asked)
		}
	}
	boom := errors.New("boom")
	if _, err := PoolMemberUnusable(live, "sim1", failing(false, boom), nil); !errors.Is(err, boom) {
		t.Errorf("the streak's error: %v, want %v", err, boom)
	}
}

// The notes name each member once, at most ten, and refuse with the
// soonest retry when a member was at its cap; Begin starts afresh and
// refuses a pool with no members.
func TestPoolNotes(t *testing.T) {
	t.Parallel()
	p := Pool{Name: "main", Members: []PoolMember{{ID: 1}}}
	var n PoolNotes
	if err := n.Begin(Pool{Name: "empty"}); err == nil || err.Error() != "no member of pool empty can send: it has no members" {
		t.Fatalf("no members: %v", err)
	}
	if err := n.Begin(p); err != nil {
		t.Fatal(err)
	}
	m := func(id uint64) PoolMember { return PoolMember{ID: id, Device: "dev", SIMSlot: "sim1"} }
	n.Note(m(1), "its device is disabled")
	n.Note(m(1), "noted again")
	var unavailable *PoolUnavailableError
	if err := n.Refusal(p); !errors.As(err, &unavailable) || !slices.Equal(unavailable.Reasons, []string{"member 1 (dev sim1): its device is disabled"}) || unavailable.Pool != "main" {
		t.Fatalf("refusal: %#v", err)
	}
	n.NoteCapped(m(2), &SIMCappedError{What: CapPerDay, Limit: 50, RetryAfter: time.Hour})
	n.NoteCapped(m(3), &SIMCappedError{What: CapPerMonth, Limit: 900, RetryAfter: time.Minute})
	n.NoteCapped(m(4), &SIMCappedError{What: CapPerDay, Limit: 50, RetryAfter: 2 * time.Hour})
	for id := range uint64(10) {
		n.Note(m(10+id), "its device was deleted")
	}
	var capped *PoolCappedError
	if err := n.Refusal(p); !errors.As(err, &capped) || capped.RetryAfter != time.Minute || len(capped.Reasons) != maxPoolReasons ||
		capped.Reasons[1] != fmt.Sprintf("member 2 (dev sim1): at its %s cap of 50", CapPerDay) {
		t.Fatalf("capped refusal: %#v", err)
	}
	if err := n.Begin(p); err != nil {
		t.Fatal(err)
	}
	n.Note(m(1), "again")
	if err := n.Refusal(p); !errors.As(err, &unavailable) || !slices.Equal(unavailable.Reasons, []string{"member 1 (dev sim1): again"}) {
		t.Errorf("after Begin: %#v, want only the new pick's note and no cap", err)
	}
}

// A sticky pool tries its recipient's member first and falls back when
// that finds none usable; the others go straight to their own way.
func TestPickByStrategy(t *testing.T) {
	t.Parallel()
	var called []string
	way := func(name string, ok bool, err error) MemberPick {
		return func(phone string) (PoolMember, *Device, bool, error) {
			called = append(called, name+" "+phone)
			return PoolMember{Device: name}, nil, ok, err
		}
	}
	boom := errors.New("boom")
	for _, tt := range []struct {
		pool     Pool
		sticky   MemberPick
		want     string
		wantErr  error
		wantWays []string
	}{
		{Pool{Strategy: PoolRoundRobin}, way("sticky", true, nil), "turn", nil, []string{"turn +1"}},
		{Pool{Strategy: PoolLeastLoaded}, way("sticky", true, nil), "least", nil, []string{"least +1"}},
		{Pool{Strategy: PoolSticky, Fallback: PoolLeastLoaded}, way("sticky", true, nil), "sticky", nil, []string{"sticky +1"}},
		{Pool{Strategy: PoolSticky, Fallback: PoolLeastLoaded}, way("sticky", false, nil), "least", nil, []string{"sticky +1", "least +1"}},
		{Pool{Strategy: PoolSticky, Fallback: PoolRoundRobin}, way("sticky", false, nil), "turn", nil, []string{"sticky +1", "turn +1"}},
		{Pool{Strategy: PoolSticky, Fallback: PoolRoundRobin}, way("sticky", false, boom), "sticky", boom, []string{"sticky +1"}},
	} {
		called = nil
		m, _, ok, err := tt.pool.PickByStrategy("+1", tt.sticky, way("least", true, nil), way("turn", true, nil))
		if m.Device != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != ok || !slices.Equal(called, tt.wantWays) {
			t.Errorf("%s (fallback %q): %s, ok %v, %v, ways %q; want %s, %v, ways %q", tt.pool.Strategy, tt.pool.Fallback, m.Device, ok, err, called, tt.want, tt.wantErr, tt.wantWays)
		}
	}
}
