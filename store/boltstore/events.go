package boltstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Inbound and device events: StoreInbound and StoreAgentInbound write a new
// message's event (inboundEvent), and UpdateDeviceWith the events its
// change raises (writeDeviceEvents), in the transaction that stores the message
// or the device, as statusEvent does for a status change (see
// store.StatusEvents for the rules all three keep).

// SetInboundEvents installs the builder of new inbound messages' events
// before the store serves; without one, inbound messages write no events.
func (s *Store) SetInboundEvents(h InboundEvents) { s.inboundEvents = &h }

// SetDeviceEvents installs the builder of device events before the store
// serves; without one, the events a device's change raises write nothing.
func (s *Store) SetDeviceEvents(h DeviceEvents) { s.deviceEvents = &h }

// inboundEvent writes the outbox entries of m, an inbound message stored in
// tx just now; the event counts on the day the message does.
func (s *Store) inboundEvent(tx *bolt.Tx, m Message) error {
	h := s.inboundEvents
	if h == nil || h.Build == nil {
		return nil
	}
	res, err := s.addWebhookEvent(tx, m.CompanyID, m.CreatedAt, h.Limits, func(set WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
		return h.Build(set, m)
	})
	if err != nil {
		return fmt.Errorf("webhook event of inbound message %d: %w", m.ID, err)
	}
	if h.Committed != nil && (res.Queued > 0 || res.Refused > 0) {
		tx.OnCommit(func() { h.Committed(m, res) })
	}
	return nil
}

// writeDeviceEvents writes the outbox entries of the events a change of d
// raised, in order, in the transaction that stores d.
func (s *Store) writeDeviceEvents(tx *bolt.Tx, d Device, events []DeviceEvent) error {
	h := s.deviceEvents
	if h == nil || h.Build == nil {
		return nil
	}
	for _, ev := range events {
		res, err := s.addWebhookEvent(tx, d.CompanyID, ev.At, h.Limits, func(set WebhookSet) (WebhookEvent, []WebhookDelivery, error) {
			return h.Build(set, d, ev)
		})
		if err != nil {
			return fmt.Errorf("webhook event %s of device %s: %w", ev.Type, d.Fingerprint, err)
		}
		if h.Committed != nil && (res.Queued > 0 || res.Refused > 0) {
			tx.OnCommit(func() { h.Committed(d, ev, res) })
		}
	}
	return nil
}
