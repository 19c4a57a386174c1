package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// Devices: a registration is a row of devices (0002_core.sql); deleting it
// sets deleted_at and clears its token, so its id names it in history and
// counters and no later registration gets it. What hangs off a
// registration (its failures, its SIMs' caps and counts, pool members) is
// keyed by the id. Unlike the embedded store, a delete also drops the
// registration's SIM caps and carrier-error streak, which nothing reads
// again once the id is dead.

// pairingViaAPIKey is true of a pairings row made with the API key
// (store.Pairing.ViaAPIKey) and false of one a user made: the field is
// absent when false (omitempty), and absent or false read alike. Both
// statements that end a maker's unused codes (a key's rotation, a user's
// removal or reset) test it this one way.
const pairingViaAPIKey = `COALESCE((rec->>'via_api_key')::boolean, false)`

// Pairing returns a pairing code's record.
func (s *Store) Pairing(hash []byte) (store.Pairing, error) {
	var p store.Pairing
	err := s.read("pairing", func(t *txn) error {
		return getRec(t, &p, "SELECT rec FROM pairings WHERE hash = $1", hash)
	})
	return p, err
}

// PrunePairings drops pairing codes that expired before cutoff, used or not.
func (s *Store) PrunePairings(cutoff time.Time) (int, error) {
	return s.pruneBatches("prune pairing codes", func(t *txn, limit int) (int, error) {
		return deleteSome(t, "pairings", "expires_at < $2", limit, cutoff)
	})
}

// Device returns the live device with this fingerprint, whichever company
// holds it; callers acting for a company use CompanyDevice.
func (s *Store) Device(fingerprint string) (store.Device, error) {
	var d store.Device
	err := s.read("device "+fingerprint, func(t *txn) error {
		return getRec(t, &d, "SELECT rec FROM devices WHERE fingerprint = $1 AND deleted_at IS NULL", fingerprint)
	})
	return d, err
}

// DeviceByTokenHash returns the live device whose current token has this
// hash. A device of a company closing (MarkCompanyClosing) is
// store.ErrNotFound, read in the statement that reads the device: its
// phone links no more from the mark on, though the removal's first step
// has not taken the token yet.
func (s *Store) DeviceByTokenHash(hash []byte) (store.Device, error) {
	var d store.Device
	err := s.read("device by token", func(t *txn) error {
		return getRec(t, &d, `SELECT d.rec FROM devices d JOIN companies c ON c.id = d.company_id
			WHERE d.token_hash = $1 AND d.deleted_at IS NULL AND NOT c.rec ? 'closing_at'`, hash)
	})
	return d, err
}

// CompanyDevices lists a company's live devices in fingerprint order (by
// bytes, as the embedded store orders them).
func (s *Store) CompanyDevices(companyID uint64) ([]store.Device, error) {
	var out []store.Device
	err := s.read(fmt.Sprintf("devices of company %d", companyID), func(t *txn) error {
		var err error
		out, err = getRecs[store.Device](t, `SELECT rec FROM devices WHERE company_id = $1 AND deleted_at IS NULL
			ORDER BY fingerprint COLLATE "C"`, id(companyID))
		return err
	})
	return out, err
}

// DevicesReportedOnline lists every live device, of every company, whose
// last reported presence is online: those whose link ended without an
// offline report, as when the server stopped while they were linked.
func (s *Store) DevicesReportedOnline() ([]store.Device, error) {
	var out []store.Device
	err := s.read("devices reported online", func(t *txn) error {
		var err error
		out, err = getRecs[store.Device](t, `SELECT rec FROM devices
			WHERE deleted_at IS NULL AND rec->'health'->>'presence' = $1 ORDER BY id`, store.PresenceOnline)
		return err
	})
	return out, err
}

// UpdateDevice applies fn to the company's device with this fingerprint and
// stores it; identity and token stay. Another company's device is ErrNotFound.
func (s *Store) UpdateDevice(companyID uint64, fingerprint string, fn func(*store.Device) error) (store.Device, error) {
	return s.updateDevice(fmt.Sprintf("update device %s of company %d", fingerprint, companyID), func(t *txn) (store.Device, error) {
		return goneNotFound(liveDevice(t, companyID, fingerprint, true))
	}, func(d *store.Device) ([]store.DeviceEvent, error) { return nil, fn(d) })
}

// UpdateDeviceByID applies fn to the company's device with this id, as a
// phone's link knows it: a link of a deleted device, whose fingerprint
// another registration may hold by now, finds ErrNotFound.
func (s *Store) UpdateDeviceByID(companyID, deviceID uint64, fn func(*store.Device) error) (store.Device, error) {
	return s.updateDevice(fmt.Sprintf("update device %d of company %d", deviceID, companyID), func(t *txn) (store.Device, error) {
		return goneNotFound(liveDeviceByID(t, companyID, deviceID, true))
	}, func(d *store.Device) ([]store.DeviceEvent, error) { return nil, fn(d) })
}

// goneNotFound answers a device gone as store.ErrNotFound: the word of
// UpdateDevice and UpdateDeviceByID, a request's 404.
func goneNotFound(d store.Device, err error) (store.Device, error) {
	if errors.Is(err, store.ErrDeviceGone) {
		return d, store.ErrNotFound
	}
	return d, err
}

// UpdateDeviceWith is UpdateDeviceByID whose fn also returns the events
// its change raises (device.online, ...): their webhook events
// (SetDeviceEvents) are written in the same transaction, so that the
// device's new state and what it raised are durable together or not at
// all. fn may run more than once; each run says afresh what it raises.
//
// It is the write of a link's hello: a record without NoNumbers is given
// it when the registration holds no WhatsApp number or iMessage handle
// (one statement more, on agent_numbers_held, after the device's row
// lock: a hello that gives it a number takes that lock first,
// AnnounceNumbers); one with it reads nothing more.
//
// It is store.ErrDeviceGone, and only then, when the device is not a live
// registration of the company (deleted, or an id of another company), or
// its company is not stored or is closing (MarkCompanyClosing), as
// DeviceCompany says it: a link whose token passed its upgrade before the
// mark stores no hello after it (nor a health report or a presence;
// DELETE /company closes the link as the device's deletion would), and its
// phone is told the device is gone on that word alone. The statement that
// locks the device's row reads the mark, its company's row
// taken KEY SHARE after the device's (companyOpen's lock, as a foreign
// key's check takes it): a mark committed while the write waited for
// either row is seen, and a mark waits for a write that read none.
func (s *Store) UpdateDeviceWith(companyID, deviceID uint64, fn func(d *store.Device) ([]store.DeviceEvent, error)) (store.Device, error) {
	return s.updateDevice(fmt.Sprintf("update device %d of company %d", deviceID, companyID), func(t *txn) (store.Device, error) {
		d, err := liveDeviceOfOpenCompany(t, companyID, deviceID)
		if err != nil || d.NoNumbers {
			return d, err
		}
		var holds bool
		if err := t.row("SELECT EXISTS (SELECT 1 FROM agent_numbers WHERE company_id = $1 AND device_id = $2)", id(companyID), id(deviceID)).Scan(&holds); err != nil {
			return d, err
		}
		d.NoNumbers = !holds
		return d, nil
	}, fn)
}

// liveDeviceOfOpenCompany is liveDeviceByID with the row lock, in the same
// statement as its company's closing mark (UpdateDeviceWith): a device of
// a company closing, or not stored, is store.ErrDeviceGone. The device's row is locked
// first (the WITH query's own lock; a query that locks rows is never
// folded into the statement around it), its company's KEY SHARE once the
// join found it, in the order a registration and a deletion take them.
func liveDeviceOfOpenCompany(t *txn, companyID, deviceID uint64) (store.Device, error) {
	var d store.Device
	var raw []byte
	var closing bool
	err := t.row(`WITH d AS (SELECT rec, company_id FROM devices WHERE company_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE)
		SELECT d.rec, c.rec ? 'closing_at' FROM d JOIN companies c ON c.id = d.company_id FOR KEY SHARE OF c`,
		id(companyID), id(deviceID)).Scan(&raw, &closing)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return d, store.ErrDeviceGone
	case err != nil:
		return d, mapErr(err)
	case closing:
		return d, fmt.Errorf("company %d is closing: %w", companyID, store.ErrDeviceGone)
	}
	return d, json.Unmarshal(raw, &d)
}

// updateDevice reads the device find locks, applies fn and stores the
// result with the device's identity as it was, with the events fn raised.
// find's error is the answer as it said it.
func (s *Store) updateDevice(name string, find func(*txn) (store.Device, error), fn func(*store.Device) ([]store.DeviceEvent, error)) (store.Device, error) {
	var d store.Device
	err := s.write(name, func(t *txn) error {
		var err error
		if d, err = find(t); err != nil {
			return err
		}
		before := d
		events, err := fn(&d)
		if err != nil {
			return err
		}
		d.ID, d.Fingerprint, d.CompanyID, d.TokenHash, d.CreatedAt = before.ID, before.Fingerprint, before.CompanyID, before.TokenHash, before.CreatedAt
		if err := putDevice(t, d); err != nil {
			return err
		}
		return s.writeDeviceEvents(t, d, events)
	})
	return d, err
}

// DeleteDevice removes the company's device with this fingerprint, revokes
// its token, fails its scheduled, queued and sending messages (error
// device_deleted; an agent's queued sends stay their number's), takes it out of its company's pools and clears the
// company's e-mail device when it is this one. Its history keeps its id,
// which no later registration of the fingerprint gets. Another company's
// device is ErrNotFound. Its SIMs' caps, counts and carrier-error streaks
// go with it.
//
// A device's unfinished messages are as many as were sent to it (a queue
// of millions behind a phone that went away), more than one transaction
// fails within the store's deadline: they are failed first, a batch of
// Store.deviceBatch a transaction (failDeviceBatch), while the device is
// live, and the last transaction fails what is left (those sent since)
// and deletes the device with everything else. The device is live until
// that transaction commits and gone (404) from then on; none is ever half
// deleted. A deletion that fails on the way (the database gone) leaves
// the device live with the messages its batches failed so (its last
// failures do not list them: failMessages), and the request, answered
// 503, is made again.
//
// Its SIMs' recipients (sim_recipients: a row for each recipient a SIM
// sent to on a day, kept while the SIM has a recipients cap, as many as
// the SIM's sends) are deleted a batch of Store.pruneBatch a transaction
// after that transaction, by the deleted device's id, which no send reads
// again: a deletion that fails before it commits leaves every recipient
// of the day known (a known recipient still gets its sends at the
// recipients cap, and is not counted twice), and the last transaction
// holds none of them. A batch that fails after the commit leaves the
// device deleted all the same (it is answered so): the rows left are of a
// device no send reads, and PruneSIMCounts deletes them once their day
// has passed.
func (s *Store) DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error) {
	name := fmt.Sprintf("delete device %s of company %d", fingerprint, companyID)
	for {
		n := 0
		err := s.write(name, func(t *txn) error {
			var err error
			n, err = s.failDeviceBatch(t, companyID, fingerprint, now)
			return err
		})
		if err != nil {
			return store.Device{}, err
		}
		if n < s.deviceBatch {
			break
		}
	}
	var d store.Device
	err := s.write(name, func(t *txn) error {
		// Its unfinished jobs and the pools it leaves are locked before the
		// device, each in id order, as every writer that takes them and
		// devices takes them (doc.go: lock order): taken after, a release
		// of the device's due jobs holding them would wait for the device
		// while this waits for them, and so would an edit of one of its
		// pools behind a send through it. failDeviceMessages and
		// leavePools take them again under the device's lock, with any a
		// send queued or an edit added in between. One round trip.
		b := &pgx.Batch{}
		b.Queue(`SELECT m.id FROM messages m JOIN devices d ON d.id = m.device_id
			WHERE d.company_id = $1 AND d.fingerprint = $2 AND d.deleted_at IS NULL
				AND m.company_id = $1 AND m.status IN ('scheduled', 'queued', 'sending')
				AND NOT (m.status = 'queued' AND m.number_id IS NOT NULL)
			ORDER BY m.id FOR UPDATE OF m`, id(companyID), fingerprint)
		b.Queue(`SELECT p.id FROM pools p JOIN devices d ON p.rec->'members' @> jsonb_build_array(jsonb_build_object('device_id', d.id))
			WHERE d.company_id = $1 AND d.fingerprint = $2 AND d.deleted_at IS NULL AND p.company_id = $1
			ORDER BY p.id FOR NO KEY UPDATE OF p`, id(companyID), fingerprint)
		if err := t.sendBatch(b); err != nil {
			return fmt.Errorf("lock the jobs and pools of device %s: %w", fingerprint, err)
		}
		var err error
		if d, err = liveDevice(t, companyID, fingerprint, true); err != nil {
			if errors.Is(err, store.ErrDeviceGone) {
				return store.ErrNotFound
			}
			return err
		}
		if _, err := t.exec("UPDATE devices SET deleted_at = $2, token_hash = NULL WHERE id = $1", id(d.ID), now); err != nil {
			return err
		}
		// The e-mail device (docs/email.md) names no deleted device, nor
		// one registered later with the same fingerprint. The company's
		// row is locked after the device, as a registration takes them,
		// and before the counters and the activity feed, as a
		// registration, an API key's rotation and an invitation take it:
		// an UpdateCompany that read this device live before this commits
		// and set it holds the row until its own commit, and the setting
		// is read again after that wait. FOR NO KEY UPDATE keeps no send
		// of the company waiting, as lockCompany's would (their rows'
		// foreign keys share the row).
		var emailDevice *string
		if err := t.row("SELECT rec->>'email_device' FROM companies WHERE id = $1 FOR NO KEY UPDATE", id(d.CompanyID)).Scan(&emailDevice); err != nil {
			return err
		}
		if emailDevice != nil && *emailDevice == d.Fingerprint {
			if _, err := t.exec("UPDATE companies SET rec = rec - 'email_device' WHERE id = $1", id(d.CompanyID)); err != nil {
				return err
			}
		}
		for _, q := range []string{
			"DELETE FROM sim_caps WHERE device_id = $1",
			"DELETE FROM sim_usage WHERE device_id = $1",
			"DELETE FROM sim_streaks WHERE device_id = $1",
		} {
			if _, err := t.exec(q, id(d.ID)); err != nil {
				return err
			}
		}
		// Its jobs' counts, the deletion's activity line and the jobs'
		// status events are written together, in the order a batch of
		// reports writes them (the daily counts, then the feed, then the
		// outbox; the storage use at the commit), so that the deletion
		// and a batch never wait on each other in a circle over those
		// rows; its last failures after the feed, as a batch notes a
		// failure after its line.
		deleted := activityRow{d.CompanyID, store.Activity{Type: store.ActDeviceDeleted, At: now.UTC(),
			Description: "Device " + store.ActivityName(store.DeviceLabel(d)) + " deleted; its unfinished SMS failed"}}
		if err := s.failDeviceMessages(t, d, now, &deleted); err != nil {
			return err
		}
		if _, err := t.exec("DELETE FROM device_failures WHERE device_id = $1", id(d.ID)); err != nil {
			return err
		}
		return leavePools(t, d.CompanyID, d.ID, now)
	})
	if err != nil {
		return store.Device{}, err
	}
	s.deleteSIMRecipients(name, d.ID)
	return d, nil
}

// deleteSIMRecipients deletes the SIMs' recipients of the deleted device
// with this id, a batch of Store.pruneBatch a transaction, until a batch
// finds fewer than it may delete or one fails: no send writes them any
// more, and the rows a failure leaves are PruneSIMCounts'.
func (s *Store) deleteSIMRecipients(name string, deviceID uint64) {
	for {
		found := 0
		err := s.write(name, func(t *txn) error {
			return t.row(`WITH c AS MATERIALIZED (SELECT ctid FROM sim_recipients WHERE device_id = $2 LIMIT $1),
				d AS (DELETE FROM sim_recipients WHERE ctid = ANY (ARRAY (SELECT ctid FROM c)) RETURNING 1)
				SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM d)`,
				s.pruneBatch, id(deviceID)).Scan(&found, new(int))
		})
		if err != nil || found < s.pruneBatch {
			return
		}
	}
}

// failDeviceBatch fails up to Store.deviceBatch of the unfinished
// messages of the company's live device with this fingerprint, as
// failDeviceMessages does, ahead of its deletion (DeleteDevice), and says
// how many. It locks the messages only, in id order, as the deletion
// does first: the device's row is not taken, so sends and reports go on
// between the batches. An unknown device, or another company's, or one
// deleted already, is ErrNotFound.
func (s *Store) failDeviceBatch(t *txn, companyID uint64, fingerprint string, now time.Time) (int, error) {
	var d store.Device
	if err := t.row("SELECT id, company_id FROM devices WHERE company_id = $1 AND fingerprint = $2 AND deleted_at IS NULL",
		id(companyID), fingerprint).Scan(&d.ID, &d.CompanyID); err != nil {
		return 0, mapErr(err)
	}
	msgs, err := getRecs[store.Message](t, `SELECT rec FROM messages
		WHERE company_id = $1 AND device_id = $2 AND status IN ('scheduled', 'queued', 'sending')
			AND NOT (status = 'queued' AND number_id IS NOT NULL) ORDER BY id LIMIT $3 FOR UPDATE`,
		id(d.CompanyID), id(d.ID), s.deviceBatch)
	if err != nil {
		return 0, err
	}
	return len(msgs), s.failMessages(t, msgs, now, nil)
}

// failDeviceMessages fails the deleted device's messages that have not
// gone out (scheduled, queued, held or sending), counting each and writing
// its status event. A WhatsApp or iMessage send still queued is its
// number's, not the agent's: it waits for the next agent that announces
// the number (docs/api.md); only those the agent had acked fail.
func (s *Store) failDeviceMessages(t *txn, d store.Device, now time.Time, line *activityRow) error {
	// The statuses are written out, as messages_unfinished (0010) lists
	// them, so that the planner reads that index, not the device's history.
	msgs, err := getRecs[store.Message](t, `SELECT rec FROM messages
		WHERE company_id = $1 AND device_id = $2 AND status IN ('scheduled', 'queued', 'sending')
			AND NOT (status = 'queued' AND number_id IS NOT NULL) ORDER BY id FOR UPDATE`,
		id(d.CompanyID), id(d.ID))
	if err != nil {
		return err
	}
	return s.failMessages(t, msgs, now, line)
}

// failMessages fails msgs, locked, with device_deleted, each counted and
// with its status event, in a few round trips whatever their number (one
// reads the companies' webhook sets and outboxes when status events are
// made, one writes everything, a statement a table: reportPlan.write), as
// a sweep moves its messages. Counted, with no activity line each: the
// deletion's line says it. No failure is noted in the device's last
// failures: the deletion drops them, and a deletion that fails on the way
// leaves the live device's list as its own sends left it, as the embedded
// store's one transaction does.
//
// With line, the deletion's activity line is written with them, and the
// plan's writes are not the transaction's last (its charges are written
// at the commit); without, the batch of failDeviceBatch ends with them.
func (s *Store) failMessages(t *txn, msgs []store.Message, now time.Time, line *activityRow) error {
	p := newReportPlan(s.statusEvents)
	if line != nil {
		p.activity = append(p.activity, *line)
	}
	if len(msgs) > 0 {
		f, err := s.readEventFacts(t, msgs)
		if err != nil {
			return err
		}
		for i := range msgs {
			m := msgs[i]
			from := m.Status
			m.Status, m.Error, m.UpdatedAt = store.MsgFailed, "device_deleted", now.UTC()
			ev, err := p.statusEvent(&f.reportFacts, m, now)
			if err != nil {
				return err
			}
			p.addCounts(m, from, now)
			p.addEvent(&f.reportFacts, ev)
			p.setMessage(&msgs[i], m)
		}
	} else if line == nil {
		return nil
	}
	return p.write(t, line == nil)
}

// noteFailure records m, which has just become failed or expired, as its
// device's newest failure, in the transaction of the change; the device
// keeps its newest store.MaxDeviceFailures. Every status change of an
// outbound message calls it.
func noteFailure(t *txn, m store.Message, now time.Time) error {
	if m.Direction != store.Outbound || m.DeviceID == 0 || (m.Status != store.MsgFailed && m.Status != store.MsgExpired) {
		return nil
	}
	at := m.UpdatedAt
	if at.IsZero() {
		at = now
	}
	raw, err := rec(store.DeviceFailure{At: at.UTC(), Status: m.Status, Error: m.Error, QueueID: m.UUID, Channel: m.Channel})
	if err != nil {
		return err
	}
	if _, err := t.exec("INSERT INTO device_failures (device_id, company_id, rec) VALUES ($1, $2, $3)", id(m.DeviceID), id(m.CompanyID), raw); err != nil {
		return err
	}
	_, err = t.exec(`DELETE FROM device_failures WHERE device_id = $1 AND seq < (
		SELECT min(seq) FROM (SELECT seq FROM device_failures WHERE device_id = $1 ORDER BY seq DESC LIMIT $2) newest)`,
		id(m.DeviceID), store.MaxDeviceFailures)
	return err
}

// DeviceFailures returns the device's last failed or expired sends,
// newest first.
func (s *Store) DeviceFailures(companyID, deviceID uint64) ([]store.DeviceFailure, error) {
	var out []store.DeviceFailure
	err := s.read(fmt.Sprintf("failures of device %d of company %d", deviceID, companyID), func(t *txn) error {
		var err error
		out, err = getRecs[store.DeviceFailure](t, `SELECT rec FROM device_failures WHERE device_id = $1 AND company_id = $2
			ORDER BY seq DESC LIMIT $3`, id(deviceID), id(companyID), store.MaxDeviceFailures)
		return err
	})
	return out, err
}

// insertDevice stores a new device, giving it its id; a fingerprint that
// lives already is store.ErrConflict. A new id holds no number
// (NoNumbers).
func insertDevice(t *txn, d *store.Device) error {
	var err error
	if d.ID, err = nextID(t, "devices"); err != nil {
		return err
	}
	d.NoNumbers = true
	raw, err := rec(*d)
	if err != nil {
		return err
	}
	_, err = t.exec("INSERT INTO devices (id, company_id, fingerprint, token_hash, rec) VALUES ($1, $2, $3, $4, $5)",
		id(d.ID), id(d.CompanyID), d.Fingerprint, d.TokenHash, raw)
	return mapErr(err)
}

// ProvisionDevices stores many new devices in one transaction, for fleets
// set up ahead of time (and the load harness), giving each its id. Each
// carries its token hash; a fingerprint that lives already is ErrConflict
// and nothing is stored.
func (s *Store) ProvisionDevices(devs []store.Device) error {
	return s.write("provision devices", func(t *txn) error {
		for _, d := range devs {
			err := insertDevice(t, &d)
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("%w: device %s exists", err, d.Fingerprint)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}
