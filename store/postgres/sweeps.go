package postgres

import (
	"cmp"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// The sweeps (ReleaseDue, ExpireQueued) move many messages at once, a
// scheduled bulk send's thousands coming due together among them. So a
// sweep costs a few round trips whatever it moves, as a batch of reports
// does (reports_plan.go): one reads and locks its messages, one locks
// their devices and reads what the moves look at, one takes the released
// jobs' queue places (takePlaces), and one writes what the moves did, a
// statement a table (reportPlan.write). The devices are locked in id
// order, never in the messages' due order, so two nodes sweeping at once,
// or a sweep beside a send, never wait on each other's devices in a circle
// (TestSweepsLockDevicesInOrder); every shared row the write touches is
// listed by key, as a batch of reports lists it.

// ReleaseDue moves up to limit scheduled messages whose send_at is not
// after now, and held ones whose window opened, into their device's queue
// (behind every place handed out), and returns them as they now are. It
// vets each again in the same transaction: a recipient who opted out
// since makes it failed (recipient_opted_out), and so does a device that
// is gone (device_deleted). One whose window is closed now is held until
// it opens. Nodes sweeping at once release each message once: each takes
// the due rows no other holds (SKIP LOCKED).
func (s *Store) ReleaseDue(now time.Time, limit int) ([]store.Message, error) {
	var out []store.Message
	err := s.write("release scheduled messages", func(t *txn) error {
		out = nil
		due, err := getRecs[store.Message](t, `SELECT rec FROM messages WHERE due_at <= $1
			ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, max(limit, 0))
		if err != nil || len(due) == 0 {
			return err
		}
		// Every move off scheduled or held clears due_at; a row that kept
		// it is left out of the schedule, as it is.
		var stale []int64
		var vetted []store.Message
		for _, m := range due {
			if m.Status != store.MsgScheduled && !m.Held() {
				stale = append(stale, id(m.ID))
				continue
			}
			vetted = append(vetted, m)
		}
		f, err := s.readRelease(t, vetted)
		if err != nil {
			return err
		}
		// The moves, in due order: each is decided first, then the ones
		// that queue take their places in one statement, in that order.
		froms := make([]string, len(vetted))
		var queued []int
		for i := range vetted {
			m := &vetted[i]
			froms[i] = m.Status
			switch {
			case (m.Channel == "" || m.Channel == "sms") && f.optedOut[optOutKey{m.CompanyID, m.Phone}]:
				m.Status, m.Error = store.MsgFailed, failedOptedOut
			case !f.live[devKey{m.CompanyID, m.DeviceID}]:
				m.Status, m.Error = store.MsgFailed, "device_deleted"
			case m.Window != nil && !m.Window.Open(now):
				m.Status, m.HeldUntil = store.MsgQueued, m.Window.Next(now)
			default:
				m.Status, m.HeldUntil = store.MsgQueued, time.Time{}
				queued = append(queued, i)
			}
		}
		if len(queued) > 0 {
			devs := make([]int64, len(queued))
			for k, i := range queued {
				devs[k] = id(vetted[i].DeviceID)
			}
			places, err := takePlaces(t, devs)
			if err != nil {
				return err
			}
			for k, i := range queued {
				vetted[i].QueueSeq = places[k]
			}
		}
		p := newReportPlan(s.statusEvents)
		for i := range vetted {
			m := vetted[i]
			if m.Status != froms[i] { // a held message that goes back to its queue stays queued
				m.UpdatedAt = now.UTC()
				if err := p.sweepMove(&f.reportFacts, m, froms[i], now); err != nil { // a failure at its time
					return err
				}
			}
			p.setMessage(&vetted[i], m) // written even when it stays held: its HeldUntil moves
		}
		p.stale = stale
		if err := p.write(t, true); err != nil {
			return err
		}
		out = vetted
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ExpireQueued marks queued messages (held ones too) whose time to live
// ended before now as expired, at most limit of them, earliest end first,
// and returns them as they now are. Nodes sweeping at once expire each
// message once.
func (s *Store) ExpireQueued(now time.Time, limit int) ([]store.Message, error) {
	var out []store.Message
	err := s.write("expire queued messages", func(t *txn) error {
		var err error
		out, err = getRecs[store.Message](t, `SELECT rec FROM messages WHERE status = 'queued' AND expires_at < $1
			ORDER BY expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, max(limit, 0))
		if err != nil || len(out) == 0 {
			return err
		}
		f, err := s.readEventFacts(t, out)
		if err != nil {
			return err
		}
		p := newReportPlan(s.statusEvents)
		for i := range out {
			m := out[i]
			from := m.Status
			m.Status, m.UpdatedAt = store.MsgExpired, now.UTC()
			m.Error = "not taken by the phone within its time to live"
			if err := p.sweepMove(&f.reportFacts, m, from, now); err != nil {
				return err
			}
			p.setMessage(&out[i], m)
		}
		return p.write(t, true)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sweepMove adds what a sweep's move of m from from writes, as
// countTransition and statusEvent write a lone move's: its counts and
// activity line, its device's failure, its status event. The event is
// built first, as it is the only part that may fail.
func (p *reportPlan) sweepMove(f *reportFacts, m store.Message, from string, now time.Time) error {
	ev, err := p.statusEvent(f, m, now)
	if err != nil {
		return err
	}
	p.count(m, from, "", now)
	p.noteFailure(m, now)
	p.addEvent(f, ev)
	return nil
}

// optOutKey names a number on a company's opt-out list.
type optOutKey struct {
	companyID uint64
	phone     string
}

// sweepFacts is what a release looks at beside its messages: which of
// their devices are live (locked), which of their numbers opted out, and
// what a status event reads (reportFacts' sets and outboxes).
type sweepFacts struct {
	reportFacts
	live     map[devKey]bool
	optedOut map[optOutKey]bool
}

func newSweepFacts() *sweepFacts {
	return &sweepFacts{reportFacts: reportFacts{sets: map[uint64]store.WebhookSet{}, outbox: map[uint64]*outboxUse{}},
		live: map[devKey]bool{}, optedOut: map[optOutKey]bool{}}
}

// readEventFacts reads what the status events of ms read, their
// companies' webhook sets and outboxes, in one round trip; nothing when
// status events are not made.
func (s *Store) readEventFacts(t *txn, ms []store.Message) (*sweepFacts, error) {
	f := newSweepFacts()
	if h := s.statusEvents; h != nil && h.Build != nil {
		companies := sweepCompanies(ms)
		b := &pgx.Batch{}
		f.queueOutboxReads(b, companies)
		if err := t.sendBatch(b); err != nil {
			return nil, err
		}
		f.outboxesRead(companies)
	}
	return f, nil
}

// readRelease locks the devices of the messages ms in id order and reads
// which are live, which of their SMS recipients opted out, and, when
// status events are made, their companies' webhook sets and outboxes: one
// round trip. The devices' row locks guard their queue places (takePlaces)
// and keep a device from being deleted under the release. A multi-row
// SELECT ... ORDER BY ... FOR UPDATE locks its rows in the order it sorts
// them, so every sweep takes its devices in one order.
func (s *Store) readRelease(t *txn, ms []store.Message) (*sweepFacts, error) {
	f := newSweepFacts()
	if len(ms) == 0 {
		return f, nil
	}
	devs := map[devKey]bool{}
	phones := map[optOutKey]bool{}
	for _, m := range ms {
		devs[devKey{m.CompanyID, m.DeviceID}] = true
		if m.Channel == "" || m.Channel == "sms" {
			phones[optOutKey{m.CompanyID, m.Phone}] = true
		}
	}
	var dc, dd []int64
	for _, k := range sortedKeys(devs, func(a, b devKey) int {
		return cmp.Or(cmp.Compare(a.deviceID, b.deviceID), cmp.Compare(a.companyID, b.companyID))
	}) {
		dc, dd = append(dc, id(k.companyID)), append(dd, id(k.deviceID))
	}
	var pc []int64
	var pp []string
	for k := range phones {
		pc, pp = append(pc, id(k.companyID)), append(pp, k.phone)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT company_id, id FROM devices
		WHERE (company_id, id) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[])) AND deleted_at IS NULL
		ORDER BY id FOR UPDATE`, dc, dd).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c, d int64
			if err := rows.Scan(&c, &d); err != nil {
				return err
			}
			f.live[devKey{uint64(c), uint64(d)}] = true
		}
		return rows.Err()
	})
	if len(pc) > 0 {
		b.Queue(`SELECT company_id, phone FROM opt_outs WHERE (company_id, phone) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))`,
			pc, pp).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var c int64
				var phone string
				if err := rows.Scan(&c, &phone); err != nil {
					return err
				}
				f.optedOut[optOutKey{uint64(c), phone}] = true
			}
			return rows.Err()
		})
	}
	companies := sweepCompanies(ms)
	if h := s.statusEvents; h != nil && h.Build != nil {
		f.queueOutboxReads(b, companies)
	}
	if err := t.sendBatch(b); err != nil {
		return nil, err
	}
	f.outboxesRead(companies)
	return f, nil
}

// sweepCompanies are the companies of ms, in id order.
func sweepCompanies(ms []store.Message) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, id(m.CompanyID))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
