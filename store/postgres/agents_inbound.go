package postgres

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// StoreAgentInbound stores a WhatsApp or iMessage message an agent received,
// once per (device registration, channel, client_id), as StoreInbound does
// for SMS. m carries CompanyID, DeviceID, Channel and Account (the address
// it came to, normalised): a device that is gone, or whose company is
// closing (MarkCompanyClosing) or not stored, is ErrDeviceGone, a repeat
// too, read under the company's row lock (deviceOfOpenCompanySQL); an
// address the company has no number for is
// ErrNotFound, one another agent of the company holds ErrNumberNotHeld
// (unless the frame repeats one already stored). A new message's webhook
// event (SetInboundEvents) is written in the same transaction.
func (s *Store) StoreAgentInbound(m *store.Message, now func() time.Time) (store.Message, bool, error) {
	var out store.Message
	var dup bool
	err := s.write(m.Channel+" inbound", func(t *txn) error {
		out, dup = store.Message{}, false
		at := now().UTC()
		// The device, the number, an earlier message of the frame, the
		// day's storage use and the company's webhook facts, in one round
		// trip with the BEGIN.
		var devRaw, numRaw, prior []byte
		var used int64
		b := &pgx.Batch{}
		b.Queue(deviceOfOpenCompanySQL, id(m.CompanyID), id(m.DeviceID)).QueryRow(func(row pgx.Row) error { return noRow(row.Scan(&devRaw)) })
		b.Queue("SELECT rec FROM agent_numbers WHERE company_id = $1 AND channel = $2 AND address = $3",
			id(m.CompanyID), m.Channel, m.Account).QueryRow(func(row pgx.Row) error { return noRow(row.Scan(&numRaw)) })
		b.Queue("SELECT rec FROM messages WHERE company_id = $1 AND device_id = $2 AND channel = $3 AND agent_client = $4",
			id(m.CompanyID), id(m.DeviceID), m.Channel, m.ClientID).QueryRow(func(row pgx.Row) error { return noRow(row.Scan(&prior)) })
		if s.dailyBudget > 0 {
			b.Queue("SELECT coalesce(sum(used), 0)::bigint FROM storage_usage WHERE company_id = $1 AND day = $2",
				id(m.CompanyID), day(at)).QueryRow(func(row pgx.Row) error { return row.Scan(&used) })
		}
		var f receivedFacts
		s.queueReceivedFacts(b, m.CompanyID, *m, &f)
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
		if numRaw == nil {
			return store.ErrNotFound
		}
		var n store.AgentNumber
		if err := json.Unmarshal(numRaw, &n); err != nil {
			return err
		}
		if prior != nil {
			dup = true // acked again even after the number moved on
			return json.Unmarshal(prior, &out)
		}
		if n.DeviceID != d.ID {
			// Only the agent whose hello holds the number speaks for it:
			// another agent of the company could otherwise put words in
			// the mouths of the number's contacts (and in its webhooks).
			return store.ErrNumberNotHeld
		}
		msg := *m
		msg.Media = slices.Clone(m.Media) // attachMedia fills in its own copy
		msg.CompanyID, msg.DeviceID, msg.Device, msg.Direction, msg.Status = d.CompanyID, d.ID, d.Fingerprint, store.Inbound, store.MsgReceived
		msg.NumberID, msg.NumberRef = n.ID, n.PublicID
		msg.CreatedAt = at
		msg.UpdatedAt = msg.CreatedAt
		// The files it names must be its registration's uploads no message
		// took (store.ErrMediaUnknown otherwise), and its cost within the
		// day's budget; then it takes its id, and its files with it. A
		// refused message takes no id, as the phone's refused SMS takes
		// none (StoreInbound).
		files, err := lockMedia(t, &msg)
		if err != nil {
			return err
		}
		if err := s.addUsed(t, msg.CompanyID, msg.CreatedAt, store.MessageCost(msg), used, true); err != nil {
			return err
		}
		if msg.ID, err = nextID(t, "messages"); err != nil {
			return err
		}
		if err := attachMedia(t, &msg, files); err != nil {
			return err
		}
		// The message and all its arrival adds, in one round trip.
		b = &pgx.Batch{}
		if err := queueAgentMessage(b, msg); err != nil {
			return err
		}
		if err := s.queueReceived(t, b, msg, d, &f); err != nil {
			return err
		}
		err = t.sendBatch(b)
		if violates(err, "messages_agent_client") {
			return errAgain // the same frame stored at once: read it again, a repeat
		}
		if err != nil {
			return err
		}
		out = msg
		return nil
	})
	if err != nil {
		return store.Message{}, false, err
	}
	return out, dup, nil
}

// deviceOfOpenCompanySQL reads a device (company $1, device $2) for a
// write its link makes on the company's behalf (StoreAgentInbound,
// PutMedia): its record while it is live and its company stored and not
// closing (MarkCompanyClosing), no row otherwise. The company's row is
// taken KEY SHARE, the transaction's first lock, as StoreInbound's read
// takes it (inboundReadSQL): a mark waits for a write that read the
// company open, and a write that met the mark's lock reads the row again
// as the mark left it and finds no device.
const deviceOfOpenCompanySQL = `SELECT d.rec FROM ` + openCompanyDevice + ` FOR KEY SHARE OF c`

// openCompanyDevice is the device (company $1, device $2) while it is live
// and its company (c) stored and not closing, joined to its company: what
// DeviceCompany reads, and a write of its link reads again locked
// (deviceOfOpenCompanySQL).
const openCompanyDevice = `devices d JOIN companies c ON c.id = d.company_id
	WHERE d.company_id = $1 AND d.id = $2 AND d.deleted_at IS NULL AND NOT c.rec ? 'closing_at'`
