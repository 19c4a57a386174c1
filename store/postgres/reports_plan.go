package postgres

import (
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// A batch of reports is made in three steps, whatever its size: one round
// trip reads and locks everything the batch's changes look at (readReports),
// the changes are then worked out in Go, in order, each on the state the
// ones before it left (reportPlan.apply), and one round trip writes what
// they did, a statement a table (reportPlan.write, reports_write.go). A
// change that fails leaves nothing in the plan, so the others go on
// without it as they would if it had been made alone and failed.

// msgKey names a message as a report does: its company and its uuid.
type msgKey struct {
	companyID uint64
	uuid      string
}

// devKey names a device registration of a company.
type devKey struct{ companyID, deviceID uint64 }

// reportFacts is what a batch's changes read: its messages (locked, the
// state each change leaves them in), its devices, the devices that hold the
// agent numbers of its messages, and, when a change may make a status
// event, its companies' webhook sets and outbox sizes.
type reportFacts struct {
	msgs    map[msgKey]*store.Message
	holders map[msgKey]uint64 // the device holding the message's agent number now; absent: none
	devices map[devKey]store.Device
	sets    map[uint64]store.WebhookSet
	outbox  map[uint64]*outboxUse // what each company's outbox holds, as the batch's events add to it
}

// outboxUse is a company's pending deliveries and their bodies' bytes.
type outboxUse struct{ deliveries, bytes int64 }

// eventsWanted says whether a change of the batch may make a status event,
// so that the batch reads its companies' webhook sets.
func (s *Store) eventsWanted(batch []*report) bool {
	if h := s.statusEvents; h == nil || h.Build == nil {
		return false
	}
	for _, r := range batch {
		if statusEventTypes[r.status] {
			return true
		}
	}
	return false
}

// readReports reads and locks what the batch's changes look at, in one
// round trip. The messages' rows are locked first, in id order, as a lone
// report locks its message's row before it reads its device: a device
// deleted meanwhile has failed its jobs under these locks, or waits for
// them.
func (s *Store) readReports(t *txn, batch []*report) (*reportFacts, error) {
	f := &reportFacts{msgs: map[msgKey]*store.Message{}, holders: map[msgKey]uint64{}, devices: map[devKey]store.Device{},
		sets: map[uint64]store.WebhookSet{}, outbox: map[uint64]*outboxUse{}}
	var mc, dc, dd []int64
	var mu []string
	var companies []int64
	seenMsg, seenDev, seenCompany := map[msgKey]bool{}, map[devKey]bool{}, map[uint64]bool{}
	for _, r := range batch {
		if k := (msgKey{r.companyID, r.uuid}); !seenMsg[k] {
			seenMsg[k] = true
			mc, mu = append(mc, id(r.companyID)), append(mu, r.uuid)
		}
		if k := (devKey{r.companyID, r.deviceID}); !seenDev[k] {
			seenDev[k] = true
			dc, dd = append(dc, id(r.companyID)), append(dd, id(r.deviceID))
		}
		if !seenCompany[r.companyID] {
			seenCompany[r.companyID] = true
			companies = append(companies, id(r.companyID))
		}
	}
	b := &pgx.Batch{}
	// The agent number's holder comes with its message: a WhatsApp or
	// iMessage job with no hand-out recorded may be reported by the agent
	// that holds its number now (store.MayReport).
	b.Queue(`SELECT m.rec, a.device_id FROM messages m
		LEFT JOIN agent_numbers a ON m.channel IN `+agentChannels+`
			AND a.id = (m.rec->>'number_id')::bigint AND a.company_id = m.company_id
		WHERE (m.company_id, m.uuid) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))
		ORDER BY m.id FOR UPDATE OF m`, mc, mu).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var raw []byte
			var holder *int64
			if err := rows.Scan(&raw, &holder); err != nil {
				return err
			}
			m := new(store.Message)
			if err := json.Unmarshal(raw, m); err != nil {
				return err
			}
			k := msgKey{m.CompanyID, m.UUID}
			f.msgs[k] = m
			if holder != nil {
				f.holders[k] = uint64(*holder)
			}
		}
		return rows.Err()
	})
	b.Queue(`SELECT rec FROM devices WHERE (company_id, id) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[])) AND deleted_at IS NULL`,
		dc, dd).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var raw []byte
			if err := rows.Scan(&raw); err != nil {
				return err
			}
			var d store.Device
			if err := json.Unmarshal(raw, &d); err != nil {
				return err
			}
			f.devices[devKey{d.CompanyID, d.ID}] = d
		}
		return rows.Err()
	})
	if s.eventsWanted(batch) {
		f.queueOutboxReads(b, companies)
	}
	if err := t.sendBatch(b); err != nil {
		return nil, err
	}
	f.outboxesRead(companies)
	return f, nil
}

// apply works out r's change on the state the batch's earlier changes left,
// as a lone report would make it (TransitionDetail), and adds what it writes
// to the plan. A change that fails adds nothing and changes no state.
func (p *reportPlan) apply(f *reportFacts, r *report) (store.Message, bool, error) {
	k := msgKey{r.companyID, r.uuid}
	stored := f.msgs[k]
	if stored == nil {
		return store.Message{}, false, store.ErrNotFound
	}
	d, ok := f.devices[devKey{r.companyID, r.deviceID}]
	if !ok {
		return store.Message{}, false, store.ErrNotFound // the device is gone
	}
	m := *stored
	if m.Direction != store.Outbound {
		return store.Message{}, false, store.ErrNotFound
	}
	if !store.MayReport(m, r.deviceID, func() uint64 { return f.holders[k] }) {
		return store.Message{}, false, store.ErrNotFound
	}
	status, now := r.status, r.now
	if rank[status] <= rank[m.Status] {
		// A repeat, or late news of an earlier step; delivered and failed
		// are final. Only a delivered message's detail may still move.
		if !applyDetail(&m, status, r.detail, now) {
			return m, false, nil
		}
		p.setMessage(stored, m)
		return m, true, nil
	}
	if m.Status == store.MsgScheduled {
		return m, false, nil // never dispatched: no phone has this job
	}
	if (m.Status == store.MsgExpired || m.Status == store.MsgCanceled) && status == store.MsgSending {
		return m, false, nil // a late ack does not revive an expired or canceled job; only an outcome can
	}
	m.DeviceID = r.deviceID // taken by the agent it was handed to, when it differs: that registration's job from now on
	from := m.Status
	m.Status, m.UpdatedAt = status, now.UTC()
	m.Error = "" // an expiry note does not outlive a later report
	if status == store.MsgFailed {
		m.Error = r.errText
	}
	if r.statusAt != "" {
		m.StatusAt = r.statusAt
	}
	if status == store.MsgDelivered && keepsDetail(m) {
		m.Detail = r.detail
	}
	// The status event is built first: it is the only part that may fail,
	// and a change that fails must leave nothing in the plan.
	ev, err := p.statusEvent(f, m, now)
	if err != nil {
		return m, false, err
	}
	if status == store.MsgSending && from == store.MsgQueued && store.IsAgentChannel(m.Channel) {
		p.taken[numKey{m.CompanyID, m.NumberID}] = now // the last of the batch is the one kept
	}
	p.noteOutcome(m, status, r.errText, now)
	p.count(m, from, store.DeviceLabel(d), now)
	p.noteFailure(m, now)
	p.addEvent(f, ev)
	p.setMessage(stored, m)
	return m, true, nil
}

// queueOutboxReads queues the reads a status event of the companies' looks
// at: their webhook sets and what their outboxes hold (outboxesRead once
// the batch is sent).
func (f *reportFacts) queueOutboxReads(b *pgx.Batch, companies []int64) {
	b.Queue("SELECT company_id, rec FROM webhook_sets WHERE company_id = ANY($1)", companies).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c int64
			var raw []byte
			if err := rows.Scan(&c, &raw); err != nil {
				return err
			}
			set := store.WebhookSet{CompanyID: uint64(c)}
			if err := json.Unmarshal(raw, &set); err != nil {
				return err
			}
			f.sets[uint64(c)] = set
		}
		return rows.Err()
	})
	b.Queue(`SELECT company_id, sum(deliveries)::bigint, sum(bytes)::bigint FROM webhook_outboxes
		WHERE company_id = ANY($1) GROUP BY company_id`, companies).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c int64
			var u outboxUse
			if err := rows.Scan(&c, &u.deliveries, &u.bytes); err != nil {
				return err
			}
			f.outbox[uint64(c)] = &u
		}
		return rows.Err()
	})
}

// outboxesRead counts an outbox the reads did not find (none written yet)
// as empty.
func (f *reportFacts) outboxesRead(companies []int64) {
	for _, c := range companies {
		if f.outbox[uint64(c)] == nil {
			f.outbox[uint64(c)] = &outboxUse{}
		}
	}
}
