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
// knows them; a device that is gone is ErrDeviceGone, and client_ids of
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
		// The device and an earlier message of the client id, in one
		// round trip with the BEGIN (as liveDeviceByID and getRec read
		// them).
		var d store.Device
		var devRaw, prior []byte
		b := &pgx.Batch{}
		b.Queue("SELECT rec FROM devices WHERE company_id = $1 AND id = $2 AND deleted_at IS NULL",
			id(m.CompanyID), id(m.DeviceID)).QueryRow(func(row pgx.Row) error { return noRow(row.Scan(&devRaw)) })
		b.Queue("SELECT rec FROM messages WHERE company_id = $1 AND device_id = $2 AND client_id = $3",
			id(m.CompanyID), id(m.DeviceID), m.ClientID).QueryRow(func(row pgx.Row) error { return noRow(row.Scan(&prior)) })
		if err := t.sendBatch(b); err != nil {
			return err
		}
		if devRaw == nil {
			return store.ErrDeviceGone
		}
		if err := json.Unmarshal(devRaw, &d); err != nil {
			return err
		}
		if prior != nil {
			dup = true
			return json.Unmarshal(prior, &out)
		}
		var err error
		msg := *m
		msg.CompanyID, msg.DeviceID, msg.Device, msg.Direction, msg.Status = d.CompanyID, d.ID, d.Fingerprint, store.Inbound, store.MsgReceived
		msg.CreatedAt = now().UTC()
		msg.UpdatedAt = msg.CreatedAt
		if err := s.charge(t, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg)); err != nil {
			if errors.As(err, new(*store.BudgetError)) {
				// Nothing of the message is stored, but a STOP still
				// lists its sender (within the opt-out overdraft): the
				// message waits for the phone's resend.
				refused = err
				return s.applyOptOutKeyword(t, msg, true)
			}
			return err
		}
		if msg.ID, err = nextID(t, "messages"); err != nil {
			return err
		}
		raw, err := rec(msg)
		if err != nil {
			return err
		}
		_, err = t.exec(`INSERT INTO messages (id, company_id, device_id, uuid, direction, channel, phone, status, client_id, created_at, updated_at, rec)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			id(msg.ID), id(msg.CompanyID), id(msg.DeviceID), msg.UUID, msg.Direction, msg.Channel, msg.Phone, msg.Status, msg.ClientID,
			msg.CreatedAt, msg.UpdatedAt, raw)
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "messages_inbound_client" {
			return errAgain // the same client id stored meanwhile: answer it as a repeat
		}
		if err != nil {
			return err
		}
		if err := s.recordReceived(t, msg, d); err != nil {
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

// recordReceived writes, in the transaction that stored a new received
// message (StoreInbound, StoreAgentInbound), what its arrival adds beside
// it: the day's received count, the company's activity line, the sender's
// opt-out when an SMS is a stop or start keyword (applyOptOutKeyword reads
// SMS only), and its webhook event.
func (s *Store) recordReceived(t *txn, msg store.Message, d store.Device) error {
	if err := count(t, msg, msg.CreatedAt, store.Counts{Received: 1}); err != nil {
		return err
	}
	if err := addActivity(t, msg.CompanyID, store.Activity{Type: store.ActMessageReceived, At: msg.CreatedAt,
		Description: store.ChannelLabel(msg.Channel) + " from " + store.MaskPhone(msg.Phone) + " received on " + store.ActivityName(store.DeviceLabel(d))}); err != nil {
		return err
	}
	if err := s.applyOptOutKeyword(t, msg, false); err != nil {
		return err
	}
	return s.inboundEvent(t, msg)
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
