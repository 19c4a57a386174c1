package postgres

// A message read back by its uuid, taken back before it is sent (Cancel),
// and the time the next scheduled or held message comes due.

import (
	"time"

	"github.com/simrelay/simrelay/store"
)

// MessageByUUID returns a message of the company by its uuid (the queue
// id of an outbound one); another company's is store.ErrNotFound.
func (s *Store) MessageByUUID(companyID uint64, uuid string) (store.Message, error) {
	var m store.Message
	err := s.read("message "+uuid, func(t *txn) error {
		return getRec(t, &m, "SELECT rec FROM messages WHERE company_id = $1 AND uuid = $2", id(companyID), uuid)
	})
	return m, err
}

// Cancel takes back a scheduled or queued (held or not) outbound SMS of
// the company by its uuid: it leaves the queue or the schedule in the same
// transaction, so no dispatch reads it afterwards, and becomes canceled.
// Another company's message, an inbound one, a WhatsApp or iMessage one,
// or an unknown uuid is store.ErrNotFound; one past queued is
// store.ErrNotCancelable, with the message as it is.
func (s *Store) Cancel(companyID uint64, uuid string, now time.Time) (store.Message, error) {
	var out store.Message
	err := s.write("cancel message "+uuid, func(t *txn) error {
		out = store.Message{}
		var m store.Message
		if err := getRec(t, &m, "SELECT rec FROM messages WHERE company_id = $1 AND uuid = $2 FOR UPDATE", id(companyID), uuid); err != nil {
			return err
		}
		// The SMS queue's route cancels SMS only, as it reads SMS only.
		if m.Direction != store.Outbound || store.IsAgentChannel(m.Channel) {
			return store.ErrNotFound
		}
		out = m
		if m.Status != store.MsgScheduled && m.Status != store.MsgQueued {
			return store.ErrNotCancelable
		}
		from := m.Status
		m.Status, m.Error, m.UpdatedAt = store.MsgCanceled, "", now.UTC()
		if err := countTransition(t, m, from, "", now); err != nil {
			return err
		}
		if err := updateSend(t, m); err != nil {
			return err
		}
		out = m
		return nil
	})
	return out, err
}

// NextDue returns the send_at of the earliest scheduled message, or the
// opening of the earliest held one's window; ok is false when none waits.
func (s *Store) NextDue() (at time.Time, ok bool, err error) {
	err = s.read("next scheduled message", func(t *txn) error {
		var due *time.Time
		if err := t.row("SELECT min(due_at) FROM messages WHERE due_at IS NOT NULL").Scan(&due); err != nil {
			return err
		}
		if due != nil {
			at, ok = due.UTC(), true
		}
		return nil
	})
	if err != nil {
		return time.Time{}, false, err
	}
	return at, ok, nil
}
