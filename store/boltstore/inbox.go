package boltstore

import (
	"github.com/simrelay/simrelay/store"

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
		msgDevKey(m, []byte{tagAll}, id),
		msgDevKey(m, []byte{tagSlot}, []byte(m.SIMSlot), id),
	}
}

// StoreInbound stores a message a phone received, once per (device,
// client_id): a repeat answers the message stored the first time, with dup
// true. m names its device by CompanyID and DeviceID, as the phone's link
// knows them; a device that is gone, or whose company is closing
// (MarkCompanyClosing) or not stored, is ErrDeviceGone, a repeat too, read
// in this transaction, and client_ids of another registration of the same
// handset never match. A new message's webhook event (SetInboundEvents) is
// written in the same transaction, so both are durable together or not at
// all. A new message counts against its company's daily storage budget:
// over it, nothing is stored and the error
// wraps ErrStorageBudget (a *BudgetError).
// Over it, a stop keyword still puts its sender on the opt-out list, within
// the list's overdraft (store.OptOutOverdraft), so that the sends accepted
// before it stop now; the message itself waits for the phone's resend.
func (s *Store) StoreInbound(m *Message, now func() time.Time) (Message, bool, error) {
	var out Message
	var dup bool
	var refused error
	err := s.grouped(func(tx *bolt.Tx) error {
		out, dup, refused = Message{}, false, nil
		// Refusals write nothing and return nil, so that they never fail
		// the batch they share with other writers.
		d, err := liveDeviceRefOfOpenCompany(tx, m.CompanyID, m.DeviceID)
		if errors.Is(err, ErrDeviceGone) {
			refused = err
			return nil
		}
		if err != nil {
			return err
		}
		msgs := tx.Bucket(bucketMessages)
		ck := devKey(d.CompanyID, d.ID, []byte(m.ClientID))
		if id := tx.Bucket(bucketInboundClient).Get(ck); id != nil {
			dup = true
			if err := getJSON(msgs, id, &out); err != nil {
				return err
			}
			if out.CompanyID != d.CompanyID || out.DeviceID != d.ID {
				return fmt.Errorf("inbound dedupe entry %x names message %d of another device", ck, out.ID)
			}
			return nil
		}
		msg := *m
		msg.CompanyID, msg.DeviceID, msg.Device, msg.Direction, msg.Status = d.CompanyID, d.ID, d.Fingerprint, Inbound, MsgReceived
		msg.CreatedAt = now().UTC()
		msg.UpdatedAt = msg.CreatedAt
		if err := s.charge(tx, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg)); err != nil {
			if errors.As(err, new(*BudgetError)) {
				refused = err
				// A STOP still lists its sender (within the opt-out
				// overdraft): the message waits for the phone's resend.
				return s.applyOptOutKeyword(tx, msg, true)
			}
			return err
		}
		id, err := msgs.NextSequence()
		if err != nil {
			return err
		}
		msg.ID = id
		if err := insertMessage(tx, &msg); err != nil {
			return err
		}
		if err := count(tx, msg, msg.CreatedAt, Counts{Received: 1}); err != nil {
			return err
		}
		if err := addActivity(tx, msg.CompanyID, Activity{Type: ActMessageReceived, At: msg.CreatedAt, Description: store.ChannelLabel(msg.Channel) + " from " + store.MaskPhone(msg.Phone) + " received on " + store.ActivityName(d.Label)}); err != nil {
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
		if err := s.applyOptOutKeyword(tx, msg, false); err != nil {
			return err
		}
		if err := s.inboundEvent(tx, msg); err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return out, false, fmt.Errorf("store: inbound: %w", err)
	}
	return out, dup, nil
}

// InboundList returns the newest inbound messages matching q, newest first,
// walking an index made for exactly that filter, so its cost does not grow
// with the number of stored messages. A device filter names the company's
// live device; it lists that registration's messages only, and any other
// fingerprint (unknown, another company's) is ErrDeviceGone. A limit below
// 1 lists none.
func (s *Store) InboundList(q InboundQuery) ([]Message, error) {
	var out []Message
	err := s.view(func(tx *bolt.Tx) error {
		bucket := bucketInboundCompany
		var prefix []byte
		var dev Device
		if q.Device != "" {
			var err error
			if dev, err = liveDevice(tx, q.CompanyID, q.Device); err != nil {
				return err
			}
		}
		switch {
		case q.Device != "" && q.SIMSlot != "":
			bucket, prefix = bucketInboundDevice, devKey(dev.CompanyID, dev.ID, []byte{tagSlot}, []byte(q.SIMSlot))
		case q.Device != "":
			bucket, prefix = bucketInboundDevice, devKey(dev.CompanyID, dev.ID, []byte{tagAll})
		case q.SIMSlot != "":
			prefix = append(append(itob(q.CompanyID), tagSlot), q.SIMSlot...)
		default:
			prefix = append(itob(q.CompanyID), tagAll)
		}
		if q.Limit < 1 {
			return nil
		}
		msgs := tx.Bucket(bucketMessages)
		var err error
		reverse(tx.Bucket(bucket), prefix, func(k []byte) bool {
			var m Message
			if err = getJSON(msgs, k[len(prefix):], &m); err != nil {
				return false
			}
			if m.CompanyID == q.CompanyID && (q.Device == "" || m.DeviceID == dev.ID) {
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

// History is one page of the exchange of the company's live device
// (fingerprint) with one number, newest first, with the conversation's
// total. It shows that registration's messages only; a fingerprint that is
// unknown or another company's is ErrDeviceGone. Deep pages skip keys only,
// never records; a page past the end is empty, however large its number.
func (s *Store) History(companyID uint64, device, phone string, page, limit int) ([]Message, int, error) {
	var out []Message
	total := 0
	err := s.view(func(tx *bolt.Tx) error {
		d, err := liveDevice(tx, companyID, device)
		if err != nil {
			return err
		}
		var c Conversation
		if err := getJSON(tx.Bucket(bucketConversations), convKey(d.CompanyID, d.ID, phone), &c); err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return err
		}
		total = c.MessageCount
		skip, ok := pageOffset(page, limit, total)
		if !ok {
			return nil
		}
		msgs := tx.Bucket(bucketMessages)
		prefix := devKey(d.CompanyID, d.ID, []byte(phone), []byte{0})
		reverse(tx.Bucket(bucketConvMessages), prefix, func(k []byte) bool {
			if skip > 0 {
				skip--
				return true
			}
			var m Message
			if err = getJSON(msgs, k[len(prefix):], &m); err != nil {
				return false
			}
			if m.CompanyID != d.CompanyID || m.DeviceID != d.ID {
				err = fmt.Errorf("history entry %x names message %d of another device", k, m.ID)
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

// Conversations lists the conversations of the company's live device
// (fingerprint), the latest message first: that registration's only, up
// to limit (0: no limit) and to the one whose last message brings their
// texts to store.ConversationsText. A fingerprint that is unknown or
// another company's is ErrDeviceGone.
func (s *Store) Conversations(companyID uint64, device string, limit int) ([]Conversation, error) {
	var out []Conversation
	err := s.view(func(tx *bolt.Tx) error {
		d, err := liveDevice(tx, companyID, device)
		if err != nil {
			return err
		}
		convs := tx.Bucket(bucketConversations)
		prefix := devKey(d.CompanyID, d.ID)
		text := 0
		reverse(tx.Bucket(bucketConvOrder), prefix, func(k []byte) bool {
			phone := tx.Bucket(bucketConvOrder).Get(k)
			var c Conversation
			if err = getJSON(convs, convKey(d.CompanyID, d.ID, string(phone)), &c); err != nil {
				return false
			}
			out = append(out, c)
			text += len(c.LastMessage)
			return (limit <= 0 || len(out) < limit) && text < store.ConversationsText
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: conversations: %w", err)
	}
	return out, nil
}
