package postgres

import (
	"errors"
	"slices"
	"time"

	"github.com/simrelay/simrelay/store"
)

// StoreAgentInbound stores a WhatsApp or iMessage message an agent received,
// once per (device registration, channel, client_id), as StoreInbound does
// for SMS. m carries CompanyID, DeviceID, Channel and Account (the address
// it came to, normalised): an address the company has no number for is
// ErrNotFound, one another agent of the company holds ErrNumberNotHeld
// (unless the frame repeats one already stored). A new message's webhook
// event (SetInboundEvents) is written in the same transaction.
func (s *Store) StoreAgentInbound(m *store.Message, now func() time.Time) (store.Message, bool, error) {
	var out store.Message
	var dup bool
	err := s.write(m.Channel+" inbound", func(t *txn) error {
		out, dup = store.Message{}, false
		d, err := liveDeviceByID(t, m.CompanyID, m.DeviceID, false)
		if err != nil {
			return err
		}
		var n store.AgentNumber
		if err := getRec(t, &n, "SELECT rec FROM agent_numbers WHERE company_id = $1 AND channel = $2 AND address = $3",
			id(d.CompanyID), m.Channel, m.Account); err != nil {
			return err
		}
		err = getRec(t, &out, "SELECT rec FROM messages WHERE company_id = $1 AND device_id = $2 AND channel = $3 AND agent_client = $4",
			id(d.CompanyID), id(d.ID), m.Channel, m.ClientID)
		if err == nil {
			dup = true // acked again even after the number moved on
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if n.DeviceID != d.ID {
			// Only the agent whose hello holds the number speaks for it:
			// another agent of the company could otherwise put words in
			// the mouths of the number's contacts (and in its webhooks).
			return store.ErrNumberNotHeld
		}
		msg := *m
		msg.Media = slices.Clone(m.Media) // attachMedia fills in its own copy
		msg.CompanyID, msg.DeviceID, msg.Device, msg.Direction, msg.Status = d.CompanyID, d.ID, d.Fingerprint, store.Inbound, store.MsgReceived
		msg.NumberID, msg.NumberRef = n.ID, n.PublicID
		msg.CreatedAt = now().UTC()
		msg.UpdatedAt = msg.CreatedAt
		if msg.ID, err = nextID(t, "messages"); err != nil {
			return err
		}
		// The files it names must be its registration's uploads no message
		// took (store.ErrMediaUnknown otherwise), taken for it here.
		if err := attachMedia(t, &msg); err != nil {
			return err
		}
		if err := s.charge(t, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg)); err != nil {
			return err
		}
		err = insertAgentMessage(t, msg)
		if violates(err, "messages_agent_client") {
			return errAgain // the same frame stored at once: read it again, a repeat
		}
		if err != nil {
			return err
		}
		if err := s.recordReceived(t, msg, d); err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err != nil {
		return store.Message{}, false, err
	}
	return out, dup, nil
}
