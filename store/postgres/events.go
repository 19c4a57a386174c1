package postgres

import (
	"fmt"

	"github.com/simrelay/simrelay/store"
)

// Inbound and device events: StoreInbound and StoreAgentInbound write a new
// message's event (queueInboundEvent, inbound.go), and UpdateDeviceWith the
// events its change raises (writeDeviceEvents), in the transaction that
// stores the message or the device, as statusEvent does for a status change (see
// store.StatusEvents for the rules all three keep). What must follow the
// commit (the builder's Committed) is the txn's OnCommit.

// SetInboundEvents sets the builder of new inbound messages' events; call
// it before the store is used. Without one, inbound messages write no
// events.
func (s *Store) SetInboundEvents(h store.InboundEvents) { s.inboundEvents = &h }

// SetDeviceEvents sets the builder of device events; call it before the
// store is used. Without one, the events a device's change raises write
// nothing.
func (s *Store) SetDeviceEvents(h store.DeviceEvents) { s.deviceEvents = &h }

// writeDeviceEvents writes the outbox entries of the events a change of d
// raised, in order, in the transaction t that stores d.
func (s *Store) writeDeviceEvents(t *txn, d store.Device, events []store.DeviceEvent) error {
	h := s.deviceEvents
	if h == nil || h.Build == nil {
		return nil
	}
	for _, ev := range events {
		res, err := s.addWebhookEvent(t, d.CompanyID, ev.At, h.Limits, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
			return h.Build(set, d, ev)
		})
		if err != nil {
			return fmt.Errorf("webhook event %s of device %s: %w", ev.Type, d.Fingerprint, err)
		}
		if h.Committed != nil && (res.Queued > 0 || res.Refused > 0) {
			t.OnCommit(func() { h.Committed(d, ev, res) })
		}
	}
	return nil
}
