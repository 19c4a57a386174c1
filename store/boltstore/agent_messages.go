package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// WhatsApp and iMessage messages are Messages with Channel whatsapp or
// imessage. They are queued per company and NUMBER, not per device, so a
// number that moves to another agent keeps its queue; they share the
// messages bucket, uuid index, expiry index, sending index (keyed by the
// device that acked them), idempotency answers, plan limit, storage budget,
// counters and status transitions (Transition) with SMS.

func agentMsgKey(m Message) []byte {
	return append(pair(m.CompanyID, m.NumberID), itob(m.ID)...)
}

// handedKey is m's key in agent_handed: the queued WhatsApp and iMessage
// sends of each registration they were last handed to (Message.HandedTo),
// so that an agent's hello reads the sends handed to it (AgentRelease),
// not the company's whole queue. A send has its key while it is queued and
// handed to a registration: the hand-out (AgentHandOut) puts it, moving it
// from a registration since deleted; a release (releaseLost) and whatever
// takes the send out of the queue (leaveQueue: an ack or report, an
// expiry) delete it. A registration deleted keeps the keys of the sends
// handed to it until they leave the queue or are handed to another: no
// hello of it reads them again.
func handedKey(companyID, deviceID, messageID uint64) []byte {
	return devKey(companyID, deviceID, itob(messageID))
}

// mayReport says whether deviceID may report the message
// (store.MayReport): the number's holder is read only for an agent job
// with no hand-out recorded.
func mayReport(tx *bolt.Tx, m Message, deviceID uint64) bool {
	// The look-up takes the two ids it needs, not m: a closure holding m
	// would put a copy of the message on the heap for every report.
	companyID, numberID := m.CompanyID, m.NumberID
	return MayReport(m, deviceID, func() uint64 {
		n, err := numberByRef(tx, companyID, numberID)
		if err != nil {
			return 0
		}
		return n.DeviceID
	})
}

// AgentHandOut records, before a link writes it, that the queued WhatsApp
// or iMessage send messageID of the company goes to the device: it answers
// true when the device may have it now (it holds the send's number, which
// is not paused, the send is still queued, and it was handed to no other
// registration that still exists) and then the send is the device's until
// it is settled (Message.HandedTo); false, writing nothing, otherwise. A
// send already handed to the device answers true without a write.
func (s *Store) AgentHandOut(companyID, deviceID, messageID uint64) (bool, error) {
	if s.commit == nil {
		return false, fmt.Errorf("store: hand out message %d to device %d: %w", messageID, deviceID, bolterrors.ErrDatabaseReadOnly)
	}
	mine := false
	// A member of the batch's fold, as the acks and reports are: the
	// record it changes is written once for the batch, with theirs.
	err := s.commit.submitFold(func(tx *bolt.Tx, f *fold) error {
		mine = false
		if !deviceLive(tx, companyID, deviceID) {
			return nil
		}
		m, err := f.messageByID(tx, messageID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.CompanyID != companyID || !IsAgentChannel(m.Channel) || m.NumberID == 0 || m.Status != MsgQueued {
			return nil
		}
		n, err := numberByRef(tx, companyID, m.NumberID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if n.DeviceID != deviceID || n.Status == NumberPaused {
			return nil
		}
		if m.HandedTo == deviceID {
			mine = true
			return nil
		}
		if m.HandedTo != 0 && deviceLive(tx, companyID, m.HandedTo) {
			return nil // the agent it was handed to may still send it
		}
		handed := tx.Bucket(bucketAgentHanded)
		if m.HandedTo != 0 { // a registration since deleted
			if err := handed.Delete(handedKey(companyID, m.HandedTo, m.ID)); err != nil {
				return err
			}
		}
		if err := handed.Put(handedKey(companyID, deviceID, m.ID), nil); err != nil {
			return err
		}
		m.HandedTo = deviceID
		f.put(m)
		mine = true
		return nil
	}).wait()
	if err != nil {
		return false, fmt.Errorf("store: hand out message %d to device %d: %w", messageID, deviceID, err)
	}
	return mine, nil
}

// AgentRelease releases the company's queued WhatsApp and iMessage sends
// last handed to the device registration (Message.HandedTo) whose uuids
// held does not name: the registration's own word (its hello's jobs,
// PROTOCOL.md section 16.1) that it never journaled them, so they were
// lost with a link. Each then reads as handed to none and goes to its
// number's holder (AgentHandOut). It returns the numbers of the sends
// released, each once, as stored now (their holders' links are to be
// kicked). A send handed to the registration and named in held stays its
// own.
//
// The sends handed to the registration are read through their index
// (agent_handed: a hello reads what the agent holds, not the company's
// queue), in a read transaction: the single writer, which the sends of
// the same batch wait on, is taken only with the sends to release, each
// checked again there (still queued, still handed to the registration),
// and a hello that releases nothing (the usual one) writes nothing at all.
func (s *Store) AgentRelease(companyID, deviceID uint64, held []string) ([]AgentNumber, error) {
	if s.commit == nil {
		return nil, fmt.Errorf("store: release the sends handed to device %d: %w", deviceID, bolterrors.ErrDatabaseReadOnly)
	}
	lost := lostTo(companyID, deviceID, held)
	var ids [][]byte // the message keys of the sends to release
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		ids, _, err = lostSends(tx, companyID, deviceID, lost)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: release the sends handed to device %d: %w", deviceID, err)
	}
	if len(ids) == 0 {
		return nil, nil // nothing to release: no write
	}
	var out []AgentNumber
	err = s.grouped(func(tx *bolt.Tx) error {
		var err error
		out, err = releaseLost(tx, companyID, ids, lost)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: release the sends handed to device %d: %w", deviceID, err)
	}
	return out, nil
}

// lostSends returns the keys (of the messages bucket) of the sends handed
// to the registration that lost says are to be released, and how many
// records it read for them: one per send the index names.
func lostSends(tx *bolt.Tx, companyID, deviceID uint64, lost func(Message) bool) (ids [][]byte, read int, err error) {
	msgs := tx.Bucket(bucketMessages)
	prefix := devKey(companyID, deviceID)
	c := tx.Bucket(bucketAgentHanded).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		var m Message
		if err := getJSON(msgs, k[16:], &m); err != nil {
			return nil, read, fmt.Errorf("handed send index entry %x: %w", k, err)
		}
		read++
		if lost(m) {
			ids = append(ids, bytes.Clone(k[16:]))
		}
	}
	return ids, read, nil
}

// lostTo says whether a send is one of the company's that AgentRelease
// releases for the device: queued, handed to it, and not named in held.
func lostTo(companyID, deviceID uint64, held []string) func(Message) bool {
	keep := make(map[string]bool, len(held))
	for _, id := range held {
		keep[id] = true
	}
	return func(m Message) bool {
		return m.CompanyID == companyID && m.Status == MsgQueued && m.HandedTo == deviceID && !keep[m.UUID]
	}
}

// releaseLost is AgentRelease's write: it releases the sends of ids (keys
// of the messages bucket, read outside the writer) that are lost still,
// and returns their numbers, each once. A send settled, handed to another
// agent or pruned since the read is left as it is.
func releaseLost(tx *bolt.Tx, companyID uint64, ids [][]byte, lost func(Message) bool) ([]AgentNumber, error) {
	var out []AgentNumber
	msgs := tx.Bucket(bucketMessages)
	seen := map[uint64]bool{}
	for _, id := range ids {
		var m Message
		err := getJSON(msgs, id, &m)
		if errors.Is(err, ErrNotFound) {
			continue // pruned since the read
		}
		if err != nil {
			return nil, err
		}
		if !lost(m) {
			continue // settled, or handed to another, since the read
		}
		if err := tx.Bucket(bucketAgentHanded).Delete(handedKey(companyID, m.HandedTo, m.ID)); err != nil {
			return nil, err
		}
		m.HandedTo = 0
		if err := putJSON(msgs, id, m); err != nil {
			return nil, err
		}
		if seen[m.NumberID] {
			continue
		}
		seen[m.NumberID] = true
		n, err := numberByRef(tx, companyID, m.NumberID)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// EnqueueAgent stores a WhatsApp or iMessage send (queued) through group
// commit, as Enqueue does for SMS: m names its number by NumberRef (the
// public id) within m.CompanyID and m.Channel; an unknown one is
// ErrNotFound, a paused one ErrNumberPaused. vet runs after those checks and
// before the plan limit and storage budget; any later refusal, or a failed
// commit, calls its undo.
func (s *Store) EnqueueAgent(m *Message, idemKey IdempotencyKey, now func() time.Time, vet SendVet, answer func(Message) (int, []byte)) (Message, *Idempotent, error) {
	var out Message
	var prior *Idempotent
	var undo func()
	giveBack := func() {
		if undo != nil {
			undo()
			undo = nil
		}
	}
	err := s.grouped(func(tx *bolt.Tx) error {
		giveBack() // a batch that runs again takes its slot again
		out, prior = Message{}, nil
		var ik answerKey
		if ik, prior = priorAnswer(tx, m.CompanyID, idemKey, now()); prior != nil {
			return nil
		}
		n, _, err := numberByPublicID(tx, m.CompanyID, m.Channel, m.NumberRef)
		if errors.Is(err, ErrNotFound) {
			return refuse(ErrNotFound)
		}
		if err != nil {
			return err
		}
		if n.Status == NumberPaused {
			return refuse(ErrNumberPaused)
		}
		msg := *m
		msg.CreatedAt = now().UTC()
		msg.UpdatedAt = msg.CreatedAt
		if vet != nil {
			u, err := vet(n, func(since time.Time) []time.Time { return agentSendTimes(tx, n.CompanyID, n.ID, since) })
			if err != nil {
				return refuse(err)
			}
			undo = u
		}
		msg.NumberID, msg.Account, msg.Direction, msg.Status = n.ID, n.Address, Outbound, MsgQueued
		msg.DeviceID, msg.Device = n.DeviceID, n.Device
		usage, err := s.planAllows(tx, msg.CompanyID, msg.CreatedAt, store.LimitMessages)
		if err != nil {
			if errors.As(err, new(*PlanLimitError)) {
				giveBack()
				return refuse(err)
			}
			return err
		}
		if err := s.charge(tx, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg)+int64(len(msg.MediaURL))); err != nil {
			if errors.As(err, new(*BudgetError)) {
				giveBack()
				return refuse(err)
			}
			return err
		}
		// The id is taken once nothing can refuse the send: a refused send
		// leaves no gap in the ids.
		id, err := tx.Bucket(bucketMessages).NextSequence()
		if err != nil {
			return err
		}
		msg.ID = id
		if err := usage.add(tx); err != nil {
			return err
		}
		if err := insertAgentMessage(tx, msg); err != nil {
			return err
		}
		k := agentMsgKey(msg)
		if err := tx.Bucket(bucketAgentQueue).Put(k, nil); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAgentSends).Put(append(append(pair(msg.CompanyID, msg.NumberID), timeKey(msg.CreatedAt)...), itob(id)...), nil); err != nil {
			return err
		}
		if !msg.ExpiresAt.IsZero() {
			if err := tx.Bucket(bucketQueueExpiry).Put(append(timeKey(msg.ExpiresAt), itob(id)...), k); err != nil {
				return err
			}
		}
		if err := ik.keep(tx, msg.CreatedAt, func() (int, []byte) { return answer(msg) }); err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err != nil {
		giveBack()
		return out, nil, fmt.Errorf("store: enqueue %s: %w", m.Channel, err)
	}
	return out, prior, nil
}

// insertAgentMessage writes a new agent message and its uuid and history
// entries (not the SMS conversation and inbound indexes: those are SMS's).
func insertAgentMessage(tx *bolt.Tx, m Message) error {
	if err := putJSON(tx.Bucket(bucketMessages), itob(m.ID), m); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMessageUUIDs).Put([]byte(m.UUID), itob(m.ID)); err != nil {
		return err
	}
	k := agentMsgKey(m) // a new message's id: a key not stored before
	if err := tx.Bucket(bucketAgentMessages).Put(k, nil); err != nil {
		return err
	}
	counts := tx.Bucket(bucketAgentMsgCounts)
	return counts.Put(k[:16], itob(agentMessageCount(counts, k[:16])+1))
}

// agentMessageCount is how many messages agent_messages holds under prefix
// (company, number), as agent_message_counts keeps it.
func agentMessageCount(counts *bolt.Bucket, prefix []byte) uint64 {
	if v := counts.Get(prefix); len(v) == 8 {
		return btoi(v)
	}
	return 0
}

// AgentPending returns up to limit queued messages of the company's number
// (store id) with ids above after, oldest first, when the device
// registration holds the number; for any other device, nothing. A paused
// number's queue is held: nothing, until it is active again. A message
// handed to another registration that still exists keeps HandedTo (it is
// that agent's until settled: not to be handed here); one handed to a
// registration since deleted reads HandedTo 0.
func (s *Store) AgentPending(companyID, deviceID, numberID, after uint64, limit int) ([]Message, error) {
	var out []Message
	err := s.view(func(tx *bolt.Tx) error {
		if !deviceLive(tx, companyID, deviceID) {
			return nil
		}
		n, err := numberByRef(tx, companyID, numberID)
		if err != nil || n.DeviceID != deviceID {
			return nil // the number moved to another agent: its jobs go there
		}
		if n.Status == NumberPaused {
			return nil // held until the number is active again; the TTL still runs
		}
		msgs := tx.Bucket(bucketMessages)
		prefix := pair(companyID, numberID)
		c := tx.Bucket(bucketAgentQueue).Cursor()
		for k, _ := c.Seek(append(pair(companyID, numberID), itob(after+1)...)); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Next() {
			var m Message
			if err := getJSON(msgs, k[16:], &m); err != nil {
				return err
			}
			if m.CompanyID != companyID || m.NumberID != numberID {
				return fmt.Errorf("number queue entry %x names message %d of another number", k, m.ID)
			}
			if m.Status != MsgQueued {
				continue
			}
			if m.HandedTo != 0 && m.HandedTo != deviceID && !deviceLive(tx, companyID, m.HandedTo) {
				m.HandedTo = 0 // handed to a registration since deleted: free
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: pending of number %d of company %d: %w", numberID, companyID, err)
	}
	return out, nil
}

// AgentMessages returns one page (1-based) of the number's messages, both
// directions, newest first, and how many there are: the count the writes
// keep (agent_message_counts), so that a page reads the keys up to its own
// and no more.
func (s *Store) AgentMessages(companyID, numberID uint64, page, limit int) ([]Message, int, error) {
	var out []Message
	total := 0
	err := s.view(func(tx *bolt.Tx) error {
		out, total = nil, 0
		prefix := pair(companyID, numberID)
		msgs := tx.Bucket(bucketMessages)
		skip := math.MaxInt // a page past any possible count: empty
		if page-1 <= math.MaxInt/limit {
			skip = (page - 1) * limit // no overflow wrapping round to an early page
		}
		c := tx.Bucket(bucketAgentMessages).Cursor()
		k, _ := c.Seek(append(pair(companyID, numberID), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		total = int(agentMessageCount(tx.Bucket(bucketAgentMsgCounts), prefix))
		if skip >= total {
			return nil
		}
		for seen := 0; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, _ = c.Prev() {
			if seen++; seen <= skip {
				continue
			}
			var m Message
			if err := getJSON(msgs, k[16:], &m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: messages of number %d: %w", numberID, err)
	}
	return out, total, nil
}

// StoreAgentInbound stores a WhatsApp or iMessage message an agent received,
// once per (device registration, channel, client_id), as StoreInbound does
// for SMS. m carries CompanyID, DeviceID, Channel and Account (the address
// it came to, normalised): a device that is gone, or whose company is
// closing (MarkCompanyClosing) or not stored, is ErrDeviceGone, a repeat
// too, read in this transaction; an address the company has no number for is
// ErrNotFound, one another agent of the company holds ErrNumberNotHeld
// (unless the frame repeats one already stored). A new message's webhook
// event is written in the same transaction.
func (s *Store) StoreAgentInbound(m *Message, now func() time.Time) (Message, bool, error) {
	var out Message
	var dup bool
	err := s.grouped(func(tx *bolt.Tx) error {
		out, dup = Message{}, false
		d, err := liveDeviceRefOfOpenCompany(tx, m.CompanyID, m.DeviceID)
		if errors.Is(err, ErrDeviceGone) {
			return refuse(err)
		}
		if err != nil {
			return err
		}
		var n AgentNumber
		if err := getJSON(tx.Bucket(bucketAgentNumbers), agentNumberKey(d.CompanyID, m.Channel, m.Account), &n); err != nil {
			if errors.Is(err, ErrNotFound) {
				return refuse(err)
			}
			return err
		}
		msgs := tx.Bucket(bucketMessages)
		ck := devKey(d.CompanyID, d.ID, []byte{ChannelByte(m.Channel)}, []byte(m.ClientID))
		if id := tx.Bucket(bucketAgentInClient).Get(ck); id != nil {
			dup = true // acked again even after the number moved on
			return getJSON(msgs, id, &out)
		}
		if n.DeviceID != d.ID {
			// Only the agent whose hello holds the number speaks for it:
			// another agent of the company could otherwise put words in
			// the mouths of the number's contacts (and in its webhooks).
			return refuse(ErrNumberNotHeld)
		}
		msg := *m
		msg.Media = slices.Clone(m.Media) // attachMedia fills in its own copy
		msg.CompanyID, msg.DeviceID, msg.Device, msg.Direction, msg.Status = d.CompanyID, d.ID, d.Fingerprint, Inbound, MsgReceived
		msg.NumberID, msg.NumberRef = n.ID, n.PublicID
		msg.CreatedAt = now().UTC()
		msg.UpdatedAt = msg.CreatedAt
		if err := checkMedia(tx, msg); err != nil {
			if errors.Is(err, ErrMediaUnknown) {
				return refuse(err)
			}
			return err
		}
		if err := s.charge(tx, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg)); err != nil {
			if errors.As(err, new(*BudgetError)) {
				return refuse(err)
			}
			return err
		}
		if msg.ID, err = msgs.NextSequence(); err != nil {
			return err
		}
		if err := attachMedia(tx, &msg); err != nil {
			return err
		}
		if err := insertAgentMessage(tx, msg); err != nil {
			return err
		}
		if err := count(tx, msg, msg.CreatedAt, Counts{Received: 1}); err != nil {
			return err
		}
		if err := addActivity(tx, msg.CompanyID, Activity{Type: ActMessageReceived, At: msg.CreatedAt, Description: store.ChannelLabel(msg.Channel) + " from " + store.MaskPhone(msg.Phone) + " received on " + store.ActivityName(d.Label)}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAgentInClient).Put(ck, itob(msg.ID)); err != nil {
			return err
		}
		if err := s.inboundEvent(tx, msg); err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err != nil {
		return out, false, fmt.Errorf("store: %s inbound: %w", m.Channel, err)
	}
	return out, dup, nil
}
