package postgres

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// reportPlan is what a batch's changes write, gathered as they are worked
// out (apply) and written together (write): each table's rows in one
// statement, the counters' increments summed per row first, since one
// multi-row upsert may not touch a row twice. The sweeps (sweeps.go) write
// their moves through it too.
type reportPlan struct {
	events   *store.StatusEvents
	msgs     []*store.Message // the messages to write, each once, as the batch leaves them
	written  map[*store.Message]bool
	taken    map[numKey]time.Time // when a job of each agent number was last taken
	streaks  map[streakKey]*streakNote
	counts   map[countKey]*store.Counts
	activity []activityRow
	failures []failureRow
	evs      []*plannedEvent
	stale    []int64 // messages left out of the schedule, whose due_at a sweep clears (ReleaseDue)
}

func newReportPlan(events *store.StatusEvents) *reportPlan {
	return &reportPlan{events: events, written: map[*store.Message]bool{}, taken: map[numKey]time.Time{},
		streaks: map[streakKey]*streakNote{}, counts: map[countKey]*store.Counts{}}
}

// Concurrent batches (one a worker, each of devices of any company) share
// rows: a company's storage, outbox and plan counters, its activity feed,
// its deliveries log. A multi-row statement locks its rows in the order it
// lists them, so two batches listing two companies' rows in opposite
// orders would each hold one and wait for the other; the database breaks
// such a deadlock by failing one batch, which is then made again (write).
// So every statement lists its rows in one order, by key (sortedKeys,
// slices.Sort), never in a map's or its changes': all batches lock in one
// order and never deadlock on each other (TestReportPlanLocksInOrder;
// TestReportBatchesTrimInOneOrder makes two batches meet on the activity
// feeds' trims, which deadlocked in the changes' order).

// sortedKeys are m's keys in the order by.
func sortedKeys[K comparable, V any](m map[K]V, by func(a, b K) int) []K {
	return slices.SortedFunc(maps.Keys(m), by)
}

// numKey names an agent number of a company.
type numKey struct{ companyID, numberID uint64 }

func (a numKey) cmp(b numKey) int {
	return cmp.Or(cmp.Compare(a.companyID, b.companyID), cmp.Compare(a.numberID, b.numberID))
}

// streakKey names a SIM's carrier-error streak.
type streakKey struct {
	deviceID uint64
	slot     string
}

func (a streakKey) cmp(b streakKey) int {
	return cmp.Or(cmp.Compare(a.deviceID, b.deviceID), cmp.Compare(a.slot, b.slot))
}

// streakNote is what the batch does to a streak: reset says a send went out
// (the streak ends), n counts the carrier errors after the last reset, the
// last at last.
type streakNote struct {
	companyID uint64
	reset     bool
	n         int64
	last      time.Time
}

// countKey is a row of the daily counters (stats_days) but its shard.
type countKey struct {
	companyID        uint64
	day              int32
	channel          int16
	deviceID, userID uint64
}

func (a countKey) cmp(b countKey) int {
	return cmp.Or(cmp.Compare(a.companyID, b.companyID), cmp.Compare(a.day, b.day), cmp.Compare(a.channel, b.channel),
		cmp.Compare(a.deviceID, b.deviceID), cmp.Compare(a.userID, b.userID))
}

type activityRow struct {
	companyID uint64
	a         store.Activity
}

type failureRow struct {
	companyID, deviceID uint64
	f                   store.DeviceFailure
}

// setMessage makes m the state of the batch's message stored, to write.
func (p *reportPlan) setMessage(stored *store.Message, m store.Message) {
	*stored = m
	if !p.written[stored] {
		p.written[stored] = true
		p.msgs = append(p.msgs, stored)
	}
}

// noteOutcome keeps the SIM's carrier-error streak (simcaps.go) as a report
// of m's outcome comes in: a carrier error adds one, a send that went out
// ends it. SMS only: the agents' channels have no SIM.
func (p *reportPlan) noteOutcome(m store.Message, status, errText string, now time.Time) {
	if m.Channel != "" && m.Channel != "sms" {
		return
	}
	failed, went := status == store.MsgFailed && carrierErrors[errText], status == store.MsgSent || status == store.MsgDelivered
	if !failed && !went {
		return
	}
	k := streakKey{m.DeviceID, m.SIMSlot}
	n := p.streaks[k]
	if n == nil {
		n = &streakNote{companyID: m.CompanyID}
		p.streaks[k] = n
	}
	if went {
		n.reset, n.n = true, 0
		return
	}
	n.n, n.last = n.n+1, now
}

// count adds what countTransition (core.go) writes for a lone change.
func (p *reportPlan) count(m store.Message, from, device string, at time.Time) {
	p.addCounts(m, from, at)
	if a, ok := store.MessageActivity(m, m.Status, device, at); ok {
		a.At = a.At.UTC()
		p.activity = append(p.activity, activityRow{m.CompanyID, a})
	}
}

// addCounts adds what count (core.go) writes for m's move from from,
// summed into its counters' row.
func (p *reportPlan) addCounts(m store.Message, from string, at time.Time) {
	if c := store.StatusCounts(m, from, m.Status); !c.IsZero() {
		k := countKey{m.CompanyID, day(at), int16(store.ChannelByte(m.Channel)), m.DeviceID, store.MessageUser(m)}
		if p.counts[k] == nil {
			p.counts[k] = &store.Counts{}
		}
		p.counts[k].Add(c)
	}
}

// noteFailure adds what noteFailure (devices.go) writes for a lone change.
func (p *reportPlan) noteFailure(m store.Message, now time.Time) {
	if m.Direction != store.Outbound || m.DeviceID == 0 || (m.Status != store.MsgFailed && m.Status != store.MsgExpired) {
		return
	}
	at := m.UpdatedAt
	if at.IsZero() {
		at = now
	}
	p.failures = append(p.failures, failureRow{m.CompanyID, m.DeviceID,
		store.DeviceFailure{At: at.UTC(), Status: m.Status, Error: m.Error, QueueID: m.UUID, Channel: m.Channel}})
}

// write makes the plan's writes: one round trip for the ids of the
// deliveries and log lines its events add (only when they add any), one
// for everything else, and the events' Committed hooks once it commits.
// With last, the plan's writes are the transaction's last, and its
// charges (txn.chargeStorage) go at the end of that round trip; without,
// the transaction writes them when it commits, after what it writes next.
func (p *reportPlan) write(t *txn, last bool) error {
	deliveryIDs, attemptIDs, err := p.eventIDs(t)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	p.queueNotes(t, b)
	if err := p.queueEvents(t, b, deliveryIDs, attemptIDs); err != nil {
		return err
	}
	if err := p.queueMessages(b); err != nil {
		return err
	}
	if last {
		t.queueCharges(b)
	}
	if err := t.sendBatch(b); err != nil {
		return err
	}
	if h := p.events; h != nil && h.Committed != nil {
		for _, e := range p.evs {
			if e.res.Queued > 0 || e.res.Refused > 0 {
				m, res := e.m, e.res
				t.OnCommit(func() { h.Committed(m, res) })
			}
		}
	}
	return nil
}

// queueNotes queues the writes beside the messages' and the events': the
// agent numbers' last takes, the SIMs' streaks, the counters, the activity
// feed and the devices' failures, each feed trimmed once after its rows.
func (p *reportPlan) queueNotes(t *txn, b *pgx.Batch) {
	if len(p.taken) > 0 {
		var nums, companies []int64
		var ats []string
		for _, k := range sortedKeys(p.taken, numKey.cmp) {
			raw, _ := json.Marshal(p.taken[k].UTC()) // a time always marshals
			nums, companies, ats = append(nums, id(k.numberID)), append(companies, id(k.companyID)), append(ats, string(raw))
		}
		b.Queue(`UPDATE agent_numbers a SET rec = jsonb_set(a.rec, '{last_taken_at}', u.at)
			FROM unnest($1::bigint[], $2::bigint[], $3::jsonb[]) AS u (id, company_id, at)
			WHERE a.id = u.id AND a.company_id = u.company_id`, nums, companies, ats)
	}
	p.queueStreaks(b)
	p.queueCounts(t, b)
	if len(p.activity) > 0 {
		ids, recs := make([]int64, len(p.activity)), make([]string, len(p.activity))
		trim, seen := []int64{}, map[uint64]bool{}
		for i, a := range p.activity {
			raw, _ := json.Marshal(a.a) // an activity always marshals
			ids[i], recs[i] = id(a.companyID), string(raw)
			if !seen[a.companyID] {
				seen[a.companyID] = true
				trim = append(trim, id(a.companyID))
			}
		}
		slices.Sort(trim)
		b.Queue(`INSERT INTO activity (company_id, rec)
			SELECT company_id, rec FROM unnest($1::bigint[], $2::jsonb[]) WITH ORDINALITY AS a (company_id, rec, ord) ORDER BY ord`, ids, recs)
		b.Queue(`DELETE FROM activity a USING unnest($1::bigint[]) AS c (id) WHERE a.company_id = c.id AND a.seq < (
			SELECT min(seq) FROM (SELECT seq FROM activity WHERE company_id = c.id ORDER BY seq DESC LIMIT $2) newest)`,
			trim, store.ActivityKeep)
	}
	if len(p.failures) > 0 {
		devs, companies, recs := make([]int64, len(p.failures)), make([]int64, len(p.failures)), make([]string, len(p.failures))
		trim, seen := []int64{}, map[uint64]bool{}
		for i, f := range p.failures {
			raw, _ := json.Marshal(f.f) // a failure always marshals
			devs[i], companies[i], recs[i] = id(f.deviceID), id(f.companyID), string(raw)
			if !seen[f.deviceID] {
				seen[f.deviceID] = true
				trim = append(trim, id(f.deviceID))
			}
		}
		slices.Sort(trim)
		b.Queue(`INSERT INTO device_failures (device_id, company_id, rec)
			SELECT device_id, company_id, rec FROM unnest($1::bigint[], $2::bigint[], $3::jsonb[]) WITH ORDINALITY AS f (device_id, company_id, rec, ord)
			ORDER BY ord`, devs, companies, recs)
		b.Queue(`DELETE FROM device_failures f USING unnest($1::bigint[]) AS d (id) WHERE f.device_id = d.id AND f.seq < (
			SELECT min(seq) FROM (SELECT seq FROM device_failures WHERE device_id = d.id ORDER BY seq DESC LIMIT $2) newest)`,
			trim, store.MaxDeviceFailures)
	}
}

// queueStreaks queues the SIMs' carrier-error streaks: a streak the batch
// ended is dropped, or, when carrier errors came after the end, starts
// again with those; any other adds the batch's errors.
func (p *reportPlan) queueStreaks(b *pgx.Batch) {
	var gone []int64
	var goneSlots []string
	type rows struct {
		devs, companies, counts []int64
		slots                   []string
		lasts                   []time.Time
	}
	var again, more rows
	for _, k := range sortedKeys(p.streaks, streakKey.cmp) {
		n := p.streaks[k]
		if n.n == 0 {
			gone, goneSlots = append(gone, id(k.deviceID)), append(goneSlots, k.slot)
			continue
		}
		r := &more
		if n.reset {
			r = &again
		}
		r.devs, r.slots, r.companies = append(r.devs, id(k.deviceID)), append(r.slots, k.slot), append(r.companies, id(n.companyID))
		r.counts, r.lasts = append(r.counts, n.n), append(r.lasts, n.last)
	}
	if len(gone) > 0 {
		b.Queue(`DELETE FROM sim_streaks s USING unnest($1::bigint[], $2::text[]) AS g (device_id, sim_slot)
			WHERE s.device_id = g.device_id AND s.sim_slot = g.sim_slot`, gone, goneSlots)
	}
	for _, r := range []struct {
		rows
		n string
	}{{again, "EXCLUDED.n"}, {more, "s.n + EXCLUDED.n"}} {
		if len(r.devs) == 0 {
			continue
		}
		b.Queue(`INSERT INTO sim_streaks AS s (device_id, sim_slot, company_id, n, last_at)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[])
			ON CONFLICT (device_id, sim_slot) DO UPDATE SET n = `+r.n+`, last_at = EXCLUDED.last_at`,
			r.devs, r.slots, r.companies, r.counts, r.lasts)
	}
}

// queueCounts queues the counters' increments, one row each in the
// transaction's shard, as count (core.go) adds a lone change's.
func (p *reportPlan) queueCounts(t *txn, b *pgx.Batch) {
	if len(p.counts) == 0 {
		return
	}
	var companies, devs, users, sent, delivered, failed, received, expired, segments []int64
	var days []int32
	var channels, shards []int16
	for _, k := range sortedKeys(p.counts, countKey.cmp) {
		c := p.counts[k]
		companies, days, channels, devs, users = append(companies, id(k.companyID)), append(days, k.day), append(channels, k.channel),
			append(devs, id(k.deviceID)), append(users, id(k.userID))
		shards = append(shards, t.shard())
		sent, delivered, failed = append(sent, int64(c.Sent)), append(delivered, int64(c.Delivered)), append(failed, int64(c.Failed))
		received, expired, segments = append(received, int64(c.Received)), append(expired, int64(c.Expired)), append(segments, int64(c.Segments))
	}
	b.Queue(`INSERT INTO stats_days AS s (company_id, day, channel, device_id, user_id, shard, sent, delivered, failed, received, expired, segments)
		SELECT * FROM unnest($1::bigint[], $2::int[], $3::smallint[], $4::bigint[], $5::bigint[], $6::smallint[],
			$7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[])
		ON CONFLICT (company_id, day, channel, device_id, user_id, shard) DO UPDATE SET
			sent = s.sent + EXCLUDED.sent, delivered = s.delivered + EXCLUDED.delivered, failed = s.failed + EXCLUDED.failed,
			received = s.received + EXCLUDED.received, expired = s.expired + EXCLUDED.expired, segments = s.segments + EXCLUDED.segments`,
		companies, days, channels, devs, users, shards, sent, delivered, failed, received, expired, segments)
}

// queueMessages queues the write of the batch's messages, each once as the
// batch leaves it, with its key columns as updateSend (sends.go) sets them,
// and a sweep's clearing of the due_at its stale rows kept.
func (p *reportPlan) queueMessages(b *pgx.Batch) error {
	if len(p.stale) > 0 {
		b.Queue("UPDATE messages SET due_at = NULL WHERE id = ANY($1)", p.stale)
	}
	if len(p.msgs) == 0 {
		return nil
	}
	n := len(p.msgs)
	ids, devs, places := make([]int64, n), make([]int64, n), make([]*int64, n)
	statuses, recs := make([]string, n), make([]string, n)
	dues, expires, updated := make([]*time.Time, n), make([]*time.Time, n), make([]time.Time, n)
	for i, m := range p.msgs {
		raw, err := rec(*m)
		if err != nil {
			return err
		}
		ids[i], devs[i], statuses[i], recs[i], updated[i] = id(m.ID), id(m.DeviceID), m.Status, string(raw), m.UpdatedAt
		place, due, exp := sendColumns(*m)
		if v, ok := place.(int64); ok {
			places[i] = &v
		}
		if v, ok := due.(time.Time); ok {
			dues[i] = &v
		}
		if v, ok := exp.(time.Time); ok {
			expires[i] = &v
		}
	}
	b.Queue(`UPDATE messages SET status = u.status, queue_place = u.place, due_at = u.due, expires_at = u.expires, updated_at = u.updated,
			rec = u.rec::jsonb, device_id = u.device_id
		FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::text[], $8::bigint[])
			AS u (id, status, place, due, expires, updated, rec, device_id)
		WHERE messages.id = u.id`, ids, statuses, places, dues, expires, updated, recs, devs)
	return nil
}
