package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Scheduled and canceled outbound messages. A scheduled message waits in a
// due-time index (send_at then id), not in its device's queue, so the
// scheduler reads only the first key to know when to wake and the keys that
// are due when it does: its cost never grows with the messages stored.
//
// A queued message that a link would take outside its sending window is
// held: it stays queued, but waits in the same index, keyed by the
// window's next opening (HeldUntil), and the scheduler puts it back in its
// device's queue then. Held, it keeps its expiry entry: it still expires.

var (
	bucketScheduleDue  = []byte("schedule_due")  // send_at id -> dev
	bucketDevScheduled = []byte("dev_scheduled") // dev id -> nil: a device's scheduled and held messages, for its deletion
)

// placeOutbound puts a new outbound message where its status says it waits:
// in its device's queue (and the expiry index), or in the due-time index.
func placeOutbound(tx *bolt.Tx, m Message) error {
	if m.Status == MsgScheduled || m.Held() {
		if err := tx.Bucket(bucketDevScheduled).Put(msgDevKey(m, itob(m.ID)), nil); err != nil {
			return err
		}
		if err := tx.Bucket(bucketScheduleDue).Put(append(timeKey(m.DueAt()), itob(m.ID)...), msgDevKey(m)); err != nil {
			return err
		}
		if m.Status == MsgScheduled {
			return nil // its time to live starts at send_at
		}
	} else if m.Priority > 0 {
		if err := tx.Bucket(bucketPrioQueue).Put(prioKey(m), itob(m.ID)); err != nil {
			return err
		}
	} else {
		var id []byte // the key names the message unless its place is another number
		if m.QueueSeq != 0 {
			id = itob(m.ID)
		}
		if err := tx.Bucket(bucketQueue).Put(msgDevKey(m, itob(m.QueuePlace())), id); err != nil {
			return err
		}
	}
	if m.ExpiresAt.IsZero() {
		return nil
	}
	return tx.Bucket(bucketQueueExpiry).Put(expiryKey(m.ExpiresAt, m.ID), msgDevKey(m))
}

// prioKey is a priority job's key in its device's priority queue: higher
// priorities first, then by place, so the queue is FIFO within a priority.
func prioKey(m Message) []byte {
	return msgDevKey(m, []byte{byte(MaxPriority - m.Priority)}, itob(m.QueuePlace()))
}

// leaveSchedule drops a scheduled or held message from the due-time index
// and its device's list.
func leaveSchedule(tx *bolt.Tx, m Message) error {
	if err := tx.Bucket(bucketScheduleDue).Delete(append(timeKey(m.DueAt()), itob(m.ID)...)); err != nil {
		return err
	}
	return tx.Bucket(bucketDevScheduled).Delete(msgDevKey(m, itob(m.ID)))
}

// NextDue returns the send_at of the earliest scheduled message, or the
// opening of the earliest held one's window; ok is false when none waits.
func (s *Store) NextDue() (at time.Time, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketScheduleDue).Cursor().First()
		if k != nil {
			at, ok = time.Unix(0, int64(btoi(k[:8]))).UTC(), true
		}
		return nil
	})
	if err != nil {
		return at, false, fmt.Errorf("store: next scheduled message: %w", err)
	}
	return at, ok, nil
}

// ReleaseDue moves up to limit scheduled messages whose send_at is not
// after now, and held ones whose window opened, into their device's
// queue, and returns them as they now are. It vets each again in the same
// transaction: a recipient who opted out since makes it failed
// (recipient_opted_out), and so does a device that is gone
// (device_deleted); both write their status events. One whose window is
// closed now is held until it opens.
func (s *Store) ReleaseDue(now time.Time, limit int) ([]Message, error) {
	var out []Message
	err := s.grouped(func(tx *bolt.Tx) error {
		out = out[:0]
		due := tx.Bucket(bucketScheduleDue)
		msgs := tx.Bucket(bucketMessages)
		var keys [][]byte
		end := timeKey(now)
		c := due.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], end) <= 0 && len(keys) < limit; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := due.Delete(k); err != nil {
				return err
			}
			var m Message
			if err := getJSON(msgs, k[8:], &m); err != nil {
				return err
			}
			if m.Status != MsgScheduled && !m.Held() {
				continue // a stray key: every move off scheduled or held deletes it
			}
			if err := leaveQueue(tx, m); err != nil {
				return err
			}
			from := m.Status
			_, devErr := liveDeviceRef(tx, m.CompanyID, m.DeviceID)
			switch {
			case s.optedOutTx(tx, m.CompanyID, m.Channel, m.Phone, -1) != nil:
				m.Status, m.Error = MsgFailed, errOptedOut
			case errors.Is(devErr, ErrDeviceGone):
				m.Status, m.Error = MsgFailed, "device_deleted"
			case devErr != nil:
				return devErr
			case m.Window != nil && !m.Window.Open(now):
				m.Status, m.HeldUntil = MsgQueued, m.Window.Next(now)
				if err := placeOutbound(tx, m); err != nil {
					return err
				}
			default:
				// Its place in the queue is taken now, after every id handed
				// out so far: a link's cursor may be past the message's own id.
				m.Status, m.HeldUntil = MsgQueued, time.Time{}
				seq, err := msgs.NextSequence()
				if err != nil {
					return err
				}
				m.QueueSeq = seq
				if err := placeOutbound(tx, m); err != nil {
					return err
				}
			}
			if m.Status != from { // a held message that goes back to its queue stays queued
				m.UpdatedAt = now.UTC()
				if err := countTransition(tx, m, from, "", now); err != nil {
					return err
				}
				if err := s.statusEvent(tx, m, now); err != nil {
					return err
				}
			}
			if err := putJSON(msgs, itob(m.ID), m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: release scheduled messages: %w", err)
	}
	return out, nil
}

// holdClosed moves the jobs of ids that are still queued and outside their
// window at now off their device's queue into the schedule's index, keyed
// by the window's next opening (HeldUntil), where the scheduler queues them
// again. held, when not nil, hears of the jobs it moved after the commit.
func (s *Store) holdClosed(tx *bolt.Tx, ids []uint64, now time.Time, held func([]Message)) error {
	var done []Message
	msgs := tx.Bucket(bucketMessages)
	for _, id := range ids {
		var m Message
		if err := getJSON(msgs, itob(id), &m); err != nil {
			return err
		}
		if m.Status != MsgQueued || m.Held() || m.Window == nil || m.Window.Open(now) {
			continue
		}
		if err := leaveQueue(tx, m); err != nil {
			return err
		}
		m.HeldUntil = m.Window.Next(now) // still queued: updated_at says when the status changed
		if err := placeOutbound(tx, m); err != nil {
			return err
		}
		if err := putJSON(msgs, itob(m.ID), m); err != nil {
			return err
		}
		done = append(done, m)
	}
	if held != nil && len(done) > 0 {
		tx.OnCommit(func() { held(done) })
	}
	return nil
}

// Cancel takes back a scheduled or queued outbound message of the company
// (by queue id): it leaves its index in the same transaction, so no
// dispatch reads it afterwards, and becomes canceled. A message of another
// company is ErrNotFound; one past queued is ErrNotCancelable, with the
// message as it is.
func (s *Store) Cancel(companyID uint64, uuid string, now time.Time) (Message, error) {
	var out Message
	var refused error
	err := s.grouped(func(tx *bolt.Tx) error {
		out, refused = Message{}, nil
		m, err := loadByUUID(tx, uuid)
		// The SMS queue's route cancels SMS only, as it reads SMS only.
		if errors.Is(err, ErrNotFound) || err == nil && (m.CompanyID != companyID || m.Direction != Outbound || IsAgentChannel(m.Channel)) {
			refused = ErrNotFound
			return nil
		}
		if err != nil {
			return err
		}
		out = m
		switch m.Status {
		case MsgScheduled, MsgQueued:
			if err := leaveQueue(tx, m); err != nil {
				return err
			}
		default:
			refused = ErrNotCancelable
			return nil
		}
		from := m.Status
		m.Status, m.Error, m.UpdatedAt = MsgCanceled, "", now.UTC()
		if err := countTransition(tx, m, from, "", now); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketMessages), itob(m.ID), m); err != nil {
			return err
		}
		out = m
		return nil
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return out, fmt.Errorf("store: cancel message %s: %w", uuid, err)
	}
	return out, nil
}
