package store

import (
	"fmt"
	"slices"
	"time"
)

// The backend-neutral part of a pool's choice of member for a send, which
// both backends' pickers share: which strategy picks, why a member is
// passed over, and the refusal of a send no member can take.

// maxPoolReasons is how many members' reasons a refusal names.
const maxPoolReasons = 10

// PicksLeastLoaded says whether the pool picks its least loaded usable
// member: least_loaded, or sticky with least_loaded as its fallback for a
// recipient it has no member for. The other pools pick in turn.
func (p Pool) PicksLeastLoaded() bool {
	return p.Strategy == PoolLeastLoaded || (p.Strategy == PoolSticky && p.Fallback == PoolLeastLoaded)
}

// MemberPick is one of a pool picker's ways to choose the member for a
// send to phone: ok is false when it found none usable (for a sticky
// pool's member, also when no member talked to phone yet).
type MemberPick func(phone string) (m PoolMember, d *Device, ok bool, err error)

// PickByStrategy chooses the member for a send to phone by the pool's
// strategy, from a picker's ways: a sticky pool's member for phone first,
// and its fallback where that finds none usable; then the least loaded
// member (PicksLeastLoaded) or the next in turn.
func (p Pool) PickByStrategy(phone string, sticky, leastLoaded, inTurn MemberPick) (PoolMember, *Device, bool, error) {
	if p.Strategy == PoolSticky {
		if m, d, ok, err := sticky(phone); err != nil || ok {
			return m, d, ok, err
		}
	}
	if p.PicksLeastLoaded() {
		return leastLoaded(phone)
	}
	return inTurn(phone)
}

// PoolMemberUnusable is why a pool's member cannot take a send as far as
// its device goes, "" when it can: d is the member's device (nil: gone),
// slot its SIM; failing says whether that SIM is in a carrier-error streak
// (CarrierErrorStreak), asked only of a device that is there and not
// disabled; check, when set, vets the device for the send. Its error is
// failing's.
func PoolMemberUnusable(d *Device, slot string, failing func() (bool, error), check DeviceCheck) (string, error) {
	switch {
	case d == nil:
		return "its device was deleted", nil
	case d.Status == DeviceDisabled:
		return "its device is disabled", nil
	}
	f, err := failing()
	if err != nil {
		return "", err
	}
	if f {
		return fmt.Sprintf("its SIM failed %d sends in a row with carrier errors", CarrierErrorStreak), nil
	}
	if check != nil {
		if err := check(*d, slot); err != nil {
			return err.Error(), nil
		}
	}
	return "", nil
}

// PoolNotes are a pool picker's notes of why members were passed over for
// one send, for its refusal if no member can take it (Refusal): each
// member once (a sticky pool's fallback looks at the recipient's member
// again), the first maxPoolReasons of them by reason, and the soonest a
// member passed over at its cap may send again. The zero value is ready
// for a pick.
type PoolNotes struct {
	reasons []string
	noted   []uint64
	capped  time.Duration
}

// Begin starts the notes of a pick for one send through pool p, dropping
// the last pick's; a pool with no members refuses the send at once (its
// *PoolUnavailableError).
func (n *PoolNotes) Begin(p Pool) error {
	n.reasons, n.noted, n.capped = n.reasons[:0], n.noted[:0], 0
	if len(p.Members) == 0 {
		return &PoolUnavailableError{Pool: p.Name, Reasons: []string{"it has no members"}}
	}
	return nil
}

// Note notes member m passed over for why, unless it was noted already.
func (n *PoolNotes) Note(m PoolMember, why string) {
	if slices.Contains(n.noted, m.ID) {
		return
	}
	n.noted = append(n.noted, m.ID)
	if len(n.reasons) < maxPoolReasons {
		n.reasons = append(n.reasons, fmt.Sprintf("member %d (%s %s): %s", m.ID, m.Device, m.SIMSlot, why))
	}
}

// NoteCapped notes member m passed over at c, a cap of its SIM.
func (n *PoolNotes) NoteCapped(m PoolMember, c *SIMCappedError) {
	n.Note(m, fmt.Sprintf("at its %s cap of %d", c.What, c.Limit))
	if n.capped == 0 || c.RetryAfter < n.capped {
		n.capped = c.RetryAfter
	}
}

// Refusal is the error of a send through pool p that no member could take:
// a *PoolCappedError when a member was passed over at a cap (the send may
// go once the soonest can send again), a *PoolUnavailableError otherwise.
func (n *PoolNotes) Refusal(p Pool) error {
	if n.capped > 0 {
		return &PoolCappedError{Pool: p.Name, RetryAfter: n.capped, Reasons: slices.Clone(n.reasons)}
	}
	return &PoolUnavailableError{Pool: p.Name, Reasons: slices.Clone(n.reasons)}
}
