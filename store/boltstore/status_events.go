package boltstore

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Outbound status events: every path that moves an outbound message to a
// status a receiver can be told about (Transition for the phone's or
// agent's reports, ExpireQueued, a device's deletion, a scheduled message
// failing at its time) calls statusEvent in the same transaction, so the
// webhook outbox holds the event exactly when the status change is stored.
// A crash never loses one nor writes one for a change that did not commit,
// and a report that changes nothing writes nothing. The channel is the
// message's, so every channel that stores Message records gets its events
// from the same code.

// SetStatusEvents installs the status events' builder before the store
// serves; without one, status changes write no events.
func (s *Store) SetStatusEvents(h StatusEvents) { s.statusEvents = &h }

// statusEventTypes are the statuses that make an event.
var statusEventTypes = map[string]bool{MsgSent: true, MsgDelivered: true, MsgFailed: true, MsgExpired: true}

// statusEvent writes the outbox entries of m's move to its current status.
// It is charged after the fact (chargeAfter): refusing it would fail the
// status change the phone already made.
func (s *Store) statusEvent(tx *bolt.Tx, m Message, now time.Time) error {
	// Every status change passes here: the device's last failures too.
	if err := noteFailure(tx, m, now); err != nil {
		return err
	}
	h := s.statusEvents
	if h == nil || h.Build == nil || m.Direction != Outbound || !statusEventTypes[m.Status] {
		return nil
	}
	// The closures below share a copy of m made here: had they held m
	// itself, m would be put on the heap on entry, for every status change
	// and for the sends' acks, which end above, too.
	ev := m
	res, err := s.addWebhookEvent(tx, m.CompanyID, now, h.Limits, func(set WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
		return h.Build(set, ev)
	})
	if err != nil {
		return fmt.Errorf("status event of message %d: %w", m.ID, err)
	}
	if h.Committed != nil && (res.Queued > 0 || res.Refused > 0) {
		tx.OnCommit(func() { h.Committed(ev, res) })
	}
	return nil
}
