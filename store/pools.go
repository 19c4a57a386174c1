package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/simrelay/simrelay/window"
)

// Pool strategies.
const (
	PoolRoundRobin  = "round_robin"  // members in turn
	PoolLeastLoaded = "least_loaded" // the member whose device has the fewest queued jobs
	PoolSticky      = "sticky"       // the member that last talked to the recipient
)

// Bounds of what one company's pools cost (docs/routing.md).
const (
	// MaxPools is how many pools one company may define.
	MaxPools = 50
	// MaxPoolMembers is how many members one pool may have: a hundred
	// dual-SIM phones.
	MaxPoolMembers = 200
)

// PoolMember is one (device, SIM) of a pool. Its id is the pool's and
// stays with the (device, SIM) across edits of the pool.
type PoolMember struct {
	ID       uint64 `json:"id"`
	DeviceID uint64 `json:"device_id"`
	// Device is the device's fingerprint when the member was added.
	Device  string `json:"device"`
	SIMSlot string `json:"sim_slot"`
}

// Pool is a company's sender pool.
type Pool struct {
	ID        uint64 `json:"id"`
	CompanyID uint64 `json:"company_id"`
	Name      string `json:"name"`
	Strategy  string `json:"strategy"`
	// Fallback is how a sticky pool picks for a recipient it has no member
	// for (round_robin or least_loaded); empty for the other strategies.
	Fallback string `json:"fallback,omitempty"`
	// FailoverAfter is how long a member's device may be offline before
	// the pool's queued jobs on it move to other members; 0 turns failover
	// off (failover.go).
	FailoverAfter time.Duration `json:"failover_after,omitempty"`
	// Window, when set, is when the pool's sends may go out; a send's own
	// window takes its place (docs/routing.md).
	Window    *window.Window `json:"window,omitempty"`
	Members   []PoolMember   `json:"members"`
	MemberSeq uint64         `json:"member_seq"` // the last member id given out
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// PoolInput is a pool's definition as a company writes it; members name
// their device by fingerprint.
type PoolInput struct {
	Name          string
	Strategy      string
	Fallback      string
	FailoverAfter time.Duration
	Window        *window.Window
	Members       []PoolMemberInput
}

// PoolMemberInput is one member as a company names it. DeviceID, when set,
// keeps a member the pool has as it is (Input), even if its device is gone.
type PoolMemberInput struct {
	Device   string
	SIMSlot  string
	DeviceID uint64
}

// PoolMemberError is a pool definition whose member Index names a device
// the company does not have (Err is ErrDeviceGone), or names a (device,
// SIM) twice (ErrConflict).
type PoolMemberError struct {
	Index int
	Err   error
}

func (e *PoolMemberError) Error() string { return fmt.Sprintf("member %d: %v", e.Index, e.Err) }

func (e *PoolMemberError) Unwrap() error { return e.Err }

var (
	// ErrPoolGone is returned for a send through a pool the company does not have.
	ErrPoolGone = errors.New("store: pool not found")
	// ErrTooManyPools is returned when a company would have more than MaxPools.
	ErrTooManyPools = errors.New("store: too many pools")
)

// PoolUnavailableError refuses a send through a pool none of whose members
// can take it now; Reasons says why each member was passed over.
type PoolUnavailableError struct {
	Pool    string
	Reasons []string
}

func (e *PoolUnavailableError) Error() string {
	return fmt.Sprintf("no member of pool %s can send: %s", e.Pool, strings.Join(e.Reasons, "; "))
}

// PoolCappedError refuses a send through a pool whose members that could
// send are all at a cap of their SIM; RetryAfter is the soonest one of
// them may send again.
type PoolCappedError struct {
	Pool       string
	RetryAfter time.Duration
	Reasons    []string
}

func (e *PoolCappedError) Error() string {
	return fmt.Sprintf("every member of pool %s that could send is at a cap: %s", e.Pool, strings.Join(e.Reasons, "; "))
}

// Input is the pool's definition as PutPool takes it.
func (p Pool) Input() PoolInput {
	in := PoolInput{Name: p.Name, Strategy: p.Strategy, Fallback: p.Fallback, FailoverAfter: p.FailoverAfter, Window: p.Window, Members: make([]PoolMemberInput, len(p.Members))}
	for i, m := range p.Members {
		in.Members[i] = PoolMemberInput{Device: m.Device, SIMSlot: m.SIMSlot, DeviceID: m.DeviceID}
	}
	return in
}

// SameDefinition says whether p and q define the pool alike: name,
// strategy, fallback, failover_after, window and members in order. An edit
// that leaves the definition as it was (PATCH with {}, or with the values
// the pool has) leaves updated_at as it was too.
func (p Pool) SameDefinition(q Pool) bool {
	return p.Name == q.Name && p.Strategy == q.Strategy && p.Fallback == q.Fallback && p.FailoverAfter == q.FailoverAfter &&
		sameWindow(p.Window, q.Window) && slices.Equal(p.Members, q.Members)
}

func sameWindow(a, b *window.Window) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Days, b.Days) && a.From == b.From && a.To == b.To && a.TimeZone == b.TimeZone
}

// DeviceCheck vets a device for a send from slot inside the send's
// transaction; its error refuses the send (or, in a pool, passes the member
// over).
type DeviceCheck func(d Device, slot string) error

// StickyAge is how long a sticky entry (the member a recipient was last
// sent to through a pool) is kept without a new send to the recipient.
// Older ones are passed over and pruned: the recipient then goes to the
// member whose conversation with it is the newest, as one never sent to.
const StickyAge = 90 * 24 * time.Hour

// MemberOrder is the order a pool tries its n members in, starting from
// turn (the member after the one last taken): in turn for round_robin (load
// nil), or fewest queued jobs first for least_loaded (load gives member i's
// count), ties in turn so equal members share the sends. Both backends
// take the first usable member of the order, i, and store i+1 as the
// pool's next turn.
func MemberOrder(n int, turn uint64, load func(i int) int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = int((turn + uint64(i)) % uint64(n))
	}
	if load != nil {
		slices.SortStableFunc(order, func(a, b int) int { return load(a) - load(b) })
	}
	return order
}

// ExpiresBeforeWindowError refuses a send through a pool whose window first
// opens (Opening) at or after the send's own expires_at: held until then,
// it could only expire, never go out. A send's own window is checked so
// before it reaches the store (sms.Send); a pool's is known only once the
// pool is read, in the send's transaction.
type ExpiresBeforeWindowError struct {
	Pool    string
	Opening time.Time
}

func (e *ExpiresBeforeWindowError) Error() string {
	return fmt.Sprintf("the window of pool %s first opens at %s, not before the send expires", e.Pool, e.Opening.UTC().Format(time.RFC3339))
}

// SetPoolMember sets on m the member of p it was picked for (the device's
// fingerprint and the slot) and, when m has no window of its own, p's
// window; now is when the send is made. Both backends' pickers call it. A
// send whose expires_at (ExpiresFixed) comes at or before the first opening
// of the pool's window is an *ExpiresBeforeWindowError.
func (m *Message) SetPoolMember(p Pool, device, slot string, now time.Time) error {
	// The pool's own name, not the request's spelling of it (names are
	// matched without regard to case): what GET /pools lists.
	m.Device, m.SIMSlot, m.Pool, m.PoolID = device, slot, p.Name, p.ID
	if m.Window != nil || p.Window == nil {
		return nil
	}
	w := *p.Window
	m.Window = &w
	start := now
	if m.SendAt.After(start) {
		start = m.SendAt
	}
	switch {
	case m.ExpiresFixed:
		if opens := w.Next(start); !m.ExpiresAt.After(opens) {
			return &ExpiresBeforeWindowError{Pool: p.Name, Opening: opens}
		}
	case !m.ExpiresAt.IsZero():
		// The time to live counts from the window's first opening, as for
		// a send's own window (sms.Send).
		m.ExpiresAt = m.ExpiresAt.Add(w.Next(start).Sub(start))
	}
	return nil
}
