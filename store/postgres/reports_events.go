package postgres

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// The status events of a batch of reports, as addWebhookEvent (webhooks.go)
// writes a lone change's: built in order against the company's outbox as
// the batch's earlier events left it, written together.

// plannedEvent is a status event a change makes: its deliveries queued,
// or refused with a line each in the deliveries log (refused) when the
// company's outbox is full.
type plannedEvent struct {
	m       store.Message
	ev      store.WebhookEvent
	ds      []store.WebhookDelivery
	refused []store.WebhookAttempt
	res     store.OutboxAdd
	now     time.Time
}

// statusEvent builds the webhook deliveries of m's move to its current
// status, as addWebhookEvent does for a lone change, against the company's
// outbox as the batch's earlier events left it; nothing is added to the
// plan yet (addEvent).
func (p *reportPlan) statusEvent(f *reportFacts, m store.Message, now time.Time) (*plannedEvent, error) {
	h := p.events
	if h == nil || h.Build == nil || m.Direction != store.Outbound || !statusEventTypes[m.Status] {
		return nil, nil
	}
	set, ok := f.sets[m.CompanyID]
	if !ok || len(set.Entries) == 0 {
		return nil, nil
	}
	ev, ds, err := h.Build(set, m)
	if err != nil {
		return nil, fmt.Errorf("status event of message %d: %w", m.ID, err)
	}
	if len(ds) == 0 {
		return nil, nil
	}
	use := f.outbox[m.CompanyID]
	n, size := int64(len(ds)), int64(len(ev.Body))
	e := &plannedEvent{m: m, ev: ev, ds: ds, now: now}
	e.res.Pending, e.res.PendingBytes = int(use.deliveries), use.bytes
	lim := h.Limits
	if lim.MaxDeliveries > 0 && use.deliveries+n > int64(lim.MaxDeliveries) || lim.MaxBytes > 0 && use.bytes+size > lim.MaxBytes {
		for _, d := range ds {
			e.refused = append(e.refused, store.WebhookAttempt{
				CompanyID: m.CompanyID, WebhookID: d.WebhookID, EventID: ev.ID, DeliveryID: d.UUID, EventType: d.EventType,
				State: store.WebhookFailed, CreatedAt: now.UTC(),
				Error: fmt.Sprintf("not queued: the company's webhook outbox is full (%d deliveries pending, %d bytes; the limits are %d and %d)",
					use.deliveries, use.bytes, lim.MaxDeliveries, lim.MaxBytes),
			})
		}
		e.res.Refused = len(ds)
		return e, nil
	}
	if ev.ID == "" {
		return nil, fmt.Errorf("status event of message %d: %w: webhook event id is empty", m.ID, store.ErrConflict)
	}
	e.res.Queued, e.res.Pending, e.res.PendingBytes = len(ds), int(use.deliveries+n), use.bytes+size
	return e, nil
}

// addEvent adds a built event to the plan and its deliveries to its
// company's outbox, as the next event of the batch will find it.
func (p *reportPlan) addEvent(f *reportFacts, e *plannedEvent) {
	if e == nil {
		return
	}
	p.evs = append(p.evs, e)
	if e.res.Queued > 0 {
		use := f.outbox[e.m.CompanyID]
		use.deliveries += int64(len(e.ds))
		use.bytes += int64(len(e.ev.Body))
	}
}

// eventIDs takes the ids of the deliveries and the deliveries log's lines
// the plan's events add, in the order they are added.
func (p *reportPlan) eventIDs(t *txn) (deliveries, attempts []uint64, err error) {
	var nd, na int
	for _, e := range p.evs {
		if e.res.Queued > 0 {
			nd += len(e.ds)
		}
		na += len(e.refused)
	}
	if nd+na == 0 {
		return nil, nil, nil
	}
	if nd > 0 {
		if deliveries, err = nextIDs(t, "webhook_deliveries", nd); err != nil {
			return nil, nil, err
		}
	}
	if na > 0 {
		if attempts, err = nextIDs(t, "webhook_attempts", na); err != nil {
			return nil, nil, err
		}
	}
	return deliveries, attempts, nil
}

// queueEvents queues the plan's events as addWebhookEvent writes one: the
// bodies, the deliveries, the bodies charged after the fact to the day's
// storage, the outbox counters; refused deliveries as lines of the
// deliveries log, trimmed to its length.
func (p *reportPlan) queueEvents(t *txn, b *pgx.Batch, deliveryIDs, attemptIDs []uint64) error {
	type dayKey struct {
		companyID uint64
		day       int32
	}
	var evIDs []string
	var evCompanies, evPending []int64
	var bodies [][]byte
	var dIDs, dCompanies, dWebhooks []int64
	var dEvents, dRecs, aRecs []string
	var dDue, aAt []time.Time
	var aIDs, aCompanies, aWebhooks []int64
	charges, outbox := map[dayKey]int64{}, map[uint64][2]int64{}
	var trim []int64
	trimmed := map[uint64]bool{}
	for _, e := range p.evs {
		c := e.m.CompanyID
		for _, a := range e.refused {
			a.ID, attemptIDs = attemptIDs[0], attemptIDs[1:]
			raw, err := json.Marshal(a)
			if err != nil {
				return err
			}
			aIDs, aCompanies, aWebhooks, aAt, aRecs = append(aIDs, id(a.ID)), append(aCompanies, id(c)), append(aWebhooks, id(a.WebhookID)),
				append(aAt, a.CreatedAt), append(aRecs, string(raw))
			if !trimmed[c] {
				trimmed[c] = true
				trim = append(trim, id(c))
			}
		}
		if e.res.Queued == 0 {
			continue
		}
		n, size := int64(len(e.ds)), int64(len(e.ev.Body))
		evIDs, evCompanies, evPending, bodies = append(evIDs, e.ev.ID), append(evCompanies, id(c)), append(evPending, n), append(bodies, e.ev.Body)
		charges[dayKey{c, day(e.now)}] += size + n*store.DeliveryRowCost
		o := outbox[c]
		outbox[c] = [2]int64{o[0] + n, o[1] + size}
		for _, d := range e.ds {
			d.ID, deliveryIDs = deliveryIDs[0], deliveryIDs[1:]
			d.CompanyID, d.EventID, d.Body = c, e.ev.ID, nil
			raw, err := json.Marshal(d)
			if err != nil {
				return err
			}
			dIDs, dCompanies, dWebhooks, dEvents = append(dIDs, id(d.ID)), append(dCompanies, id(c)), append(dWebhooks, id(d.WebhookID)), append(dEvents, e.ev.ID)
			dDue, dRecs = append(dDue, d.NextAttemptAt), append(dRecs, string(raw))
		}
	}
	if len(aIDs) > 0 {
		slices.Sort(trim)
		b.Queue(`INSERT INTO webhook_attempts (id, company_id, webhook_id, created_at, rec)
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::timestamptz[], $5::jsonb[])`,
			aIDs, aCompanies, aWebhooks, aAt, aRecs)
		if keep := p.events.Limits.LogKeep; keep > 0 {
			// Lines another transaction drops meanwhile are left to it
			// (appendAttempt).
			b.Queue(`DELETE FROM webhook_attempts WHERE ctid = ANY (ARRAY (SELECT w.ctid FROM webhook_attempts w
				JOIN unnest($1::bigint[]) AS c (id) ON w.company_id = c.id AND w.id <= (
					SELECT id FROM webhook_attempts WHERE company_id = c.id ORDER BY id DESC OFFSET $2 LIMIT 1)
				FOR UPDATE OF w SKIP LOCKED))`, trim, keep)
		}
	}
	if len(evIDs) == 0 {
		return nil
	}
	// DO NOTHING, then the ids it stored: a taken id fails the batch with
	// the error addWebhookEvent gives, naming the message whose event it is.
	b.Queue(`INSERT INTO webhook_events (id, company_id, pending, body)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[]) ON CONFLICT (id) DO NOTHING RETURNING id`,
		evIDs, evCompanies, evPending, bodies).Query(func(rows pgx.Rows) error {
		stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(stored) == len(evIDs) {
			return err
		}
		for _, e := range p.evs {
			if e.res.Queued > 0 && !slices.Contains(stored, e.ev.ID) {
				return fmt.Errorf("status event of message %d: %w: webhook event id %q is taken", e.m.ID, store.ErrConflict, e.ev.ID)
			}
		}
		return fmt.Errorf("%w: a webhook event id of the batch is taken", store.ErrConflict) // one id twice in the batch
	})
	// The bodies are charged as every write's charges are, last
	// (txn.chargeStorage); the outbox's rows in one order, by company, as
	// every batch locks them (sortedKeys).
	for k, cost := range charges {
		t.chargeStorage(k.companyID, k.day, cost)
	}
	var oCompanies, oDeliveries, oBytes []int64
	var oShards []int16
	for _, c := range sortedKeys(outbox, cmp.Compare[uint64]) {
		o := outbox[c]
		oCompanies, oShards, oDeliveries, oBytes = append(oCompanies, id(c)), append(oShards, t.shard()), append(oDeliveries, o[0]), append(oBytes, o[1])
	}
	b.Queue(`INSERT INTO webhook_deliveries (id, company_id, webhook_id, event_id, next_attempt_at, rec)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[], $6::jsonb[])`,
		dIDs, dCompanies, dWebhooks, dEvents, dDue, dRecs)
	b.Queue(`INSERT INTO webhook_outboxes (company_id, shard, deliveries, bytes) SELECT * FROM unnest($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[])
		ON CONFLICT (company_id, shard) DO UPDATE SET deliveries = webhook_outboxes.deliveries + EXCLUDED.deliveries, bytes = webhook_outboxes.bytes + EXCLUDED.bytes`,
		oCompanies, oShards, oDeliveries, oBytes)
	return nil
}
