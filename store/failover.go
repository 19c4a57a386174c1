package store

import (
	"time"
)

// Failover reasons, as attempts record them.
const (
	FailoverOffline       = "device_offline"
	FailoverCarrierErrors = "carrier_errors"
)

// Carrier-error streaks: a SIM whose sends failed this many times in a
// row with a carrier error is passed over by its pools, and its pools'
// queued jobs move off it, until a send from it succeeds or the cool-down
// after its last such failure ends.
const (
	CarrierErrorStreak   = 3
	CarrierErrorCooldown = 15 * time.Minute
)

// MaxAttempts bounds the moves a message keeps: a message that keeps moving
// (its pool's phones keep dropping) shows its latest MaxAttempts.
const MaxAttempts = 16

// Attempt is a member a message was queued on before it moved.
type Attempt struct {
	Device  string    `json:"device"`
	SIMSlot string    `json:"sim_slot"`
	Reason  string    `json:"reason"` // why it moved: device_offline or carrier_errors
	MovedAt time.Time `json:"moved_at"`
}

// FailoverInput says which jobs Failover moves, in one transaction: the
// queued jobs of the company's device that went through a pool, from slot
// ("" for both), with queue places above After (jobs at or below it may
// have been handed to a phone, or were looked at by an earlier batch), the
// first Limit of them in queue order. Down are the devices no job may move
// to. Failover returns, besides the jobs it moved, the place of the last
// job it looked at when it looked at Limit of them (the After of the next
// batch; the jobs it could not move stay behind it, and a job another
// transaction took between the look and the move counts as looked at),
// and 0 when it looked at fewer: the device has no more past them.
type FailoverInput struct {
	CompanyID, DeviceID uint64
	Slot                string
	After               uint64
	Reason              string
	Down                map[uint64]bool
	Pools               map[uint64]bool // the pools whose jobs move
	Limit               int
}

// PassOver says why a failover under in passes the pool member mem over,
// or "" when a job may move to it: the member the job leaves, and members
// of devices that are down. Both backends' pickers ask it.
func (in FailoverInput) PassOver(mem PoolMember) string {
	switch {
	case mem.DeviceID == in.DeviceID && (in.Slot == "" || mem.SIMSlot == in.Slot):
		return "the member the job leaves"
	case in.Down[mem.DeviceID]:
		return "its device is offline"
	}
	return ""
}
