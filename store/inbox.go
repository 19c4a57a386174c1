package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Index keys of inbound messages; the tag byte keeps the all-slots and the
// one-slot entries apart so each prefix walks only its own entries.
const (
	tagAll  = 1
	tagSlot = 2
)

func inboundCompanyKeys(m Message) [][]byte {
	id := itob(m.ID)
	c := itob(m.CompanyID)
	return [][]byte{
		append(append(c, tagAll), id...),
		append(append(append(c, tagSlot), m.SIMSlot...), id...),
	}
}

func inboundDeviceKeys(m Message) [][]byte {
	id := itob(m.ID)
	return [][]byte{
		devKey(m.Device, []byte{tagAll}, id),
		devKey(m.Device, []byte{tagSlot}, []byte(m.SIMSlot), id),
	}
}

// StoreInbound stores a message a phone received, once per (device,
// client_id): a repeat answers the message stored the first time, with dup
// true. extra runs in the same transaction for a new message (the webhook
// outbox), so both are durable together or not at all. A new message counts
// against its company's daily storage budget: over it, nothing is stored and
// the error wraps ErrStorageBudget (a *BudgetError).
func (s *Store) StoreInbound(m *Message, now func() time.Time, extra func(tx *bolt.Tx, m Message) error) (Message, bool, error) {
	var out Message
	var dup bool
	err := s.grouped(func(tx *bolt.Tx) error {
		dup = false
		msgs := tx.Bucket(bucketMessages)
		ck := devKey(m.Device, []byte(m.ClientID))
		if id := tx.Bucket(bucketInboundClient).Get(ck); id != nil {
			dup = true
			return getJSON(msgs, id, &out)
		}
		var d Device
		if err := getJSON(tx.Bucket(bucketDevices), []byte(m.Device), &d); err != nil {
			return ErrDeviceGone
		}
		msg := *m
		id, err := msgs.NextSequence()
		if err != nil {
			return err
		}
		msg.ID, msg.CompanyID, msg.Direction, msg.Status = id, d.CompanyID, Inbound, MsgReceived
		msg.CreatedAt = now().UTC()
		msg.UpdatedAt = msg.CreatedAt
		if err := s.charge(tx, msg.CompanyID, msg.CreatedAt, messageCost(msg)); err != nil {
			return err
		}
		if err := insertMessage(tx, &msg); err != nil {
			return err
		}
		if err := tx.Bucket(bucketInboundClient).Put(ck, itob(id)); err != nil {
			return err
		}
		for _, k := range inboundCompanyKeys(msg) {
			if err := tx.Bucket(bucketInboundCompany).Put(k, nil); err != nil {
				return err
			}
		}
		for _, k := range inboundDeviceKeys(msg) {
			if err := tx.Bucket(bucketInboundDevice).Put(k, nil); err != nil {
				return err
			}
		}
		if extra != nil {
			if err := extra(tx, msg); err != nil {
				return err
			}
		}
		out = msg
		return nil
	})
	if err != nil {
		return out, false, fmt.Errorf("store: inbound: %w", err)
	}
	return out, dup, nil
}

// InboundQuery filters the inbound list; empty fields match all.
type InboundQuery struct {
	CompanyID uint64
	Device    string
	SIMSlot   string
	Limit     int
}

// InboundList returns the newest inbound messages matching q, newest first,
// walking an index made for exactly that filter, so its cost does not grow
// with the number of stored messages.
func (s *Store) InboundList(q InboundQuery) ([]Message, error) {
	bucket := bucketInboundCompany
	var prefix []byte
	switch {
	case q.Device != "" && q.SIMSlot != "":
		bucket, prefix = bucketInboundDevice, devKey(q.Device, []byte{tagSlot}, []byte(q.SIMSlot))
	case q.Device != "":
		bucket, prefix = bucketInboundDevice, devKey(q.Device, []byte{tagAll})
	case q.SIMSlot != "":
		prefix = append(append(itob(q.CompanyID), tagSlot), q.SIMSlot...)
	default:
		prefix = append(itob(q.CompanyID), tagAll)
	}
	var out []Message
	err := s.db.View(func(tx *bolt.Tx) error {
		msgs := tx.Bucket(bucketMessages)
		var err error
		reverse(tx.Bucket(bucket), prefix, func(k []byte) bool {
			var m Message
			if err = getJSON(msgs, k[len(prefix):], &m); err != nil {
				return false
			}
			if m.CompanyID == q.CompanyID {
				out = append(out, m)
			}
			return len(out) < q.Limit
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: inbound list: %w", err)
	}
	return out, nil
}

// reverse calls fn with the keys under prefix, last first, until fn says stop.
func reverse(b *bolt.Bucket, prefix []byte, fn func(k []byte) bool) {
	c := b.Cursor()
	end := append(append([]byte(nil), prefix...), bytes.Repeat([]byte{0xff}, 9)...)
	k, _ := c.Seek(end)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if !fn(k) {
			return
		}
	}
}

// History is one page of a device's exchange with one number, newest first,
// with the conversation's total. Deep pages skip keys only, never records.
func (s *Store) History(device, phone string, page, limit int) ([]Message, int, error) {
	var out []Message
	total := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		var c Conversation
		if err := getJSON(tx.Bucket(bucketConversations), convKey(device, phone), &c); err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return err
		}
		total = c.MessageCount
		skip := (page - 1) * limit
		if skip >= total {
			return nil
		}
		msgs := tx.Bucket(bucketMessages)
		prefix := devKey(device, []byte(phone), []byte{0})
		var err error
		reverse(tx.Bucket(bucketConvMessages), prefix, func(k []byte) bool {
			if skip > 0 {
				skip--
				return true
			}
			var m Message
			if err = getJSON(msgs, k[len(prefix):], &m); err != nil {
				return false
			}
			out = append(out, m)
			return len(out) < limit
		})
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: history: %w", err)
	}
	return out, total, nil
}

// Conversations lists a device's conversations, the latest message first.
func (s *Store) Conversations(device string, limit int) ([]Conversation, error) {
	var out []Conversation
	err := s.db.View(func(tx *bolt.Tx) error {
		convs := tx.Bucket(bucketConversations)
		prefix := devKey(device)
		var err error
		reverse(tx.Bucket(bucketConvOrder), prefix, func(k []byte) bool {
			phone := tx.Bucket(bucketConvOrder).Get(k)
			var c Conversation
			if err = getJSON(convs, convKey(device, string(phone)), &c); err != nil {
				return false
			}
			out = append(out, c)
			return limit <= 0 || len(out) < limit
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: conversations: %w", err)
	}
	return out, nil
}
