package sms

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/linebreak"
	"github.com/simrelay/simrelay/internal/visible"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// Sender pools (docs/routing.md): a send may name a pool instead of a
// device; the store picks the member inside the send's transaction.

// maxPoolName bounds a pool's name, which a send repeats in every request.
const maxPoolName = 64

// routeInput checks where a send asks to go: one device, or one pool (which
// chooses the SIM too). It returns the SIM slot for a device send. A body
// with neither is refused on device_fingerprint, as before pools.
func routeInput(device, pool, slot string) (string, error) {
	switch {
	case pool != "" && device != "":
		return "", problem.Invalid("pool", "must not be given with device_fingerprint: give one or the other")
	case pool != "":
		if strings.TrimSpace(pool) == "" || utf8.RuneCountInString(pool) > maxPoolName {
			return "", problem.Invalid("pool", "is not a pool name")
		}
		if slot != "" {
			return "", problem.Invalid("sim_slot", "is chosen by the pool; leave it out")
		}
		return "", nil
	case strings.TrimSpace(device) == "":
		return "", problem.Invalid("device_fingerprint", "is required")
	}
	if slot == "" {
		slot = proto.SIM1
	}
	if !proto.IsSIMSlot(slot) {
		return "", problem.Invalid("sim_slot", "must be SIM1 or SIM2")
	}
	return slot, nil
}

// poolRefusal turns the store's refusals of a send through a pool, or of
// one from a SIM at its cap, into the API's, or returns nil for any other
// error.
func poolRefusal(err error) error {
	if err == nil {
		return nil // every send that was stored: no targets for errors.As to allocate
	}
	var pu *store.PoolUnavailableError
	var pc *store.PoolCappedError
	var sc *store.SIMCappedError
	var eb *store.ExpiresBeforeWindowError
	switch {
	case errors.As(err, &eb):
		return problem.Invalid("expires_at", "must be after the message may first go out: now, send_at, or its window's next opening (the window of pool "+eb.Pool+" opens at "+eb.Opening.UTC().Format(timeLayout)+")")
	case errors.As(err, &sc):
		return &problem.Error{Code: problem.SIMCapped, Field: "sim_slot", RetryAfter: problem.RetrySeconds(sc.RetryAfter),
			Message: fmt.Sprintf("The device's SIM in %s is at its %s cap of %d.", sc.Slot, capWords[sc.What], sc.Limit)}
	case errors.As(err, &pc):
		return &problem.Error{Code: problem.PoolCapped, Field: "pool", RetryAfter: problem.RetrySeconds(pc.RetryAfter),
			Message: "Every member of the pool that could send is at a cap of its SIM: " + strings.Join(pc.Reasons, "; ") + "."}
	case errors.Is(err, store.ErrPoolGone):
		return &problem.Error{Code: problem.NotFound, Field: "pool", Message: "No such pool."}
	case errors.As(err, &pu):
		return &problem.Error{Code: problem.PoolUnavailable, Field: "pool",
			Message: "No member of the pool can take the send now: " + strings.Join(pu.Reasons, "; ") + "."}
	}
	return nil
}

// capWords names each cap in a sentence.
var capWords = map[string]string{store.CapPerDay: "messages per day", store.CapPerMonth: "messages per month", store.CapRecipientsPerDay: "recipients per day"}

// PoolInput is a pool's definition as a request gives it; a nil field of a
// change keeps what the pool has.
type PoolInput struct {
	Name     *string
	Strategy *string
	Fallback *string
	// FailoverAfter is in seconds: 0 (off) or 60 to 604,800.
	FailoverAfter *int64
	// WindowSet says the request gave window: Window, or null (nil) to
	// take the pool's window away.
	WindowSet bool
	Window    *window.Window
	Members   *[]PoolMemberInput
}

// DefaultFailoverAfter is a new pool's failover_after: phones drop their
// link for a minute or two as they sleep or change networks, and come back;
// a phone gone for ten minutes is gone, while its messages are still on time.
const DefaultFailoverAfter = 10 * time.Minute

// maxFailoverAfter bounds failover_after: a week, well past the messages'
// time to live.
const maxFailoverAfter = 7 * 24 * time.Hour

// PoolMemberInput is one member of a pool definition.
type PoolMemberInput struct {
	Device  string
	SIMSlot string
}

// Pools lists the company's pools.
func (s *Service) Pools(_ context.Context, companyID uint64) ([]store.Pool, error) {
	return s.store.Pools(companyID)
}

// Pool returns one of the company's pools; another company's is not_found.
func (s *Service) Pool(_ context.Context, companyID, id uint64) (store.Pool, error) {
	p, err := s.store.Pool(companyID, id)
	return p, poolError(err)
}

// CreatePool validates a definition and stores the new pool. Name, a
// strategy and at least one member are required.
func (s *Service) CreatePool(_ context.Context, companyID uint64, in PoolInput) (store.Pool, error) {
	if in.Name == nil {
		return store.Pool{}, problem.Invalid("name", "is required")
	}
	if in.Members == nil {
		return store.Pool{}, problem.Invalid("members", "is required")
	}
	p, err := s.store.PutPool(companyID, 0, s.now(), func(store.Pool) (store.PoolInput, error) {
		return poolDefinition(store.Pool{}, in)
	})
	return p, poolError(err)
}

// UpdatePool changes what in gives of the company's pool.
func (s *Service) UpdatePool(_ context.Context, companyID, id uint64, in PoolInput) (store.Pool, error) {
	p, err := s.store.PutPool(companyID, id, s.now(), func(cur store.Pool) (store.PoolInput, error) {
		return poolDefinition(cur, in)
	})
	return p, poolError(err)
}

// AddPoolMember adds one (device, SIM) to the company's pool.
func (s *Service) AddPoolMember(_ context.Context, companyID, id uint64, m PoolMemberInput) (store.Pool, store.PoolMember, error) {
	if err := checkMember("", m); err != nil {
		return store.Pool{}, store.PoolMember{}, err
	}
	p, err := s.store.PutPool(companyID, id, s.now(), func(cur store.Pool) (store.PoolInput, error) {
		if len(cur.Members) >= store.MaxPoolMembers {
			return store.PoolInput{}, problem.Invalid("device_fingerprint", fmt.Sprintf("cannot join: the pool has %d members, the most a pool may have", store.MaxPoolMembers))
		}
		def := cur.Input()
		def.Members = append(def.Members, store.PoolMemberInput{Device: m.Device, SIMSlot: slotOr(m.SIMSlot)})
		return def, nil
	})
	var me *store.PoolMemberError
	switch {
	case errors.As(err, &me) && errors.Is(err, store.ErrDeviceGone):
		return p, store.PoolMember{}, &problem.Error{Code: problem.NotFound, Field: "device_fingerprint", Message: "No such device."}
	case errors.As(err, &me):
		return p, store.PoolMember{}, &problem.Error{Code: problem.Conflict, Field: "device_fingerprint", Message: "The device's SIM is a member of the pool already."}
	case err != nil:
		return p, store.PoolMember{}, poolError(err)
	}
	return p, p.Members[len(p.Members)-1], nil
}

// RemovePoolMember takes member memberID out of the company's pool; a
// pool's last member stays (delete the pool instead).
func (s *Service) RemovePoolMember(_ context.Context, companyID, id, memberID uint64) (store.Pool, error) {
	p, err := s.store.PutPool(companyID, id, s.now(), func(cur store.Pool) (store.PoolInput, error) {
		def := cur.Input()
		for i, m := range cur.Members {
			if m.ID == memberID {
				if len(cur.Members) == 1 {
					return def, problem.New(problem.Conflict, "A pool keeps at least one member; delete the pool instead.")
				}
				def.Members = append(def.Members[:i], def.Members[i+1:]...)
				return def, nil
			}
		}
		return def, &problem.Error{Code: problem.NotFound, Message: "No such member of the pool."}
	})
	return p, poolError(err)
}

// DeletePool removes the company's pool; messages sent through it keep
// their device and the pool's name.
func (s *Service) DeletePool(_ context.Context, companyID, id uint64) (store.Pool, error) {
	p, err := s.store.DeletePool(companyID, id)
	return p, poolError(err)
}

// poolError turns the store's errors about pool definitions into the API's.
func poolError(err error) error {
	var me *store.PoolMemberError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me) && errors.Is(err, store.ErrDeviceGone):
		return &problem.Error{Code: problem.NotFound, Field: fmt.Sprintf("members[%d].device_fingerprint", me.Index), Message: "No such device."}
	case errors.As(err, &me):
		return problem.Invalid(fmt.Sprintf("members[%d]", me.Index), "names the same device and SIM as an earlier member")
	case errors.Is(err, store.ErrConflict):
		return &problem.Error{Code: problem.Conflict, Field: "name", Message: "The company has a pool of that name already."}
	case errors.Is(err, store.ErrTooManyPools):
		return &problem.Error{Code: problem.Conflict, Message: fmt.Sprintf("A company may have at most %d pools.", store.MaxPools)}
	case errors.Is(err, store.ErrNotFound):
		return problem.New(problem.NotFound, "No such pool.")
	}
	return err
}

// badInPoolName is what a pool's name refuses: a line break or another
// control (linebreak.Is, as every name), and every bidi control as well
// (Unicode's Bidi_Control: the embeddings, overrides and isolates that
// package bidi strips from a subject, and the marks LRM, RLM and ALM that
// it keeps). Stricter than other names by design: a pool's name is an
// identifier a send repeats byte for byte, so an invisible mark would make
// two names that read alike differ.
func badInPoolName(r rune) bool {
	return linebreak.Is(r) || unicode.Is(unicode.Bidi_Control, r)
}

// poolDefinition is cur changed by in, validated; errors name the field.
func poolDefinition(cur store.Pool, in PoolInput) (store.PoolInput, error) {
	def := cur.Input()
	// The console's form sends the name with every change: a name stored
	// before a rule tightened must not refuse the save of another field
	// (linebreak.SentBack). A new pool (no name yet) is checked in full.
	if in.Name != nil && (cur.Name == "" || !linebreak.SentBack(*in.Name, cur.Name)) {
		name := *in.Name
		switch {
		case strings.TrimSpace(name) == "":
			return def, problem.Invalid("name", "is required")
		case utf8.RuneCountInString(name) > maxPoolName:
			return def, problem.Invalid("name", fmt.Sprintf("must be at most %d characters", maxPoolName))
		case strings.TrimSpace(name) != name || strings.IndexFunc(name, badInPoolName) >= 0:
			return def, problem.Invalid("name", "must not start or end with spaces or hold control or text-direction characters")
		case visible.None(name):
			return def, problem.Invalid("name", visible.FaultMessage)
		}
		def.Name = name
	}
	// A strategy left out is the pool's, round_robin for a new one; one
	// given empty is none of the three (a strategy has no empty state).
	if in.Strategy != nil {
		def.Strategy = *in.Strategy
	} else if def.Strategy == "" {
		def.Strategy = store.PoolRoundRobin
	}
	switch def.Strategy {
	case store.PoolRoundRobin, store.PoolLeastLoaded, store.PoolSticky:
	default:
		return def, problem.Invalid("strategy", "must be round_robin, least_loaded or sticky")
	}
	if in.Fallback != nil {
		def.Fallback = *in.Fallback
	}
	if def.Strategy != store.PoolSticky {
		if in.Fallback != nil && *in.Fallback != "" {
			return def, problem.Invalid("fallback", "applies to sticky pools only")
		}
		def.Fallback = ""
	} else {
		if def.Fallback == "" {
			def.Fallback = store.PoolRoundRobin
		}
		if def.Fallback != store.PoolRoundRobin && def.Fallback != store.PoolLeastLoaded {
			return def, problem.Invalid("fallback", "must be round_robin or least_loaded")
		}
	}
	if cur.ID == 0 {
		def.FailoverAfter = DefaultFailoverAfter
	}
	if in.FailoverAfter != nil {
		// Compared in seconds, before the multiplication, which would wrap
		// for a number past about 292 years.
		if n := *in.FailoverAfter; n != 0 && (n < 60 || n > int64(maxFailoverAfter/time.Second)) {
			return def, problem.Invalid("failover_after", "must be 0 (no failover) or 60 to 604800 seconds")
		}
		def.FailoverAfter = time.Duration(*in.FailoverAfter) * time.Second
	}
	if in.WindowSet {
		if err := sendWindow(in.Window); err != nil {
			return def, err
		}
		def.Window = in.Window
	}
	if in.Members != nil {
		ms := *in.Members
		if len(ms) == 0 || len(ms) > store.MaxPoolMembers {
			return def, problem.Invalid("members", fmt.Sprintf("must hold 1 to %d members", store.MaxPoolMembers))
		}
		def.Members = make([]store.PoolMemberInput, len(ms))
		for i, m := range ms {
			if err := checkMember(fmt.Sprintf("members[%d].", i), m); err != nil {
				return def, err
			}
			def.Members[i] = store.PoolMemberInput{Device: m.Device, SIMSlot: slotOr(m.SIMSlot)}
			// A member the pool has keeps its id and stays even if its
			// device is gone; a new one must name a live device.
			for _, had := range cur.Members {
				if had.Device == m.Device && had.SIMSlot == def.Members[i].SIMSlot {
					def.Members[i].DeviceID = had.DeviceID
				}
			}
		}
	}
	return def, nil
}

func checkMember(at string, m PoolMemberInput) error {
	if strings.TrimSpace(m.Device) == "" {
		return problem.Invalid(at+"device_fingerprint", "is required")
	}
	if m.SIMSlot != "" && !proto.IsSIMSlot(m.SIMSlot) {
		return problem.Invalid(at+"sim_slot", "must be SIM1 or SIM2")
	}
	return nil
}

func slotOr(slot string) string {
	if slot == "" {
		return proto.SIM1
	}
	return slot
}
