package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// In the comments, dev is devKey's 16 bytes: company id + device id.
var (
	bucketMessages       = []byte("messages")           // id -> Message
	bucketMessageUUIDs   = []byte("message_uuids")      // uuid -> id
	bucketQueue          = []byte("dev_queue")          // dev id -> nil: queued, in order
	bucketPrioQueue      = []byte("dev_queue_priority") // dev (MaxPriority-priority) place -> id: queued above priority 0
	bucketSendingIdx     = []byte("dev_sending")        // dev id -> nil: acked, no outcome yet
	bucketQueueExpiry    = []byte("queue_expiry")       // expires_at id -> dev
	bucketConvMessages   = []byte("dev_conv_messages")  // dev phone 0 id -> nil
	bucketConversations  = []byte("dev_conversations")  // dev phone -> Conversation
	bucketConvOrder      = []byte("dev_conv_order")     // dev last id -> phone
	bucketInboundCompany = []byte("inbound_company")    // company tag [slot] id -> nil
	bucketInboundDevice  = []byte("dev_inbound")        // dev tag [slot] id -> nil
	bucketInboundClient  = []byte("dev_inbound_client") // dev client id -> id
	bucketIdempotency    = []byte("idempotency")        // company id 0 route 0 key -> Idempotent (older: company id + key)
	messageBuckets       = [][]byte{bucketMessages, bucketMessageUUIDs, bucketQueue, bucketPrioQueue, bucketSendingIdx, bucketQueueExpiry, bucketConvMessages, bucketConversations, bucketConvOrder, bucketInboundCompany, bucketInboundDevice, bucketInboundClient, bucketIdempotency}
)

func convKey(companyID, deviceID uint64, phone string) []byte {
	return devKey(companyID, deviceID, []byte(phone))
}

func timeKey(t time.Time) []byte { return itob(uint64(t.UnixNano())) }

// Enqueue stores an outbound message (queued) through group commit and, with
// an idempotency key, the answer to give for it; the key's earlier answer
// comes back instead when the company used the key before (and nothing is
// queued). answer builds the response from the stored message.
//
// check, when set, vets the device inside the transaction; its error refuses
// the send without failing the writes it shares a commit with. When m names
// a pool, the pool chooses the device and SIM there (route), passing over
// the members check refuses.
func (s *Store) Enqueue(m *Message, idemKey IdempotencyKey, now func() time.Time, check DeviceCheck, answer func(Message) (int, []byte)) (Message, *Idempotent, error) {
	if s.commit == nil {
		return Message{}, nil, fmt.Errorf("store: enqueue: %w", bolterrors.ErrDatabaseReadOnly)
	}
	op := &enqueueOp{s: s, m: m, idemKey: idemKey, now: now, check: check, answer: answer}
	op.req.init(op, nil)
	err := s.commit.queue(&op.req).wait()
	var msg Message
	if op.stored {
		msg = op.out
	}
	if err != nil {
		return msg, nil, fmt.Errorf("store: enqueue: %w", err)
	}
	return msg, op.prior, nil
}

// enqueueOp is one Enqueue: its arguments, its own commit request, the
// write it makes (write) and what the write leaves. A send costs one
// allocation for them and the request's channel, where a closure would
// cost three more (the closure, and the results it sets and its message,
// which setting them from a closure puts on the heap).
type enqueueOp struct {
	req     commitReq
	s       *Store
	m       *Message
	idemKey IdempotencyKey
	now     func() time.Time
	check   DeviceCheck
	answer  func(Message) (int, []byte)
	// Set inside the transaction, afresh each time it runs.
	out    Message // the message as stored, when stored is set
	stored bool
	prior  *Idempotent
}

func (op *enqueueOp) write(tx *bolt.Tx) error {
	s, m, now, check, answer := op.s, op.m, op.now, op.check, op.answer
	op.stored, op.prior = false, nil
	var ik answerKey
	if ik, op.prior = priorAnswer(tx, m.CompanyID, op.idemKey, now()); op.prior != nil {
		return nil
	}
	msg := *m
	d, placed, err := route(tx, &s.commit.devices, &msg, check, now())
	if err != nil {
		return err
	}
	if err := d.refused; err != nil {
		return refuse(err)
	}
	if err := s.optedOutTx(tx, m.CompanyID, m.Channel, m.Phone, -1); err != nil {
		return refuse(err)
	}
	id, err := tx.Bucket(bucketMessages).NextSequence()
	if err != nil {
		return err
	}
	// Time is taken inside the single writer, so ids and created_at rise together.
	msg.ID, msg.DeviceID, msg.Direction, msg.Status = id, d.ID, Outbound, MsgQueued
	if !msg.SendAt.IsZero() {
		msg.Status = MsgScheduled
	}
	msg.CreatedAt = now().UTC()
	msg.UpdatedAt = msg.CreatedAt
	usage, err := s.planAllows(tx, msg.CompanyID, msg.CreatedAt, store.LimitMessages)
	if err != nil {
		if errors.As(err, new(*PlanLimitError)) {
			return refuse(err) // nothing written yet
		}
		return err
	}
	if err := s.charge(tx, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg)); err != nil {
		if errors.As(err, new(*BudgetError)) {
			return refuse(err) // nothing written yet: the batch need not run again
		}
		return err
	}
	if err := usage.add(tx); err != nil {
		return err
	}
	if err := placed.commit(); err != nil {
		return err
	}
	if err := insertMessage(tx, &msg); err != nil {
		return err
	}
	if err := placeOutbound(tx, msg); err != nil {
		return err
	}
	if err := ik.keep(tx, msg.CreatedAt, func() (int, []byte) { return answer(msg) }); err != nil {
		return err
	}
	op.out, op.stored = msg, true
	return nil
}

// insertMessage writes a new message with its uuid and conversation entries.
func insertMessage(tx *bolt.Tx, m *Message) error {
	if err := putMessage(tx.Bucket(bucketMessages), itob(m.ID), m); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMessageUUIDs).Put([]byte(m.UUID), itob(m.ID)); err != nil {
		return err
	}
	if m.DeviceID == 0 {
		return fmt.Errorf("message %s has no device id", m.UUID)
	}
	if err := tx.Bucket(bucketConvMessages).Put(msgDevKey(*m, []byte(m.Phone), []byte{0}, itob(m.ID)), nil); err != nil {
		return err
	}
	convs := tx.Bucket(bucketConversations)
	order := tx.Bucket(bucketConvOrder)
	ck := convKey(m.CompanyID, m.DeviceID, m.Phone)
	var c Conversation
	if err := getConversation(convs, ck, &c); err == nil {
		if err := order.Delete(msgDevKey(*m, itob(c.LastID))); err != nil {
			return err
		}
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	c = Conversation{Phone: m.Phone, LastMessage: m.Text, LastMessageAt: m.CreatedAt, Direction: m.Direction, MessageCount: c.MessageCount + 1, LastID: m.ID}
	if err := order.Put(msgDevKey(*m, itob(m.ID)), []byte(m.Phone)); err != nil {
		return err
	}
	return putConversation(convs, ck, &c)
}

func loadByUUID(tx *bolt.Tx, uuid string) (Message, error) {
	var m Message
	id := tx.Bucket(bucketMessageUUIDs).Get([]byte(uuid))
	if id == nil {
		return m, ErrNotFound
	}
	return m, getMessage(tx.Bucket(bucketMessages), id, &m)
}

// leaveQueue drops a message from the queue and expiry indexes, or, when
// it is scheduled, from the schedule's; a held one leaves both the
// schedule's and the expiry index. A WhatsApp or iMessage send handed to
// an agent leaves the index of those (handedKey) too.
func leaveQueue(tx *bolt.Tx, m Message) error {
	if m.Status == MsgScheduled {
		return leaveSchedule(tx, m)
	}
	if m.Held() {
		if err := leaveSchedule(tx, m); err != nil {
			return err
		}
	} else {
		queue, key := tx.Bucket(bucketQueue), msgDevKey(m, itob(m.QueuePlace()))
		switch {
		case IsAgentChannel(m.Channel):
			queue, key = tx.Bucket(bucketAgentQueue), agentMsgKey(m)
			if m.HandedTo != 0 {
				if err := tx.Bucket(bucketAgentHanded).Delete(handedKey(m.CompanyID, m.HandedTo, m.ID)); err != nil {
					return err
				}
			}
		case m.Priority > 0:
			queue, key = tx.Bucket(bucketPrioQueue), prioKey(m)
		}
		if err := queue.Delete(key); err != nil {
			return err
		}
	}
	if m.ExpiresAt.IsZero() {
		return nil
	}
	return tx.Bucket(bucketQueueExpiry).Delete(expiryKey(m.ExpiresAt, m.ID))
}

// rank orders outbound statuses so a late or repeated report never moves a
// message backwards.
var rank = map[string]int{MsgScheduled: -1, MsgQueued: 0, MsgExpired: 1, MsgCanceled: 1, MsgSending: 2, MsgSent: 3, MsgDelivered: 4, MsgFailed: 4}

// Transition moves an outbound message of the device (company and device
// id, as the phone's link knows them) to status (sending on an ack; sent,
// delivered or failed on a report). A report that would move it backwards,
// or repeats what is stored, changes nothing and is no error. A message of
// another device, of another registration of the same handset, or of a
// device that is gone, is ErrNotFound. moved says whether the report
// changed the stored status: the hub lets only such reports (news a job can
// give at most once per step) pass its flood limit for free.
func (s *Store) Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (out Message, moved bool, err error) {
	return s.transition(companyID, deviceID, uuid, status, errText, statusAt, "", now)
}

func (s *Store) transition(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) (out Message, moved bool, err error) {
	return s.TransitionLater(companyID, deviceID, uuid, status, errText, statusAt, detail, now).Wait()
}

// transit is a report's change of a message on its way through the group
// commit (TransitionLater).
// It is its own commit request and change: a report costs one allocation
// for them, not three (the request, the change's closure and this).
type transit struct {
	req                                     commitReq
	s                                       *Store
	companyID, deviceID                     uint64
	uuid, status, errText, statusAt, detail string
	now                                     time.Time
	out                                     Message // set inside the transaction
	moved                                   bool    // set inside the transaction
}

func (t *transit) change(tx *bolt.Tx, f *fold) error {
	return t.s.transitionTx(tx, f, t, t.companyID, t.deviceID, t.uuid, t.status, t.errText, t.statusAt, t.detail, t.now)
}

// TransitionLater queues the change TransitionDetail makes for the next
// group commit and returns at once; Wait gives its outcome once it is
// durable. Changes queued one after another by one goroutine commit in
// that order, so a phone's link can read its next report while the last
// one waits for its fsync, and still apply each job's reports in the
// order the phone made them.
func (s *Store) TransitionLater(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) Transit {
	t := &transit{s: s, companyID: companyID, deviceID: deviceID, uuid: uuid, status: status,
		errText: errText, statusAt: statusAt, detail: detail, now: now}
	t.req.init(nil, t)
	if s.commit == nil {
		t.req.answer(bolterrors.ErrDatabaseReadOnly)
		return t
	}
	s.commit.queue(&t.req)
	return t
}

// Wait returns the message as the change left it, whether the change moved
// it, and any error, once the change is durable; call it once.
func (t *transit) Wait() (Message, bool, error) {
	if err := t.req.wait(); err != nil {
		return t.out, false, fmt.Errorf("store: message %s to %s: %w", t.uuid, t.status, err)
	}
	return t.out, t.moved, nil
}

// transitionTx makes the change of TransitionLater inside the transaction,
// setting t's results. A batch that failed runs it again, so it sets them
// afresh each time. The message's record and its dev_sending entry are
// read and written through f, which writes them once for the changes
// that follow one another in the batch.
func (s *Store) transitionTx(tx *bolt.Tx, f *fold, t *transit, companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) error {
	t.out, t.moved = Message{}, false
	d, err := liveDeviceRef(tx, companyID, deviceID)
	if err != nil {
		if errors.Is(err, ErrDeviceGone) {
			return refuse(ErrNotFound)
		}
		return err
	}
	m, err := f.message(tx, uuid)
	if errors.Is(err, ErrNotFound) {
		return refuse(err)
	}
	if err != nil {
		return err
	}
	if m.CompanyID != companyID || m.Direction != Outbound || !mayReport(tx, m, deviceID) {
		return refuse(ErrNotFound)
	}
	t.out = m
	if rank[status] <= rank[m.Status] {
		// A repeat, or late news of an earlier step; delivered and failed
		// are final. Only a delivered message's detail may still move.
		changed := applyDetail(&m, status, detail, now)
		if changed {
			f.put(m)
		}
		t.out, t.moved = m, changed
		return nil
	}
	if m.Status == MsgScheduled {
		return nil // never dispatched: no phone has this job
	}
	if (m.Status == MsgExpired || m.Status == MsgCanceled) && status == MsgSending {
		return nil // a late ack does not revive an expired or canceled job; only an outcome can
	}
	if m.Status == MsgQueued || m.Status == MsgExpired || m.Status == MsgCanceled {
		if err := leaveQueue(tx, m); err != nil {
			return err
		}
	}
	if m.DeviceID != deviceID {
		// A WhatsApp or iMessage job taken by the agent it was handed to
		// (another than the one it was queued for): it is that
		// registration's job from now on.
		f.setSending(tx, msgDevKey(m, itob(m.ID)), false)
		m.DeviceID = deviceID
	}
	f.setSending(tx, msgDevKey(m, itob(m.ID)), status == MsgSending)
	from := m.Status
	if status == MsgSending && from == MsgQueued && IsAgentChannel(m.Channel) {
		if err := noteTaken(tx, m.CompanyID, m.NumberID, now); err != nil {
			return err
		}
	}
	m.Status, m.UpdatedAt = status, now.UTC()
	m.Error = "" // an expiry note does not outlive a later report
	if status == MsgFailed {
		m.Error = errText
	}
	if statusAt != "" {
		m.StatusAt = statusAt
	}
	if status == MsgDelivered && keepsDetail(m) {
		m.Detail = detail
	}
	t.out, t.moved = m, true
	if err := noteOutcome(tx, m, status, errText, now); err != nil {
		return err
	}
	if err := countTransition(tx, m, from, d.Label, now); err != nil {
		return err
	}
	if err := s.statusEvent(tx, m, now); err != nil {
		return err
	}
	f.put(m)
	return nil
}

// Pending returns up to limit queued messages of a device (company and
// device id) with queue places (QueuePlace) above after, oldest first. Ids rise in commit order, so
// a reader that remembers the last id it handed out never misses a message
// committed later. A device that is gone has nothing pending.
//
// The opt-out list is read again here, one lookup per job in the same read:
// an SMS to a number that opted out after it was queued (while the phone
// was away) comes back as it is about to be, failed (recipient_opted_out),
// keeping its place so the caller's cursor moves past it, and is never
// sent. A job whose window is closed at now comes back held (HeldUntil set
// to the next opening: not to be sent) the same way, and waits for the
// scheduler to queue it again at the opening (schedule.go). Pending does
// not write: it queues those changes for the store's next shared commit
// and returns at once, so a dispatcher never waits for an fsync. The write
// vets each job again; moved, when not nil, is called after the commit
// with the jobs it failed or held, as they then are. Should that write
// fail, the jobs stay queued and the next read of the queue (the phone's
// next link) tries again; their time to live still ends them.
//
// Jobs with a priority come before all others, highest first, from the
// head of the device's priority queue whatever after is: a higher
// priority queued later goes before the jobs not yet handed out. The
// caller skips those it holds already and keeps its cursor for the plain
// queue; an expired one is left out for the sweeper.
func (s *Store) Pending(companyID, deviceID uint64, after uint64, limit int, now time.Time, moved func([]Message)) ([]Message, error) {
	var out []Message
	var stopped []uint64 // ids of jobs to opted-out numbers
	var closed []uint64  // and of jobs outside their window
	err := s.view(func(tx *bolt.Tx) error {
		if !deviceLive(tx, companyID, deviceID) {
			return nil // a device that is gone has nothing pending
		}
		msgs := tx.Bucket(bucketMessages)
		prefix := devKey(companyID, deviceID)
		take := func(k, v []byte) error {
			var m Message
			id := k[len(prefix):]
			if len(v) == 8 { // a queue entry placed after its id (queueEntry), or a priority one
				id = v
			}
			if err := getMessage(msgs, id, &m); err != nil {
				return err
			}
			if m.CompanyID != companyID || m.DeviceID != deviceID {
				return fmt.Errorf("queue entry %x names message %d of another device", k, m.ID)
			}
			if m.Status != MsgQueued {
				// Every path that moves a message on takes it out of the queue;
				// a stray entry must never send a message twice.
				return nil
			}
			if m.Priority > 0 && !m.ExpiresAt.IsZero() && !now.Before(m.ExpiresAt) {
				return nil // the sweeper marks it; no cursor needs to move past it
			}
			if s.optedOutTx(tx, companyID, m.Channel, m.Phone, -1) != nil {
				stopped = append(stopped, m.ID)
				m.Status, m.Error, m.UpdatedAt = MsgFailed, errOptedOut, now.UTC()
			} else if m.Window != nil && !m.Window.Open(now) {
				closed = append(closed, m.ID)
				m.HeldUntil = m.Window.Next(now)
			}
			out = append(out, m)
			return nil
		}
		// The priority queue first, always from its head: it holds only
		// jobs no phone acked yet, and the cursor counts the plain queue.
		pc := tx.Bucket(bucketPrioQueue).Cursor()
		for k, v := pc.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = pc.Next() {
			if err := take(k, v); err != nil {
				return err
			}
		}
		c := tx.Bucket(bucketQueue).Cursor()
		for k, v := c.Seek(devKey(companyID, deviceID, itob(after+1))); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			if err := take(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: pending of device %d of company %d: %w", deviceID, companyID, err)
	}
	if (len(stopped) > 0 || len(closed) > 0) && s.commit != nil {
		// Copies for the commit's closure: capturing the variables
		// themselves would put both on the heap for every read of a queue.
		stopped, closed := stopped, closed
		s.commit.submit(func(tx *bolt.Tx) error {
			if err := s.failOptedOut(tx, stopped, now, moved); err != nil {
				return err
			}
			return s.holdClosed(tx, closed, now, moved)
		})
	}
	return out, nil
}

// errOptedOut is the error of a queued job failed because its number opted out.
const errOptedOut = "recipient_opted_out"

// failOptedOut makes the queued jobs with these ids failed with
// recipient_opted_out, each vetted again in the write: one that moved on
// meanwhile, or whose number came off the list, is left as it is now. After
// the commit, failed hears of the ones it failed.
func (s *Store) failOptedOut(tx *bolt.Tx, ids []uint64, now time.Time, failed func([]Message)) error {
	var done []Message
	msgs := tx.Bucket(bucketMessages)
	for _, id := range ids {
		var m Message
		if err := getMessage(msgs, itob(id), &m); err != nil {
			return err
		}
		if m.Status != MsgQueued || s.optedOutTx(tx, m.CompanyID, m.Channel, m.Phone, -1) == nil {
			continue
		}
		if err := leaveQueue(tx, m); err != nil {
			return err
		}
		m.Status, m.Error, m.UpdatedAt = MsgFailed, errOptedOut, now.UTC()
		d, err := liveDeviceRef(tx, m.CompanyID, m.DeviceID)
		if err != nil && !errors.Is(err, ErrDeviceGone) {
			return err
		}
		if err := countTransition(tx, m, MsgQueued, d.Label, now); err != nil {
			return err
		}
		if err := s.statusEvent(tx, m, now); err != nil {
			return err
		}
		if err := putMessage(msgs, itob(m.ID), &m); err != nil {
			return err
		}
		done = append(done, m)
	}
	if failed != nil && len(done) > 0 {
		tx.OnCommit(func() { failed(done) })
	}
	return nil
}

// ExpireQueued marks queued messages whose TTL ended before now as expired,
// at most limit of them, and returns them as they now are.
func (s *Store) ExpireQueued(now time.Time, limit int) ([]Message, error) {
	var expired []Message
	err := s.grouped(func(tx *bolt.Tx) error {
		expired = expired[:0]
		msgs := tx.Bucket(bucketMessages)
		c := tx.Bucket(bucketQueueExpiry).Cursor()
		end := timeKey(now)
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], end) < 0 && len(expired) < limit; k, _ = c.Next() {
			var m Message
			if err := getMessage(msgs, k[8:], &m); err != nil {
				return err
			}
			expired = append(expired, m)
		}
		for i := range expired {
			m := &expired[i]
			if err := leaveQueue(tx, *m); err != nil {
				return err
			}
			from := m.Status
			m.Status, m.UpdatedAt, m.Error = MsgExpired, now.UTC(), "not taken by the phone within its time to live"
			if err := countTransition(tx, *m, from, "", now); err != nil {
				return err
			}
			if err := s.statusEvent(tx, *m, now); err != nil {
				return err
			}
			if err := putMessage(msgs, itob(m.ID), m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return expired, nil
}

// failDeviceMessages fails the scheduled, queued and sending messages of a device that is going away.
func (s *Store) failDeviceMessages(tx *bolt.Tx, companyID, deviceID uint64, now time.Time) error {
	msgs := tx.Bucket(bucketMessages)
	prefix := devKey(companyID, deviceID)
	for _, idx := range [][]byte{bucketDevScheduled, bucketQueue, bucketPrioQueue, bucketSendingIdx} {
		b := tx.Bucket(idx)
		var ids [][]byte
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			id := k[len(prefix):]
			if len(v) == 8 { // a queue entry placed after its id (queueEntry)
				id = v
			}
			ids = append(ids, append([]byte(nil), id...))
		}
		for _, id := range ids {
			var m Message
			if err := getMessage(msgs, id, &m); err != nil {
				return err
			}
			if err := leaveQueue(tx, m); err != nil {
				return err
			}
			if err := b.Delete(devKey(companyID, deviceID, id)); err != nil {
				return err
			}
			from := m.Status
			m.Status, m.Error, m.UpdatedAt = MsgFailed, "device_deleted", now.UTC()
			// Counted, with no activity line each: the deletion's line says it.
			if err := count(tx, m, now, store.StatusCounts(m, from, MsgFailed)); err != nil {
				return err
			}
			if err := s.statusEvent(tx, m, now); err != nil {
				return err
			}
			if err := putMessage(msgs, id, &m); err != nil {
				return err
			}
		}
	}
	return nil
}

// MessageByUUID returns a message of the company by its queue id or uuid.
func (s *Store) MessageByUUID(companyID uint64, uuid string) (Message, error) {
	var m Message
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		m, err = loadByUUID(tx, uuid)
		if err == nil && m.CompanyID != companyID {
			err = ErrNotFound
		}
		return err
	})
	if err != nil {
		return m, fmt.Errorf("store: message %s: %w", uuid, err)
	}
	return m, nil
}

// PruneIdempotency drops idempotency answers older than cutoff.
func (s *Store) PruneIdempotency(cutoff time.Time) (int, error) {
	return s.pruneIdempotency(cutoff, pruneIdempotencyBatch)
}

// pruneIdempotencyBatch bounds the answers one transaction of
// PruneIdempotency reads. The answers are keyed by company, route and key,
// not by time, so a prune reads a day's worth of them; in one transaction
// it held every other write (sends, reports, inbound messages) back until
// it had read them all, seconds for a few hundred thousand keyed sends. In
// transactions of this many, the group commit's writes go between them.
const pruneIdempotencyBatch = 10000

// pruneIdempotency is PruneIdempotency in transactions that each read at
// most batch answers, from where the last one stopped. An answer kept
// meanwhile is a new one, which the prune would keep anyway.
func (s *Store) pruneIdempotency(cutoff time.Time, batch int) (int, error) {
	n, batch := 0, max(batch, 1)
	var from []byte // the first key the next transaction reads; nil: the bucket's first
	for {
		dropped := 0
		var next []byte
		err := s.update(func(tx *bolt.Tx) error {
			dropped, next = 0, nil
			c := tx.Bucket(bucketIdempotency).Cursor()
			k, v := c.First()
			if from != nil {
				k, v = c.Seek(from)
			}
			for read := 0; k != nil; read++ {
				if read == batch {
					next = bytes.Clone(k)
					return nil
				}
				// Only the time is read: the answer's body is most of it.
				var rec struct {
					CreatedAt time.Time `json:"created_at"`
				}
				if err := jsonUnmarshal(v, &rec); err != nil {
					return fmt.Errorf("idempotency answer %x: %w", k, err)
				}
				if !rec.CreatedAt.Before(cutoff) {
					k, v = c.Next()
					continue
				}
				// Re-seated after each delete, as bbolt wants when deleting
				// while iterating (deleteWhere).
				if err := c.Delete(); err != nil {
					return err
				}
				dropped++
				k, v = c.Seek(k)
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("store: prune idempotency answers: %w", err)
		}
		n += dropped
		if next == nil {
			return n, nil
		}
		from = next
	}
}
