package store

import (
	"errors"
	"time"
)

// Statuses of scheduled and canceled messages.
const (
	MsgScheduled = "scheduled" // stored with a send_at still ahead
	MsgCanceled  = "canceled"  // taken back before a phone took it
)

// ErrNotCancelable is returned for a cancel of a message that a phone has
// taken (or that has finished).
var ErrNotCancelable = errors.New("store: the message is past queued")

// MaxPriority is the highest priority a send may carry (0 to 9): ten
// levels are more than any company asked for, and one byte of key.
const MaxPriority = 9

// QueuePlace is the message's place in its device's queue: the order in
// which links take jobs, and the cursor they keep. It is the id, unless the
// message was queued later than it was stored.
func (m Message) QueuePlace() uint64 {
	if m.QueueSeq != 0 {
		return m.QueueSeq
	}
	return m.ID
}

// Held says whether a queued message waits for its window to open.
func (m Message) Held() bool { return m.Status == MsgQueued && !m.HeldUntil.IsZero() }

// DueAt is when a scheduled or held message is due in its device's queue.
func (m Message) DueAt() time.Time {
	if m.Status == MsgScheduled {
		return m.SendAt
	}
	return m.HeldUntil
}
