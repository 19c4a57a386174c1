package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Failover (docs/routing.md): a queued job sent through a pool that no
// phone was handed moves to another member of the pool when its member's
// device stays offline, or its SIM keeps failing with carrier errors. A
// job a phone may have been handed is never moved: it could be sent twice.

// carrierErrors are the phone's failure reasons that speak of the SIM's
// network rather than of the message (PROTOCOL.md, section 9.6).
var carrierErrors = map[string]bool{"generic_failure": true, "no_service": true, "radio_off": true, "null_pdu": true, "ril_network_err": true}

var (
	bucketSIMStreak = []byte("sim_streak") // dev slot -> count(8) + last failure (8, unix ns)
	failoverBuckets = [][]byte{bucketSIMStreak}
)

// noteOutcome keeps the SIM's carrier-error streak as a report of m's
// outcome comes in: a carrier error adds one, a send that went out ends it.
func noteOutcome(tx *bolt.Tx, m Message, status, errText string, now time.Time) error {
	if m.Channel != "" && m.Channel != "sms" {
		return nil
	}
	b := tx.Bucket(bucketSIMStreak)
	k := simKey(m.CompanyID, m.DeviceID, m.SIMSlot)
	switch {
	case status == MsgFailed && carrierErrors[errText]:
		n := uint64(0)
		if v := b.Get(k); len(v) == 16 {
			n = btoi(v[:8])
		}
		return b.Put(k, append(itob(n+1), itob(uint64(now.UnixNano()))...))
	case status == MsgSent || status == MsgDelivered:
		if b.Get(k) != nil {
			return b.Delete(k)
		}
	}
	return nil
}

// carrierFailing says whether the SIM is in a carrier-error streak now.
func carrierFailing(tx *bolt.Tx, companyID, deviceID uint64, slot string, now time.Time) bool {
	v := tx.Bucket(bucketSIMStreak).Get(simKey(companyID, deviceID, slot))
	if len(v) != 16 || btoi(v[:8]) < CarrierErrorStreak {
		return false
	}
	return now.Sub(time.Unix(0, int64(btoi(v[8:])))) < CarrierErrorCooldown
}

// CarrierFailing lists the (device id, slot) SIMs of the company's pools'
// members that are in a carrier-error streak now.
func (s *Store) CarrierFailing(companyID uint64, now time.Time) (map[uint64][]string, error) {
	out := map[uint64][]string{}
	err := s.view(func(tx *bolt.Tx) error {
		walkPrefix(tx.Bucket(bucketSIMStreak), itob(companyID), func(k, _ []byte) bool {
			dev := btoi(k[8:16])
			slot, _, _ := bytes.Cut(k[16:], []byte{0})
			if carrierFailing(tx, companyID, dev, string(slot), now) {
				out[dev] = append(out[dev], string(slot))
			}
			return true
		})
		return nil
	})
	return out, err
}

// AllPools returns every company's pools (the failover sweep's list;
// bounded by MaxPools per company).
func (s *Store) AllPools() ([]Pool, error) {
	var out []Pool
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPools).ForEach(func(_, v []byte) error {
			var p Pool
			if err := jsonUnmarshal(v, &p); err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// Failover moves the jobs in.FailoverInput names to another member of
// their pool, chosen as the pool chooses for a send (the device's members
// and the down devices passed over, caps counted), recording the member
// they leave in their attempts, and returns them as they now are, with
// the place the next batch goes on from (store.FailoverInput). A job no
// other member can take stays where it is.
func (s *Store) Failover(in FailoverInput, check DeviceCheck, now time.Time) ([]Message, uint64, error) {
	var moved []Message
	var next uint64
	err := s.grouped(func(tx *bolt.Tx) error {
		moved, next = moved[:0], 0
		msgs := tx.Bucket(bucketMessages)
		prefix := devKey(in.CompanyID, in.DeviceID)
		var jobs []Message
		c := tx.Bucket(bucketQueue).Cursor()
		for k, v := c.Seek(devKey(in.CompanyID, in.DeviceID, itob(in.After+1))); k != nil && bytes.HasPrefix(k, prefix) && len(jobs) < in.Limit; k, v = c.Next() {
			id := k[len(prefix):]
			if len(v) == 8 {
				id = v
			}
			var m Message
			if err := getJSON(msgs, id, &m); err != nil {
				return err
			}
			if m.Status == MsgQueued && in.Pools[m.PoolID] && (in.Slot == "" || m.SIMSlot == in.Slot) {
				jobs = append(jobs, m)
				if len(jobs) == in.Limit {
					next = btoi(k[len(prefix):])
				}
			}
		}
		tally := newSIMTally(tx, now)
		pickers := map[uint64]*poolPicker{}
		for _, m := range jobs {
			pp, ok := pickers[m.PoolID]
			if !ok {
				var p Pool
				if err := getJSON(tx.Bucket(bucketPools), pair(m.CompanyID, m.PoolID), &p); err != nil {
					if errors.Is(err, ErrNotFound) {
						pickers[m.PoolID] = nil // the pool is gone: the job stays
						continue
					}
					return err
				}
				pp = newPicker(tx, p, check, tally)
				pp.skip = in.PassOver
				pickers[m.PoolID] = pp
			}
			if pp == nil {
				continue
			}
			from := m
			d, err := pp.pickFor(&m)
			if err != nil {
				return err
			}
			if d.refused != nil {
				continue // no other member can take it now
			}
			if err := s.moveJob(tx, from, &m, d.Device, in.Reason, now); err != nil {
				return err
			}
			moved = append(moved, m)
		}
		if len(moved) == 0 {
			// Nothing written (a picker writes only in its commit): the
			// batch this shares commits as it would without it. An error
			// here rolled the batch back and ran its other writes again,
			// every sweep for each offline pool device.
			return nil
		}
		for _, pp := range pickers {
			if pp != nil {
				if err := pp.commit(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: failover of device %d: %w", in.DeviceID, err)
	}
	return moved, next, nil
}

// moveJob moves the queued job from (as stored) to m's new device d: out
// of the old device's queue and conversation, into the new one's, behind
// every place handed out so far, with the member it left in its attempts.
func (s *Store) moveJob(tx *bolt.Tx, from Message, m *Message, d Device, reason string, now time.Time) error {
	if err := leaveQueue(tx, from); err != nil {
		return err
	}
	if err := leaveConversation(tx, from); err != nil {
		return err
	}
	seq, err := tx.Bucket(bucketMessages).NextSequence()
	if err != nil {
		return err
	}
	m.DeviceID, m.QueueSeq, m.UpdatedAt = d.ID, seq, now.UTC()
	m.Attempts = append(m.Attempts, Attempt{Device: from.Device, SIMSlot: from.SIMSlot, Reason: reason, MovedAt: now.UTC()})
	if n := len(m.Attempts); n > MaxAttempts {
		m.Attempts = slices.Delete(m.Attempts, 0, n-MaxAttempts) // the newest are kept
	}
	if err := joinConversation(tx, *m); err != nil {
		return err
	}
	if err := putJSON(tx.Bucket(bucketMessages), itob(m.ID), m); err != nil {
		return err
	}
	return placeOutbound(tx, *m)
}

// joinConversation puts a message that moved to its new device into that
// device's conversation with its recipient, in its place by id.
func joinConversation(tx *bolt.Tx, m Message) error {
	if err := tx.Bucket(bucketConvMessages).Put(msgDevKey(m, []byte(m.Phone), []byte{0}, itob(m.ID)), nil); err != nil {
		return err
	}
	convs, order := tx.Bucket(bucketConversations), tx.Bucket(bucketConvOrder)
	ck := convKey(m.CompanyID, m.DeviceID, m.Phone)
	var c Conversation
	if err := getJSON(convs, ck, &c); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	c.MessageCount++
	if c.LastID > m.ID {
		return putJSON(convs, ck, c) // a newer message stays the last
	}
	if c.LastID != 0 {
		if err := order.Delete(msgDevKey(m, itob(c.LastID))); err != nil {
			return err
		}
	}
	c.Phone, c.LastID, c.LastMessage, c.LastMessageAt, c.Direction = m.Phone, m.ID, m.Text, m.CreatedAt, m.Direction
	if err := order.Put(msgDevKey(m, itob(m.ID)), []byte(m.Phone)); err != nil {
		return err
	}
	return putJSON(convs, ck, c)
}

// leaveConversation takes an outbound message out of its device's
// conversation with its recipient, as if it had never been stored there.
func leaveConversation(tx *bolt.Tx, m Message) error {
	idx := tx.Bucket(bucketConvMessages)
	if err := idx.Delete(msgDevKey(m, []byte(m.Phone), []byte{0}, itob(m.ID))); err != nil {
		return err
	}
	convs, order := tx.Bucket(bucketConversations), tx.Bucket(bucketConvOrder)
	ck := convKey(m.CompanyID, m.DeviceID, m.Phone)
	var c Conversation
	if err := getJSON(convs, ck, &c); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	c.MessageCount--
	if c.MessageCount <= 0 {
		if err := order.Delete(msgDevKey(m, itob(c.LastID))); err != nil {
			return err
		}
		return convs.Delete(ck)
	}
	if c.LastID == m.ID {
		// The newest message left: the one before it is the conversation's last.
		prefix := msgDevKey(m, []byte(m.Phone), []byte{0})
		var prev Message
		cur := idx.Cursor()
		cur.Seek(append(bytes.Clone(prefix), itob(m.ID)...))
		pk, _ := cur.Prev()
		if pk == nil || !bytes.HasPrefix(pk, prefix) {
			return convs.Delete(ck)
		}
		if err := getJSON(tx.Bucket(bucketMessages), pk[len(prefix):], &prev); err != nil {
			return err
		}
		if err := order.Delete(msgDevKey(m, itob(c.LastID))); err != nil {
			return err
		}
		c.LastID, c.LastMessage, c.LastMessageAt, c.Direction = prev.ID, prev.Text, prev.CreatedAt, prev.Direction
		if err := order.Put(msgDevKey(m, itob(prev.ID)), []byte(m.Phone)); err != nil {
			return err
		}
	}
	return putJSON(convs, ck, c)
}

// MessageSequence is the last message id (and queue place) handed out.
// A failover run takes it at its start: jobs at or below it may have been
// handed to a phone by an earlier run of the server, which no one knows.
func (s *Store) MessageSequence() (uint64, error) {
	var n uint64
	err := s.view(func(tx *bolt.Tx) error { n = tx.Bucket(bucketMessages).Sequence(); return nil })
	return n, err
}
