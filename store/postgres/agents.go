package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/simrelay/simrelay/store"
)

// WhatsApp numbers and iMessage handles ("agent numbers") and the messages
// that go through them (migrations/0009_billing_agents.sql).
//
// A number is a row of agent_numbers per company, channel and address;
// device_id is the registration whose hello announced it last (NULL: let
// go, held by nobody). The number's row is its guard: a send through it
// locks it before the governor's vet, so one number's sends are vetted one
// at a time, each seeing every send accepted before it (agent_sends), and
// take their message ids under the lock, so the ids of one number's sends
// rise in the order they commit. A number's queue is its messages still
// queued, read by id: a link that read up to an id never passes a send
// that commits later. A hello that adds a number to a company under a
// limit takes the company's row lock first, so agents announcing at once
// never take it past the limit.
//
// WhatsApp and iMessage messages are rows of messages with number_id set
// and queue_place NULL (they wait in their number's queue, not a device's).
// The send path's expiry finds them as it finds SMS (status and
// expires_at); the reports need agentHolds (a job acked by the number's new
// agent is its own) and noteTaken (when an agent last took one of the
// number's jobs, on the ack).
//
// Versus the embedded store: none in behaviour. An agent's inbound client
// id is unique per registration and channel through its own column
// (agent_client), as bbolt keys it apart from SMS's.

// AnnounceNumbers records that the device (a live registration of the
// company) can send from these addresses (already normalised) on channel: a
// new address gets a record, with its warm-up starting now; a known one
// moves to this device; one the device held and no longer announces is
// let go. It returns the records, in the order given. A new record beyond
// limit records of the company on the channel is ErrTooManyNumbers, and
// nothing is stored; limit 0 means no limit.
func (s *Store) AnnounceNumbers(companyID, deviceID uint64, channel string, addresses []string, now time.Time, limit int) ([]store.AgentNumber, error) {
	return s.AnnounceAgentNumbers(companyID, deviceID, []store.Announced{{Channel: channel, Addresses: addresses}}, now, limit)
}

// AnnounceAgentNumbers is AnnounceNumbers of every set, in one
// transaction: a hello's WhatsApp numbers and iMessage handles are stored
// together or not at all. A set past its channel's limit refuses the whole
// announcement with a *store.TooManyNumbersError naming the channel
// (ErrTooManyNumbers to errors.Is). It returns the records of all the
// sets, in the order given. A device deleted, or of a company closing
// (MarkCompanyClosing) or not stored, is store.ErrDeviceGone and nothing
// is stored: the company's mark is read in the write's transaction, its
// row taken KEY SHARE (a mark waits for an announcement that read the
// company open, and one that met the mark reads it closing), so an agent
// whose hello's device write came before the mark takes or lets go no
// number after it. Locks: the device's row, then the company's (KEY SHARE
// with its mark, after the savepoint; FOR UPDATE instead when limit is
// set and a set holds a number new to the company), then each set's
// numbers in the order of the sets (under a limit, after a savepoint,
// given up to lock the company first when one is new).
func (s *Store) AnnounceAgentNumbers(companyID, deviceID uint64, sets []store.Announced, now time.Time, limit int) ([]store.AgentNumber, error) {
	var out []store.AgentNumber
	now = now.UTC()
	channels := make([]string, len(sets))
	holds := false
	for i, set := range sets {
		channels[i] = set.Channel
		holds = holds || len(set.Addresses) > 0
	}
	err := s.write(fmt.Sprintf("announce %s numbers of device %d", strings.Join(channels, " and "), deviceID), func(t *txn) error {
		out = out[:0]
		// A hello that gives the device a number locks its row first (a
		// registration's order: the device, then its company), so that
		// the write of another hello of the device, which reads whether
		// it holds any under that lock, never stores NoNumbers over it.
		d, err := liveDeviceByID(t, companyID, deviceID, holds)
		if err != nil {
			return err
		}
		if holds && d.NoNumbers {
			d.NoNumbers = false
			if err := putDevice(t, d); err != nil {
				return err
			}
		}
		locked, err := lockAnnounced(t, d, sets, limit > 0)
		if err != nil {
			return err
		}
		fresh := false
		for i, set := range sets {
			fresh = fresh || hasNew(set.Addresses, locked[i])
		}
		if limit > 0 && fresh {
			// A new number counts the company's: its row lock makes the
			// count exact. It is taken before the numbers' rows of every
			// set, and nothing takes them the other way round, so the
			// numbers' locks go first (back to the savepoint) and are
			// taken again after it.
			if _, err := t.exec("ROLLBACK TO SAVEPOINT announce"); err != nil {
				return err
			}
			if err := lockCompany(t, companyID); err != nil {
				return err
			}
			if locked, err = lockAnnounced(t, d, sets, false); err != nil {
				return err
			}
		}
		for i, set := range sets {
			if out, err = announce(t, d, set.Channel, set.Addresses, locked[i], now, limit, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockAnnounced reads the numbers of each set (announcedRows) locked, in
// the order of the sets, one statement a set in one round trip; with
// savepoint, after a savepoint (announce) that a caller who finds a
// number new to the company (hasNew) rolls back to, letting the numbers
// go, to take the company's row lock before them. A hello of known
// numbers under a limit, the usual one, so reads each channel's numbers
// once, where it read them unlocked first to know whether to lock the
// company, and then locked. Before the numbers, in the same round trip,
// it reads the company's closing mark, the row taken KEY SHARE: a company
// closing or not stored is store.ErrDeviceGone. The mark is read after
// the savepoint, so that a caller that goes back to it to take the
// company FOR UPDATE holds no lock on the row while it waits: two
// announcements that each held KEY SHARE while waiting for FOR UPDATE
// would wait for each other (TestAnnouncementsOfNewNumbersTakeNoDeadlock).
func lockAnnounced(t *txn, d store.Device, sets []store.Announced, savepoint bool) ([][]store.AgentNumber, error) {
	b := &pgx.Batch{}
	if savepoint {
		b.Queue("SAVEPOINT announce")
	}
	open := false
	b.Queue("SELECT NOT rec ? 'closing_at' FROM companies WHERE id = $1 FOR KEY SHARE", id(d.CompanyID)).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&open); !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil // not stored: open stays false
	})
	locked := make([][]store.AgentNumber, len(sets))
	for i, set := range sets {
		b.Queue(announcedRows+" FOR UPDATE", id(d.CompanyID), set.Channel, set.Addresses, id(d.ID)).Query(func(rows pgx.Rows) error {
			var err error
			locked[i], err = scanRecs[store.AgentNumber](rows)
			return err
		})
	}
	if err := t.sendBatch(b); err != nil {
		return nil, err
	}
	if !open {
		return nil, fmt.Errorf("company %d is closing: %w", d.CompanyID, store.ErrDeviceGone)
	}
	return locked, nil
}

// hasNew says whether an address of addresses is none of the numbers
// known (read with announcedRows).
func hasNew(addresses []string, known []store.AgentNumber) bool {
	return slices.ContainsFunc(addresses, func(a string) bool {
		return !slices.ContainsFunc(known, func(n store.AgentNumber) bool { return n.Address == a })
	})
}

// announcedRows reads the numbers of a channel a hello names, and those
// the device holds: $1 company, $2 channel, $3 addresses, $4 device.
const announcedRows = `SELECT rec FROM agent_numbers WHERE company_id = $1 AND channel = $2 AND (address = ANY($3) OR device_id = $4) ORDER BY id`

// announce stores one channel's set of AnnounceAgentNumbers, appending
// its records to out, given its numbers read locked (lockAnnounced); the
// caller holds the company's row lock when the set holds a new number and
// limit is set.
func announce(t *txn, d store.Device, channel string, addresses []string, locked []store.AgentNumber, now time.Time, limit int, out []store.AgentNumber) ([]store.AgentNumber, error) {
	var err error
	byAddr := make(map[string]store.AgentNumber, len(locked))
	for _, n := range locked {
		byAddr[n.Address] = n
	}
	for _, addr := range addresses {
		n, ok := byAddr[addr]
		switch {
		case !ok:
			if n, err = newNumber(t, d, channel, addr, now, limit); err != nil {
				return out, err
			}
			byAddr[addr] = n
			out = append(out, n)
			continue
		case n.DeviceID == d.ID && n.Device == d.Fingerprint:
			out = append(out, n)
			continue // nothing changed: no write
		}
		n.DeviceID, n.Device, n.UpdatedAt = d.ID, d.Fingerprint, now
		if err := putNumber(t, n); err != nil {
			return out, err
		}
		byAddr[addr] = n
		out = append(out, n)
	}
	// Let go what the device held and did not announce now: held by
	// nobody until an agent announces it again.
	for _, n := range locked {
		if n.DeviceID != d.ID || slices.Contains(addresses, n.Address) {
			continue
		}
		n.DeviceID, n.UpdatedAt = 0, now // Device stays: the agent that held it last
		if err := putNumber(t, n); err != nil {
			return out, err
		}
	}
	return out, nil
}

// newNumber stores a new number of the device's company, held by the
// device, or refuses it with ErrTooManyNumbers when the company has limit
// of the channel (limit 0: no limit; the caller holds the company's row
// lock).
func newNumber(t *txn, d store.Device, channel, addr string, now time.Time, limit int) (store.AgentNumber, error) {
	companyID := d.CompanyID
	if limit > 0 {
		var have int
		if err := t.row("SELECT count(*) FROM agent_numbers WHERE company_id = $1 AND channel = $2", id(companyID), channel).Scan(&have); err != nil {
			return store.AgentNumber{}, err
		}
		if have >= limit {
			return store.AgentNumber{}, &store.TooManyNumbersError{Channel: channel}
		}
	}
	nid, err := nextID(t, "agent_numbers")
	if err != nil {
		return store.AgentNumber{}, err
	}
	pub, err := store.NewNumberPublicID(channel)
	if err != nil {
		return store.AgentNumber{}, err
	}
	n := store.AgentNumber{ID: nid, PublicID: pub, CompanyID: companyID, Channel: channel, Address: addr, FirstSeen: now,
		DeviceID: d.ID, Device: d.Fingerprint, Status: store.NumberActive, UpdatedAt: now}
	raw, err := rec(n)
	if err != nil {
		return n, err
	}
	_, err = t.exec("INSERT INTO agent_numbers (id, company_id, channel, address, public_id, device_id, rec) VALUES ($1, $2, $3, $4, $5, $6, $7)",
		id(nid), id(companyID), channel, addr, pub, id(d.ID), raw)
	if violates(err, "agent_numbers_company_id_channel_address_key") || violates(err, "agent_numbers_public_id_key") {
		// Another hello of the company stored the address since the read
		// (or, once in an age, drew the same public id): read again.
		return n, errAgain
	}
	return n, err
}

// putNumber writes a number's record and its holder.
func putNumber(t *txn, n store.AgentNumber) error {
	raw, err := rec(n)
	if err != nil {
		return err
	}
	var holder *int64
	if n.DeviceID != 0 {
		holder = new(id(n.DeviceID))
	}
	_, err = t.exec("UPDATE agent_numbers SET device_id = $2, rec = $3 WHERE id = $1", id(n.ID), holder, raw)
	return err
}

// AgentNumbers lists the company's numbers (or handles) of channel, by address.
func (s *Store) AgentNumbers(companyID uint64, channel string) ([]store.AgentNumber, error) {
	var out []store.AgentNumber
	err := s.read(fmt.Sprintf("%s numbers of company %d", channel, companyID), func(t *txn) error {
		var err error
		out, err = getRecs[store.AgentNumber](t, `SELECT rec FROM agent_numbers WHERE company_id = $1 AND channel = $2 ORDER BY address COLLATE "C"`, id(companyID), channel)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AgentNumbersSentSince lists the company's numbers of channel, as
// AgentNumbers does, and counts each one's accepted sends since since
// (sent[i] is list[i]'s), in one statement: what a list of the numbers
// shows, read once for all of them. Each count is a range of agent_sends'
// primary key, as AgentSendsSince's is.
func (s *Store) AgentNumbersSentSince(companyID uint64, channel string, since time.Time) (list []store.AgentNumber, sent []int, err error) {
	err = s.read(fmt.Sprintf("%s numbers of company %d with their sends", channel, companyID), func(t *txn) error {
		list, sent = nil, nil
		rows, err := t.query(`SELECT n.rec, (SELECT count(*) FROM agent_sends s
				WHERE s.company_id = n.company_id AND s.number_id = n.id AND s.sent_at >= $3)
			FROM agent_numbers n WHERE n.company_id = $1 AND n.channel = $2 ORDER BY n.address COLLATE "C"`,
			id(companyID), channel, since)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var raw []byte
			var count int64
			if err := rows.Scan(&raw, &count); err != nil {
				return err
			}
			var n store.AgentNumber
			if err := json.Unmarshal(raw, &n); err != nil {
				return err
			}
			list, sent = append(list, n), append(sent, int(count))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, err
	}
	return list, sent, nil
}

// AgentNumbersNew counts the addresses (already normalised; one named
// twice counts once) that are no number (or handle) of the company on
// channel yet, and, only when one is, the company's numbers of channel:
// what a hello's check of the company's bound reads. One statement
// (agentNumbersNew); have is 0 when fresh is.
func (s *Store) AgentNumbersNew(companyID uint64, channel string, addresses []string) (fresh, have int, err error) {
	err = s.read(fmt.Sprintf("new %s numbers of company %d", channel, companyID), func(t *txn) error {
		var err error
		fresh, have, err = agentNumbersNew(t, companyID, channel, addresses)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return fresh, have, nil
}

// agentNumbersNew is AgentNumbersNew's statement: the announced addresses
// looked up in the index of a company's numbers by channel and address,
// and the company's numbers of the channel counted in the same index only
// when one of the addresses is not there (the scalar subquery in the CASE
// runs only when its branch is taken), so a hello that announces the
// numbers its company has reads as many index entries as it names.
func agentNumbersNew(t *txn, companyID uint64, channel string, addresses []string) (fresh, have int, err error) {
	addrs := make([]string, 0, len(addresses))
	for _, a := range addresses {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return 0, 0, nil
	}
	var known, count int
	err = t.row(`SELECT k.known, CASE WHEN k.known < cardinality($3::text[])
			THEN (SELECT count(*) FROM agent_numbers WHERE company_id = $1 AND channel = $2) ELSE 0 END
		FROM (SELECT count(*) AS known FROM agent_numbers WHERE company_id = $1 AND channel = $2 AND address = ANY($3::text[])) k`,
		id(companyID), channel, addrs).Scan(&known, &count)
	if err != nil {
		return 0, 0, err
	}
	return len(addrs) - known, count, nil
}

// numberByPublicID finds the company's number of channel by its public id,
// lock taking its row lock; another company's id, or another channel's, is
// ErrNotFound.
func numberByPublicID(t *txn, companyID uint64, channel, publicID string, lock bool) (store.AgentNumber, error) {
	var n store.AgentNumber
	q := "SELECT rec FROM agent_numbers WHERE public_id = $1 AND company_id = $2 AND channel = $3"
	if lock {
		q += " FOR UPDATE"
	}
	return n, getRec(t, &n, q, publicID, id(companyID), channel)
}

// numberByRef finds the company's number by the store's id.
func numberByRef(t *txn, companyID, numberID uint64) (store.AgentNumber, error) {
	var n store.AgentNumber
	return n, getRec(t, &n, "SELECT rec FROM agent_numbers WHERE id = $1 AND company_id = $2", id(numberID), id(companyID))
}

// AgentNumber returns the company's number of channel with this public id.
func (s *Store) AgentNumber(companyID uint64, channel, publicID string) (store.AgentNumber, error) {
	var n store.AgentNumber
	err := s.read(fmt.Sprintf("%s number %s", channel, publicID), func(t *txn) error {
		var err error
		n, err = numberByPublicID(t, companyID, channel, publicID, false)
		return err
	})
	if err != nil {
		return n, err
	}
	return n, nil
}

// AgentNumberByRef returns the company's number by the store's id.
func (s *Store) AgentNumberByRef(companyID, numberID uint64) (store.AgentNumber, error) {
	var n store.AgentNumber
	err := s.read(fmt.Sprintf("number %d", numberID), func(t *txn) error {
		var err error
		n, err = numberByRef(t, companyID, numberID)
		return err
	})
	if err != nil {
		return n, err
	}
	return n, nil
}

// UpdateAgentNumber changes the company's number of channel through fn and stores it.
func (s *Store) UpdateAgentNumber(companyID uint64, channel, publicID string, now time.Time, fn func(*store.AgentNumber) error) (store.AgentNumber, error) {
	var out store.AgentNumber
	err := s.write(fmt.Sprintf("update %s number %s", channel, publicID), func(t *txn) error {
		n, err := numberByPublicID(t, companyID, channel, publicID, true)
		if err != nil {
			return err
		}
		n, changed, err := store.ChangeAgentNumber(n, now, fn)
		if err != nil {
			return err
		}
		out = n
		if !changed {
			return nil // updated_at included, as it was
		}
		return putNumber(t, n)
	})
	if err != nil {
		return out, err
	}
	return out, nil
}

// violates says whether err is a broken unique constraint of that name.
func violates(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}
