package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// Dispatch and reports: a phone link's read of its device's queue
// (Pending) and the acks and reports that move a job on (Transition). The
// messages phones receive (StoreInbound) are in inbound.go, and the reads
// of a device's exchange (history, conversations, the export's pages) in
// exchange.go.
//
// Where these three files differ from the embedded store:
//   - Pending writes what it fails or holds before it returns, in its own
//     transaction after the read, instead of queueing the write for a
//     shared commit: a commit here costs a round trip, not a place in one
//     writer's queue. moved still hears of the jobs after that commit; a
//     failed write leaves them queued for the next read, as there.
//   - TransitionLater queues its change for its device's worker, which
//     makes what queued meanwhile in one transaction (reports.go), as the
//     embedded store's writer folds them into one commit.
//   - A report locks its message's row first and then reads its device, so
//     a device deleted meanwhile is found gone, and a report never waits on
//     the device's row, which every send to the device locks.
//   - Conversations are kept by a trigger on messages (0006_dispatch.sql,
//     0021), so every path that stores a message counts it; the one
//     statement that moves messages to another device (failover's moveJobs)
//     moves their conversations in its own round trip (conversationMoves,
//     0024), and another that did would have to as well.

// agentChannels are the channels whose messages are read by number, not in
// a device's conversations, history or inbound list (channel NOT IN
// agentChannels in the statements and indexes below).
const agentChannels = "('" + store.ChannelNameWhatsApp + "', '" + store.ChannelNameIMessage + "')"

// rank orders outbound statuses so a late or repeated report never moves a
// message backwards.
var rank = map[string]int{store.MsgScheduled: -1, store.MsgQueued: 0, store.MsgExpired: 1, store.MsgCanceled: 1,
	store.MsgSending: 2, store.MsgSent: 3, store.MsgDelivered: 4, store.MsgFailed: 4}

// detailRank orders details so a late or repeated receipt never moves one
// backwards: played implies read.
var detailRank = map[string]int{"": 0, store.DetailRead: 1, store.DetailPlayed: 2}

// Pending returns up to limit jobs of a device (company and device id): its
// priority queue first, from its head (highest first, then in place
// order), then its plain queue after the place after, in place order. A
// place is taken under the device row's lock, so places rise in commit
// order and a link that remembers the last place it handed out never
// misses a job committed after its read. A device that is gone has nothing
// pending.
//
// A job to a number that opted out after it was queued comes back failed
// (recipient_opted_out), and one whose window is closed at now comes back
// held (HeldUntil set to the next opening); neither is to be sent, and
// both keep their place so the cursor moves past them. Pending then writes
// those changes, each vetted again, and calls moved with the jobs it
// changed, after the commit; should that write fail, they stay queued and
// the next read tries again. An expired priority job is left out for the
// sweeper.
func (s *Store) Pending(companyID, deviceID uint64, after uint64, limit int, now time.Time, moved func([]store.Message)) ([]store.Message, error) {
	var out []store.Message
	var stopped, closed []uint64
	err := s.read(fmt.Sprintf("pending of device %d of company %d", deviceID, companyID), func(t *txn) error {
		out, stopped, closed = nil, nil, nil
		// One round trip with the BEGIN (a link reads its queue once per
		// kick, so once per send at most): the device's check and both
		// queues, read in the transaction's one snapshot; the plain queue
		// up to the whole limit, cut to what the priority queue leaves.
		var live bool
		var prio, plain []queuedJob
		b := &pgx.Batch{}
		b.Queue("SELECT EXISTS (SELECT 1 FROM devices WHERE company_id = $1 AND id = $2 AND deleted_at IS NULL)",
			id(companyID), id(deviceID)).QueryRow(func(row pgx.Row) error { return row.Scan(&live) })
		queueQueue(b, &prio, priorityQueueSQL, id(companyID), id(deviceID), now, limit)
		queueQueue(b, &plain, plainQueueSQL, id(companyID), id(deviceID), id(after), limit)
		if err := t.sendBatch(b); err != nil || !live {
			return err
		}
		plain = plain[:min(len(plain), max(limit-len(prio), 0))]
		for _, j := range append(prio, plain...) {
			m := j.Message
			if j.optedOut {
				stopped = append(stopped, m.ID)
				m.Status, m.Error, m.UpdatedAt = store.MsgFailed, failedOptedOut, now.UTC()
			} else if m.Window != nil && !m.Window.Open(now) {
				closed = append(closed, m.ID)
				m.HeldUntil = m.Window.Next(now)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(stopped) > 0 || len(closed) > 0 {
		// The jobs come back as they are about to be either way; a write that
		// fails leaves them queued, and the link's next read tries again.
		_ = s.write("jobs failed or held at dispatch", func(t *txn) error {
			var done []store.Message
			locked, err := lockMessages(t, append(slices.Clone(stopped), closed...))
			if err != nil {
				return err
			}
			if err := s.failOptedOut(t, stopped, locked, now, &done); err != nil {
				return err
			}
			if err := holdClosed(t, closed, locked, now, &done); err != nil {
				return err
			}
			if moved != nil && len(done) > 0 {
				t.OnCommit(func() { moved(done) })
			}
			return nil
		})
	}
	return out, nil
}

// queuedJob is a queued message as Pending reads it: with its place, and
// whether its number is on the company's opt-out list now.
type queuedJob struct {
	store.Message
	optedOut bool
}

// queueSQL reads the queued jobs of messages m that a clause (WHERE ...
// ORDER BY ... LIMIT) after it picks, each with its place and its
// opt-out, in one statement (queueQueue), in the queue's order. The jobs
// are picked first and their numbers looked up on the opt-out list after,
// a probe of its index each: with the check beside the pick, the planner
// weighed it for every job the device has queued, not the page's, and for
// a long queue read the whole list of every company into a hash instead
// (TestPendingReadsOneCompanysOptOuts; docs/performance.md, "A link's read
// of a long queue on PostgreSQL").
func queueSQL(clause string) string {
	return `SELECT q.queue_place, q.rec, q.channel IN ('', 'sms') AND EXISTS (
			SELECT 1 FROM opt_outs o WHERE o.company_id = q.company_id AND o.phone = q.phone)
		FROM (SELECT m.queue_place, m.rec, m.channel, m.company_id, m.phone, m.priority FROM messages m ` + clause + `) q
		ORDER BY q.priority DESC, q.queue_place`
}

// priorityQueueSQL and plainQueueSQL read a device's queues (company $1,
// device $2), at most $4 jobs each: the priority one from its head, those
// not expired at $3, and the plain one after the place $3.
var (
	priorityQueueSQL = queueSQL(`WHERE m.company_id = $1 AND m.device_id = $2 AND m.priority > 0 AND m.queue_place IS NOT NULL
				AND m.channel NOT IN ` + agentChannels + ` AND (m.expires_at IS NULL OR m.expires_at > $3)
			ORDER BY m.priority DESC, m.queue_place LIMIT $4`)
	plainQueueSQL = queueSQL(`WHERE m.company_id = $1 AND m.device_id = $2 AND m.priority = 0 AND m.queue_place > $3
				AND m.channel NOT IN ` + agentChannels + `
			ORDER BY m.queue_place LIMIT $4`)
)

// scanQueue reads queueSQL's rows, and closes them.
func scanQueue(rows pgx.Rows) ([]queuedJob, error) {
	defer rows.Close()
	var out []queuedJob
	for rows.Next() {
		var j queuedJob
		var place int64
		var raw []byte
		if err := rows.Scan(&place, &raw, &j.optedOut); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &j.Message); err != nil {
			return nil, err
		}
		j.QueueSeq = uint64(place)
		out = append(out, j)
	}
	return out, rows.Err()
}

// lockMessages reads the messages with these ids with their row locks,
// taken in one statement in id order before anything else is written: as
// a device's deletion and a report batch lock several messages, and as a
// cancel or a report locks one before the counters. Taken one by one in
// the queue's order (priority first), a job was locked after another job's
// counters and activity line, and a higher id before a lower one, each
// the reverse of another writer's order (TestDispatchLocksJobsFirst). A
// message gone is left out.
func lockMessages(t *txn, ids []uint64) (map[uint64]store.Message, error) {
	out := map[uint64]store.Message{}
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]int64, len(ids))
	for i, v := range ids {
		keys[i] = id(v)
	}
	ms, err := getRecs[store.Message](t, "SELECT rec FROM messages WHERE id = ANY($1) ORDER BY id FOR UPDATE", keys)
	for _, m := range ms {
		out[m.ID] = m
	}
	return out, err
}

// queueQueue queues a statement of queueSQL in b, its jobs into out.
func queueQueue(b *pgx.Batch, out *[]queuedJob, sql string, args ...any) {
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		js, err := scanQueue(rows)
		*out = js
		return err
	})
}

// failOptedOut makes the queued jobs with these ids failed with
// recipient_opted_out, each vetted again under its row lock (locked, as
// lockMessages read them): one that moved on meanwhile, or whose number
// came off the list, is left as it is. It appends the ones it failed to
// done.
func (s *Store) failOptedOut(t *txn, ids []uint64, locked map[uint64]store.Message, now time.Time, done *[]store.Message) error {
	for _, msgID := range ids {
		m, ok := locked[msgID]
		if !ok {
			return store.ErrNotFound
		}
		if m.Status != store.MsgQueued {
			continue
		}
		refusal := optOutRefusal(t, m.CompanyID, m.Channel, m.Phone, -1)
		if refusal == nil {
			continue // taken off the list since the read
		}
		if !errors.As(refusal, new(*store.OptOutError)) {
			return refusal
		}
		m.Status, m.Error, m.UpdatedAt = store.MsgFailed, failedOptedOut, now.UTC()
		label, err := deviceLabel(t, m)
		if err != nil {
			return err
		}
		if err := countTransition(t, m, store.MsgQueued, label, now); err != nil {
			return err
		}
		if err := s.statusEvent(t, m, now); err != nil {
			return err
		}
		if err := updateSend(t, m); err != nil {
			return err
		}
		*done = append(*done, m)
	}
	return nil
}

// holdClosed takes the queued jobs with these ids whose window is closed
// at now out of their device's queue until it opens (HeldUntil; the
// scheduler queues them again then), each vetted again under its row
// lock (locked, as lockMessages read them). It appends the ones it held
// to done.
func holdClosed(t *txn, ids []uint64, locked map[uint64]store.Message, now time.Time, done *[]store.Message) error {
	for _, msgID := range ids {
		m, ok := locked[msgID]
		if !ok {
			return store.ErrNotFound
		}
		if m.Status != store.MsgQueued || m.Held() || m.Window == nil || m.Window.Open(now) {
			continue
		}
		m.HeldUntil = m.Window.Next(now) // still queued: updated_at says when the status changed
		if err := updateSend(t, m); err != nil {
			return err
		}
		*done = append(*done, m)
	}
	return nil
}

// deviceLabel names the message's device in activity lines: its name, or
// its fingerprint; "" when the registration is gone.
func deviceLabel(t *txn, m store.Message) (string, error) {
	var d store.Device
	err := getRec(t, &d, "SELECT rec FROM devices WHERE id = $1 AND deleted_at IS NULL", id(m.DeviceID))
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return store.DeviceLabel(d), nil
}

// QueueDepth counts the device's SMS waiting in its queues for the phone
// (queued, not held; priority jobs too), up to store.MaxQueueDepth.
func (s *Store) QueueDepth(companyID, deviceID uint64) (int, error) {
	n := 0
	err := s.read(fmt.Sprintf("queue depth of device %d of company %d", deviceID, companyID), func(t *txn) error {
		return t.row(`SELECT count(*) FROM (SELECT 1 FROM messages m
			WHERE m.company_id = $1 AND m.device_id = $2 AND `+waitingQueued+`
			LIMIT $3) q`, id(companyID), id(deviceID), store.MaxQueueDepth).Scan(&n)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// MessageSequence is the last queue place handed out, on any device (see
// takePlaces): a failover run takes it at its start, since jobs at or below
// it may have been handed to a phone by an earlier run, and every job
// placed after it is placed above it. It may count places of transactions
// that did not commit, which only makes it safer.
func (s *Store) MessageSequence() (uint64, error) {
	var n int64
	err := s.read("message sequence", func(t *txn) error {
		return t.row("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM queue_places").Scan(&n)
	})
	return uint64(n), err
}

// Transition moves an outbound message of the device (company and device
// id, as the phone's link knows them) to status (sending on an ack; sent,
// delivered or failed on a report). A report that would move it backwards,
// or repeats what is stored, changes nothing and is no error. A message of
// another device, of another registration of the same handset, or of a
// device that is gone, is ErrNotFound. moved says whether the report
// changed the stored status.
func (s *Store) Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (store.Message, bool, error) {
	return s.TransitionDetail(companyID, deviceID, uuid, status, errText, statusAt, "", now)
}

// TransitionDetail is Transition with a delivered report's detail. On an
// agent channel's message the detail is kept with the move to delivered
// or, when the message is already delivered, moves on its own (only
// forwards): the detail and updated_at change, nothing else. moved is true
// for either change. On SMS the detail is ignored.
func (s *Store) TransitionDetail(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) (store.Message, bool, error) {
	r := newReport(companyID, deviceID, uuid, status, errText, statusAt, detail, now)
	s.applyReports([]*report{r}) // a batch of one: the same steps as a phone's reports (reports_plan.go)
	return r.Wait()
}

// keepsDetail says whether a message's channel stores details: the agent
// channels, whose receipts carry them. SMS has no read receipts.
func keepsDetail(m store.Message) bool { return store.IsAgentChannel(m.Channel) }

// applyDetail moves a delivered message's detail forwards; changed says
// it did, and that m must be written.
func applyDetail(m *store.Message, status, detail string, now time.Time) (changed bool) {
	if detail == "" || status != store.MsgDelivered || m.Status != store.MsgDelivered || !keepsDetail(*m) {
		return false
	}
	if detailRank[detail] <= detailRank[m.Detail] {
		return false
	}
	m.Detail, m.UpdatedAt = detail, now.UTC()
	return true
}

// statusEventTypes are the statuses that make an event.
var statusEventTypes = map[string]bool{store.MsgSent: true, store.MsgDelivered: true, store.MsgFailed: true, store.MsgExpired: true}

// statusEvent writes the webhook deliveries of m's move to its current
// status into the outbox, in the change's transaction, so the outbox holds
// the event exactly when the change is stored. It is charged after the
// fact: refusing it would fail the change the phone already made.
func (s *Store) statusEvent(t *txn, m store.Message, now time.Time) error {
	// Every status change passes here: the device's last failures too.
	if err := noteFailure(t, m, now); err != nil {
		return err
	}
	h := s.statusEvents
	if h == nil || h.Build == nil || m.Direction != store.Outbound || !statusEventTypes[m.Status] {
		return nil
	}
	res, err := s.addWebhookEvent(t, m.CompanyID, now, h.Limits, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		return h.Build(set, m)
	})
	if err != nil {
		return fmt.Errorf("status event of message %d: %w", m.ID, err)
	}
	if h.Committed != nil && (res.Queued > 0 || res.Refused > 0) {
		t.OnCommit(func() { h.Committed(m, res) })
	}
	return nil
}
