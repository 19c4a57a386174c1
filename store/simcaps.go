package store

import (
	"fmt"
	"time"
)

// SIMCaps are one SIM's caps; 0 is no cap.
type SIMCaps struct {
	PerDay           int64 `json:"per_day,omitempty"`
	PerMonth         int64 `json:"per_month,omitempty"`
	RecipientsPerDay int64 `json:"recipients_per_day,omitempty"`
}

// SIMUsage is one SIM's caps and what it used of them now.
type SIMUsage struct {
	Slot string
	Caps SIMCaps
	// Day and Month count the messages accepted this UTC day and month;
	// Recipients the distinct recipients this UTC day (counted only while
	// the SIM has a recipients cap).
	Day, Month, Recipients int64
}

// Cap names, as SIMCappedError.What gives them.
const (
	CapPerDay           = "per_day"
	CapPerMonth         = "per_month"
	CapRecipientsPerDay = "recipients_per_day"
)

// SIMCappedError refuses a send from a SIM at one of its caps; RetryAfter
// is when the cap's window ends.
type SIMCappedError struct {
	Slot       string
	What       string // per_day, per_month or recipients_per_day
	Limit      int64
	RetryAfter time.Duration
}

func (e *SIMCappedError) Error() string {
	return fmt.Sprintf("the SIM in %s is at its %s cap of %d", e.Slot, e.What, e.Limit)
}
