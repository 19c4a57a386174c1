package postgres

// The messages phones receive: StoreInbound, and the stop and start keywords
// that update the sender's opt-out.

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/store"
)

// StoreInbound stores a message a phone received, once per (device,
// client_id): a repeat answers the message stored the first time, with dup
// true. m names its device by CompanyID and DeviceID, as the phone's link
// knows them; a device that is gone, or whose company is closing
// (MarkCompanyClosing) or not stored, is ErrDeviceGone, a repeat too, read
// under the company's row lock (inboundReadSQL), and client_ids of
// another registration of the same handset never match. A new message's
// webhook event (SetInboundEvents) is written in the same transaction, so
// both are durable together or not at all. A new message counts against its
// company's daily storage budget (a *BudgetError over it, nothing stored).
// Over it, a stop keyword still puts its sender on the opt-out list, within
// the list's overdraft (store.OptOutOverdraft), so that the sends accepted
// before it stop now; the message itself waits for the phone's resend.
// A stop or start keyword puts its sender on the company's opt-out list or
// takes it off, in the same transaction.
func (s *Store) StoreInbound(m *store.Message, now func() time.Time) (store.Message, bool, error) {
	var out store.Message
	var dup bool
	var refused error
	err := s.write("inbound", func(t *txn) error {
		out, dup, refused = store.Message{}, false, nil
		msg := *m
		msg.Direction, msg.Status = store.Inbound, store.MsgReceived
		msg.CreatedAt = now().UTC()
		msg.UpdatedAt = msg.CreatedAt
		cost := store.MessageCost(msg)
		// One round trip with the BEGIN reads what the message's checks
		// and writes need: its device, an earlier message of its client
		// id, the day's storage use and, when these let it be stored, its
		// id (inboundReadSQL); its company's webhook facts and keyword
		// setting (queueReceivedFacts).
		var devRaw, prior []byte
		var used int64
		var msgID *int64
		b := &pgx.Batch{}
		b.Queue(inboundReadSQL, id(m.CompanyID), id(m.DeviceID), m.ClientID, s.dailyBudget, cost, day(msg.CreatedAt)).QueryRow(func(row pgx.Row) error {
			return row.Scan(&devRaw, &prior, &used, &msgID)
		})
		var f receivedFacts
		s.queueReceivedFacts(b, m.CompanyID, msg, &f)
		if err := t.sendBatch(b); err != nil {
			return err
		}
		if devRaw == nil {
			return store.ErrDeviceGone
		}
		var d store.Device
		if err := json.Unmarshal(devRaw, &d); err != nil {
			return err
		}
		if prior != nil {
			dup = true
			return json.Unmarshal(prior, &out)
		}
		msg.CompanyID, msg.DeviceID, msg.Device = d.CompanyID, d.ID, d.Fingerprint
		if err := s.addUsed(t, msg.CompanyID, msg.CreatedAt, cost, used, true); err != nil {
			if errors.As(err, new(*store.BudgetError)) {
				// Nothing of the message is stored, but a STOP still
				// lists its sender (within the opt-out overdraft): the
				// message waits for the phone's resend.
				refused = err
				return s.applyOptOutKeyword(t, msg, true)
			}
			return err
		}
		if msgID != nil {
			msg.ID = uint64(*msgID)
		} else {
			// The read's checks and the budget's disagreed (they read the
			// same sum, so they do not): take the id on its own.
			var err error
			if msg.ID, err = nextID(t, "messages"); err != nil {
				return err
			}
		}
		raw, err := rec(msg)
		if err != nil {
			return err
		}
		// The message and all its arrival adds, in one round trip, in the
		// order every write locks its rows: the day's storage use last.
		b = &pgx.Batch{}
		b.Queue(`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, client_id, created_at, updated_at, rec)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			id(msg.ID), id(msg.CompanyID), id(msg.DeviceID), msg.UUID, msg.Direction, msg.Channel, msg.Phone, msg.Status, msg.ClientID,
			msg.CreatedAt, msg.UpdatedAt, raw)
		if err := s.queueReceived(t, b, msg, d, &f); err != nil {
			return err
		}
		err = t.sendBatch(b)
		if violates(err, "messages_inbound_client") {
			return errAgain // the same client id stored meanwhile: answer it as a repeat
		}
		if err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err == nil && refused != nil {
		err = fmt.Errorf("store: inbound: %w", refused) // as a refused transaction says it
	}
	if err != nil {
		return store.Message{}, false, err
	}
	return out, dup, nil
}

// inboundReadSQL is StoreInbound's read (company $1, device $2, client id
// $3, daily budget $4, the message's cost $5, day $6), one statement and
// one snapshot: the live device's record and an earlier message's of the
// client id (NULL when none), the day's storage use (0 without a budget),
// and the new message's id, taken from the sequence only when the message
// will be stored: its device is live, the client id new and its cost
// within the budget, as StoreInbound checks them on what the statement
// returns. A refused or repeated message takes no id, as when it was taken
// after those checks.
//
// The device reads as gone (NULL) when its company is closing
// (MarkCompanyClosing) or not stored, read on the company's row, which
// the statement takes KEY SHARE before anything else of the transaction
// (as a foreign key's check would; companyOpen): the mark, which writes
// that row under FOR UPDATE, waits for an inbound that read it open to
// commit, and an inbound that met the mark's lock waits for it and then
// reads the row as the mark left it (READ COMMITTED reads a locked row's
// newest version). So no message is stored after its company's mark,
// however the link's read of its company (DeviceCompany) and this write
// fell around it.
const inboundReadSQL = `WITH c AS (SELECT rec ? 'closing_at' AS closing FROM companies WHERE id = $1 FOR KEY SHARE)
	SELECT d.rec, p.rec, u.used,
		CASE WHEN d.rec IS NOT NULL AND p.rec IS NULL AND ($4::bigint <= 0 OR u.used + $5::bigint <= $4::bigint)
			THEN nextval(pg_get_serial_sequence('messages', 'id')) END
	FROM (SELECT CASE WHEN $4::bigint > 0 THEN (SELECT coalesce(sum(used), 0)::bigint FROM storage_usage WHERE company_id = $1 AND day = $6)
		ELSE 0 END AS used) u
	LEFT JOIN c ON true
	LEFT JOIN devices d ON NOT c.closing AND d.company_id = $1 AND d.id = $2 AND d.deleted_at IS NULL
	LEFT JOIN messages p ON p.company_id = $1 AND p.device_id = $2 AND p.client_id = $3`

// receivedFacts are what a new received message's writes read of its
// company, with the reads that begin its transaction: its webhook set and
// outbox (when the store builds inbound events), and its record when the
// message is a stop or start keyword (its keyword setting).
type receivedFacts struct {
	webhooks webhookFacts
	keyword  bool           // an SMS that is a stop or start keyword
	company  *store.Company // its company, when keyword; nil if gone
}

// queueReceivedFacts queues the reads of f for m, a message of the company
// the transaction is about to store.
func (s *Store) queueReceivedFacts(b *pgx.Batch, companyID uint64, m store.Message, f *receivedFacts) {
	*f = receivedFacts{}
	if h := s.inboundEvents; h != nil && h.Build != nil {
		queueWebhookFacts(b, companyID, &f.webhooks)
	}
	if m.Channel != "" && m.Channel != "sms" {
		return
	}
	if stop, start := store.KeywordOf(m.Text); !stop && !start {
		return
	}
	f.keyword = true
	b.Queue("SELECT rec FROM companies WHERE id = $1", id(companyID)).QueryRow(func(row pgx.Row) error {
		var raw []byte
		if err := row.Scan(&raw); err != nil {
			return noRow(err)
		}
		f.company = &store.Company{}
		return json.Unmarshal(raw, f.company)
	})
}

// queueReceived queues, in the batch that stores a new received message
// (StoreInbound, StoreAgentInbound), what its arrival adds beside it, in
// the order every write locks these rows: the day's received count, the
// company's activity line and the feed's trim, the sender's opt-out when
// an SMS is a stop or start keyword, its webhook event (f, read before),
// and the transaction's charges, last. A keyword that lists its sender is
// charged once the batch has run (whether the entry is new): the
// transaction's charges are then written by its commit, still last.
func (s *Store) queueReceived(t *txn, b *pgx.Batch, msg store.Message, d store.Device, f *receivedFacts) error {
	b.Queue(countSQL, countArgs(msg, msg.CreatedAt, t.shard(), store.Counts{Received: 1})...)
	if err := queueActivity(b, msg.CompanyID, store.Activity{Type: store.ActMessageReceived, At: msg.CreatedAt,
		Description: store.ChannelLabel(msg.Channel) + " from " + store.MaskPhone(msg.Phone) + " received on " + store.ActivityName(store.DeviceLabel(d))}); err != nil {
		return err
	}
	if err := s.queueOptOutKeyword(t, b, msg, f); err != nil {
		return err
	}
	if err := s.queueInboundEvent(t, b, msg, f); err != nil {
		return err
	}
	if !f.keyword {
		t.queueCharges(b)
	}
	return nil
}

// queueOptOutKeyword queues applyOptOutKeyword's write for a message the
// budget admitted (f says whether it is a keyword and holds its company).
func (s *Store) queueOptOutKeyword(t *txn, b *pgx.Batch, m store.Message, f *receivedFacts) error {
	if !f.keyword {
		return nil
	}
	if f.company == nil {
		return fmt.Errorf("opt-out keyword: company %d: %w", m.CompanyID, store.ErrNotFound)
	}
	if c := f.company; c.OptOutKeywords != nil && !*c.OptOutKeywords {
		return nil
	}
	who := m.Phone
	if n, ok := phone.NormalizeSender(m.Phone); ok {
		who = n
	}
	if _, start := store.KeywordOf(m.Text); start {
		b.Queue("DELETE FROM opt_outs WHERE company_id = $1 AND phone = $2", id(m.CompanyID), who)
		return nil
	}
	raw, err := rec(store.OptOut{Phone: who, Source: store.OptOutKeyword, CreatedAt: m.CreatedAt})
	if err != nil {
		return err
	}
	b.Queue("INSERT INTO opt_outs (company_id, phone, rec) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", id(m.CompanyID), who, raw).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return nil
		}
		return s.chargeAfter(t, m.CompanyID, m.CreatedAt, store.OptOutCost)
	})
	return nil
}

// queueInboundEvent queues the outbox write of m's event, built against
// the webhook facts read before (f); the event counts on the day the
// message does.
func (s *Store) queueInboundEvent(t *txn, b *pgx.Batch, m store.Message, f *receivedFacts) error {
	h := s.inboundEvents
	if h == nil || h.Build == nil {
		return nil
	}
	wrap := func(err error) error { return fmt.Errorf("webhook event of inbound message %d: %w", m.ID, err) }
	w, err := planWebhookEvent(&f.webhooks, m.CompanyID, m.CreatedAt, h.Limits, func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		return h.Build(set, m)
	})
	if err != nil {
		return wrap(err)
	}
	if w == nil {
		return nil
	}
	if err := w.queue(t, b, wrap); err != nil {
		return wrap(err)
	}
	if res := w.res; h.Committed != nil && (res.Queued > 0 || res.Refused > 0) {
		t.OnCommit(func() { h.Committed(m, res) })
	}
	return nil
}

// noRow makes a row's absence no error: what it would have been scanned
// into stays as it was.
func noRow(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// applyOptOutKeyword reads a new inbound SMS for a stop or start keyword
// and updates the sender's entry on the company's list, unless the company
// turned keywords off. The entry names the sender as sends name
// recipients: its E.164 form when it is a number. A new entry is charged
// after the message that brought it.
//
// overBudget is a message the daily budget refused (nothing of it is
// stored): a stop keyword still lists its sender, charged against the
// opt-out overdraft (chargeOptOut), so that the sends accepted before it
// stop now, not when the phone's resend is stored after midnight; past the
// overdraft it waits for that resend, as a start keyword always does.
func (s *Store) applyOptOutKeyword(t *txn, m store.Message, overBudget bool) error {
	if m.Channel != "" && m.Channel != "sms" {
		return nil
	}
	stop, start := store.KeywordOf(m.Text)
	if !stop && !start || overBudget && start {
		return nil
	}
	var c store.Company
	if err := getRec(t, &c, "SELECT rec FROM companies WHERE id = $1", id(m.CompanyID)); err != nil {
		return fmt.Errorf("opt-out keyword: company %d: %w", m.CompanyID, err)
	}
	if c.OptOutKeywords != nil && !*c.OptOutKeywords {
		return nil
	}
	who := m.Phone
	if n, ok := phone.NormalizeSender(m.Phone); ok {
		who = n
	}
	if start {
		_, err := t.exec("DELETE FROM opt_outs WHERE company_id = $1 AND phone = $2", id(m.CompanyID), who)
		return err
	}
	raw, err := rec(store.OptOut{Phone: who, Source: store.OptOutKeyword, CreatedAt: m.CreatedAt})
	if err != nil {
		return err
	}
	if overBudget {
		var listed bool
		if err := t.row("SELECT EXISTS (SELECT 1 FROM opt_outs WHERE company_id = $1 AND phone = $2)", id(m.CompanyID), who).Scan(&listed); err != nil || listed {
			return err
		}
		if err := s.chargeOptOut(t, m.CompanyID, m.CreatedAt, store.OptOutCost); err != nil {
			if errors.As(err, new(*store.BudgetError)) {
				return nil
			}
			return err
		}
		_, err := t.exec("INSERT INTO opt_outs (company_id, phone, rec) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", id(m.CompanyID), who, raw)
		return err
	}
	tag, err := t.exec("INSERT INTO opt_outs (company_id, phone, rec) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", id(m.CompanyID), who, raw)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	return s.chargeAfter(t, m.CompanyID, m.CreatedAt, store.OptOutCost)
}
