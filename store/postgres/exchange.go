package postgres

// The reads of a device's exchange: the inbound list, history, conversations
// and the export's pages of a company's messages.

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// InboundList returns the newest inbound SMS matching q, newest first, each
// filter read through its own index. A device filter names the company's
// live device; it lists that registration's messages only, and any other
// fingerprint (unknown, another company's) is ErrDeviceGone. A limit below
// 1 lists none.
func (s *Store) InboundList(q store.InboundQuery) ([]store.Message, error) {
	var out []store.Message
	err := s.read("inbound list", func(t *txn) error {
		more, args := "", []any{id(q.CompanyID)}
		if q.Device != "" {
			d, err := liveDevice(t, q.CompanyID, q.Device, false)
			if err != nil {
				return err
			}
			args = append(args, id(d.ID))
			more += fmt.Sprintf(" AND device_id = $%d", len(args))
		}
		if q.SIMSlot != "" {
			args = append(args, q.SIMSlot)
			more += fmt.Sprintf(" AND rec->>'sim_slot' = $%d", len(args))
		}
		if q.Limit < 1 {
			return nil // LIMIT refuses a negative count
		}
		args = append(args, q.Limit)
		var err error
		out, err = getRecs[store.Message](t, inboundListSQL(more, len(args)), args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inboundListSQL is InboundList's statement: the newest inbound SMS of a
// company (company_id = $1) that the further conditions pick (more, "" or
// " AND ..."), at most $limit. The company is asked for as a range of one
// value and the rows in (company_id, id) order, an order only the indexes
// that lead with the company (messages_inbound and its kin, one a filter)
// give: asked for company_id = $1 and id order, the planner could take the
// table's primary key newest first instead and pass over every other
// company's rows until it met the page, since it counts on a company's
// rows being spread over the table evenly; for a company whose messages
// are older than the others' (one that stopped sending a while ago) it
// read every message stored since (TestInboundListReadsOneCompany;
// docs/performance.md, "The inbound list and the export of a quiet
// company on PostgreSQL"). An equality on company_id makes that order id order alone
// (the planner drops a column fixed to one value from it); the range does
// not.
func inboundListSQL(more string, limit int) string {
	return `SELECT rec FROM messages WHERE company_id >= $1 AND company_id <= $1` + more + `
			AND direction = 'inbound' AND channel NOT IN ` + agentChannels + fmt.Sprintf(`
		ORDER BY company_id DESC, id DESC LIMIT $%d`, limit)
}

// pageOffset is how many entries come before page (from 1) of limit each,
// and whether the page has any of total.
func pageOffset(page, limit, total int) (skip int, ok bool) {
	if page < 1 || limit < 1 || total <= 0 {
		return 0, false
	}
	if pages := (total-1)/limit + 1; page > pages {
		return 0, false
	}
	return (page - 1) * limit, true
}

// History is one page of the exchange of the company's live device
// (fingerprint) with one number, newest first, with the conversation's
// total. It shows that registration's messages only; a fingerprint that is
// unknown or another company's is ErrDeviceGone. A page past the end is
// empty, however large its number.
func (s *Store) History(companyID uint64, device, phone string, page, limit int) ([]store.Message, int, error) {
	var out []store.Message
	total := 0
	err := s.read("history", func(t *txn) error {
		out, total = nil, 0
		d, err := liveDevice(t, companyID, device, false)
		if err != nil {
			return err
		}
		err = t.row("SELECT messages FROM conversations WHERE company_id = $1 AND device_id = $2 AND phone = $3",
			id(companyID), id(d.ID), phone).Scan(&total)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		skip, ok := pageOffset(page, limit, total)
		if !ok {
			return nil
		}
		out, err = getRecs[store.Message](t, `SELECT rec FROM messages
			WHERE company_id = $1 AND device_id = $2 AND phone = $3 AND channel NOT IN `+agentChannels+`
			ORDER BY id DESC OFFSET $4 LIMIT $5`, id(companyID), id(d.ID), phone, skip, limit)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// conversationsOf reads conversations of a device registration with their
// newest messages (a query that selects a conversation's phone and count
// and its last message's record), in the order and bounds the query
// gives, and up to the one whose last message brings their texts to
// textBound bytes (0: no such bound). The query itself ends at that one
// (a window's sum of the texts before each row), so the rows past it are
// never sent; the bound here is what says a page was cut.
func conversationsOf(t *txn, textBound int, query string, args ...any) ([]store.Conversation, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Conversation
	text := 0
	for rows.Next() {
		var c store.Conversation
		var raw []byte
		if err := rows.Scan(&c.Phone, &c.MessageCount, &raw); err != nil {
			return nil, err
		}
		var last store.Message
		if err := json.Unmarshal(raw, &last); err != nil {
			return nil, err
		}
		c.LastMessage, c.LastMessageAt, c.Direction, c.LastID = last.Text, last.CreatedAt, last.Direction, last.ID
		out = append(out, c)
		if text += len(c.LastMessage); textBound > 0 && text >= textBound {
			break // the rows left are dropped with rows.Close
		}
	}
	return out, rows.Err()
}

// Conversations lists the conversations of the company's live device
// (fingerprint), the latest message first, at most limit (all when limit
// <= 0) and up to the one whose last message brings their texts to
// store.ConversationsText: that registration's only. A fingerprint that is unknown or
// another company's is ErrDeviceGone.
func (s *Store) Conversations(companyID uint64, device string, limit int) ([]store.Conversation, error) {
	var out []store.Conversation
	err := s.read("conversations", func(t *txn) error {
		d, err := liveDevice(t, companyID, device, false)
		if err != nil {
			return err
		}
		bound := any(nil) // LIMIT NULL: all
		if limit > 0 {
			bound = limit
		}
		// As ConversationsAfter: the rows past the one that brings the
		// texts to store.ConversationsText are left in the database.
		out, err = conversationsOf(t, store.ConversationsText, `SELECT p.phone, p.messages, m.rec FROM (SELECT l.phone, l.messages, l.last_id,
			coalesce(sum(l.text) OVER (ORDER BY l.last_id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
			FROM (SELECT c.phone, c.messages, c.last_id, octet_length(m.rec->>'text') AS text FROM conversations c JOIN messages m ON m.id = c.last_id
			WHERE c.company_id = $1 AND c.device_id = $2 ORDER BY c.last_id DESC LIMIT $3) l) p
			JOIN messages m ON m.id = p.last_id WHERE p.before < $4 ORDER BY p.last_id DESC`,
			id(companyID), id(d.ID), bound, store.ConversationsText)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ConversationsAfter returns up to limit of a device's conversations (company
// and device id) whose number sorts after the given one ("" for the first
// page), in number order, up to the one whose last message brings their
// texts to store.ExportPageText (store.ExportPageFull says to read on).
func (s *Store) ConversationsAfter(companyID, deviceID uint64, after string, limit int) ([]store.Conversation, error) {
	var out []store.Conversation
	err := s.read(fmt.Sprintf("conversations of device %d", deviceID), func(t *txn) error {
		var err error
		// The rows after the one that brings the page's texts to
		// store.ExportPageText are left in the database (before: the
		// texts of the rows ahead of each), not sent to be dropped.
		out, err = conversationsOf(t, store.ExportPageText, `SELECT p.phone, p.messages, m.rec FROM (SELECT l.phone, l.messages, l.last_id,
			coalesce(sum(l.text) OVER (ORDER BY l.phone ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
			FROM (SELECT c.phone, c.messages, c.last_id, octet_length(m.rec->>'text') AS text FROM conversations c JOIN messages m ON m.id = c.last_id
			WHERE c.company_id = $1 AND c.device_id = $2 AND c.phone > $3 ORDER BY c.phone LIMIT $4) l) p
			JOIN messages m ON m.id = p.last_id WHERE p.before < $5 ORDER BY p.phone`,
			id(companyID), id(deviceID), after, limit, store.ExportPageText)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LastMessageID is the highest id a stored message has, of any company (0
// in a store without messages): a company's export walks its messages up
// to it, the store as it was when the export began. A message whose
// transaction commits after this read with a lower id is still taken.
func (s *Store) LastMessageID() (uint64, error) {
	var last int64
	err := s.read("last message id", func(t *txn) error {
		return t.row("SELECT coalesce(max(id), 0) FROM messages").Scan(&last)
	})
	return uint64(last), err
}

// companyMessagesAfterSQL is CompanyMessagesAfter's statement: the company
// as a range of one value and the rows in (company_id, id) order, as in
// inboundListSQL, so that the page is read from messages_company. Asked for
// company_id = $1 in id order, the planner could take the primary key from
// the id after instead, which for the export's last page of a company whose
// messages are older than the others' read every message stored since
// (TestCompanyExportReadsOneCompany).
const companyMessagesAfterSQL = `SELECT rec FROM (SELECT l.id, l.rec, coalesce(sum(octet_length(l.rec->>'text')) OVER
		(ORDER BY l.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
	FROM (SELECT id, rec FROM messages WHERE company_id >= $1 AND company_id <= $1 AND id > $2
		ORDER BY company_id, id LIMIT $3) l) p WHERE p.before < $4 ORDER BY p.id`

// CompanyMessagesAfter returns up to limit messages of the company with ids
// above after, oldest first, up to the one whose text brings the page's to
// store.ExportPageText. next is the id to continue after, and done says
// the company has no more messages.
func (s *Store) CompanyMessagesAfter(companyID, after uint64, limit int) (msgs []store.Message, next uint64, done bool, err error) {
	err = s.read(fmt.Sprintf("messages of company %d", companyID), func(t *txn) error {
		var err error
		// A page ends with the message that brings its texts to
		// store.ExportPageText; the rows after it stay in the database.
		msgs, err = getRecs[store.Message](t, companyMessagesAfterSQL, id(companyID), id(after), limit, store.ExportPageText)
		return err
	})
	if err != nil {
		return nil, after, false, err
	}
	next = after
	text := 0
	for _, m := range msgs {
		next, text = m.ID, text+len(m.Text)
	}
	return msgs, next, len(msgs) < limit && text < store.ExportPageText, nil
}
