package postgres

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// The gateway's reads of device_links (cluster.Gateway): where a device is
// linked, answered by device id: a device deleted and the device paired
// again under its fingerprint are two devices, and the link of one says
// nothing of the other.

// LinkedSince answers when the node holding the device's open link last
// beat, when the device (by id, not deleted) has an open link on a node
// live within live; ok is false otherwise.
func (s *Store) LinkedSince(deviceID uint64, live time.Duration) (seen time.Time, ok bool, err error) {
	err = s.read("linked device", func(t *txn) error {
		e := t.row(`SELECT n.seen_at FROM devices d
			JOIN device_links l ON l.device_id = d.id AND l.ended_at IS NULL
			JOIN cluster_nodes n ON n.name = l.node AND n.seen_at > now() - make_interval(secs => $2)
			WHERE d.id = $1 AND d.deleted_at IS NULL`, int64(deviceID), live.Seconds()).Scan(&seen)
		if errors.Is(e, pgx.ErrNoRows) {
			return nil
		}
		ok = e == nil
		return e
	})
	return seen, ok, err
}

// LinkedSinceMany is LinkedSince of many devices in one statement, for a
// list of devices (GET /device/list, the console's devices page): it
// answers, of each device (by id) with an open link on a node live within
// live, when that node last beat; the others are absent.
func (s *Store) LinkedSinceMany(deviceIDs []uint64, live time.Duration) (map[uint64]time.Time, error) {
	out := make(map[uint64]time.Time)
	if len(deviceIDs) == 0 {
		return out, nil
	}
	ids := make([]int64, len(deviceIDs))
	for i, id := range deviceIDs {
		ids[i] = int64(id)
	}
	err := s.read("linked devices", func(t *txn) error {
		clear(out) // a retried read starts over
		rows, err := t.query(`SELECT d.id, n.seen_at FROM devices d
			JOIN device_links l ON l.device_id = d.id AND l.ended_at IS NULL
			JOIN cluster_nodes n ON n.name = l.node AND n.seen_at > now() - make_interval(secs => $2)
			WHERE d.id = ANY($1) AND d.deleted_at IS NULL`, ids, live.Seconds())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var seen time.Time
			if err := rows.Scan(&id, &seen); err != nil {
				return err
			}
			out[uint64(id)] = seen
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EndOrphanLinks ends the open links held by nodes not live within live
// (they died without closing them), names node (the sweeping one) as the
// holder of their last link, and answers the devices they were of, at most
// limit. Of nodes sweeping at once, one ends each link and hears of it
// (the links are ended by one conditional statement). Each device is stored as last seen at its
// dead node's last beat (the link was live then, and a read through
// another node showed that time), unless it was stored as seen later: the
// node died before it could store the link's end, and the hello's time,
// days before for a phone linked for days, would otherwise stand in the
// lists and in the device's offline event and mail. The devices are locked
// first, in id order, as a company's removal takes them before their links
// (doc.go: lock order); a link held meanwhile is passed over, as before.
func (s *Store) EndOrphanLinks(live time.Duration, limit int, node string) ([]store.Device, error) {
	var out []store.Device
	err := s.write("end orphan links", func(t *txn) error {
		out = nil // a retried write starts over
		var devs []int64
		rows, err := t.query(`SELECT l.device_id FROM device_links l LEFT JOIN cluster_nodes n ON n.name = l.node
			WHERE l.ended_at IS NULL AND (n.name IS NULL OR n.seen_at <= now() - make_interval(secs => $1))
			ORDER BY l.device_id LIMIT $2`, live.Seconds(), limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			devs = append(devs, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(devs) == 0 {
			return err
		}
		if _, err := t.exec(`SELECT id FROM devices WHERE id = ANY($1) ORDER BY id FOR UPDATE`, devs); err != nil {
			return err
		}
		out, err = getRecs[store.Device](t, `WITH orphan AS (
				SELECT l.device_id, n.seen_at FROM device_links l LEFT JOIN cluster_nodes n ON n.name = l.node
				WHERE l.device_id = ANY($4) AND l.ended_at IS NULL
				AND (n.name IS NULL OR n.seen_at <= now() - make_interval(secs => $1))
				ORDER BY l.device_id LIMIT $2 FOR UPDATE OF l SKIP LOCKED),
			ended AS (
				UPDATE device_links l SET ended_at = now(), node = $3 FROM orphan o
				WHERE l.device_id = o.device_id AND l.ended_at IS NULL
				RETURNING l.device_id, o.seen_at),
			seen AS (
				UPDATE devices d SET rec = jsonb_set(d.rec, '{last_seen_at}',
					to_jsonb(to_char(e.seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
				FROM ended e WHERE d.id = e.device_id AND d.deleted_at IS NULL AND e.seen_at IS NOT NULL
				AND (d.rec->>'last_seen_at' IS NULL OR (d.rec->>'last_seen_at')::timestamptz < e.seen_at)
				RETURNING d.id, d.rec)
			SELECT COALESCE(s.rec, d.rec) FROM devices d JOIN ended e ON e.device_id = d.id LEFT JOIN seen s ON s.id = d.id
			WHERE d.deleted_at IS NULL ORDER BY d.id`, live.Seconds(), limit, node, devs)
		return err
	})
	return out, err
}

// LeftOnline answers the devices (not deleted) still reported online whose
// last link ended on a node not live within live, at most limit, in id
// order. The node where a link ended holds the offline check of its end in
// its memory, for the grace (device.Presence): a node that died (or
// stopped) before the check ran took it along, and the device would read
// online in its record, with no device.offline and no mail, until it
// linked again. Another node's sweep asks for these, and checks them
// again. A link still open on a dead node is EndOrphanLinks's.
func (s *Store) LeftOnline(live time.Duration, limit int) ([]store.Device, error) {
	var out []store.Device
	err := s.read("devices left online", func(t *txn) error {
		var err error
		out, err = getRecs[store.Device](t, `SELECT d.rec FROM device_links l JOIN devices d ON d.id = l.device_id
			WHERE l.ended_at IS NOT NULL AND d.deleted_at IS NULL AND d.rec->'health'->>'presence' = $3
			AND NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.name = l.node AND n.seen_at > now() - make_interval(secs => $1))
			ORDER BY l.device_id LIMIT $2`, live.Seconds(), limit, store.PresenceOnline)
		return err
	})
	return out, err
}

// HoldLink runs fn while the device's row of device_links is locked: a
// link of the device registering on any node meanwhile (ClaimLink) waits
// until fn returns. fn hears which node holds or last held the device's
// link ("" when it never had one in the cluster), the epoch of that link
// (each link of the device has its own: ClaimLink), whether it is still
// open, whether that node is live (a beat within live), and how long
// ago, by the database's clock, the link ended (0 while open). fn does its
// own writes, in their own transactions.
func (s *Store) HoldLink(deviceID uint64, live time.Duration, fn func(node string, epoch uint64, open, nodeLive bool, endedAgo time.Duration) error) error {
	return s.write("hold link", func(t *txn) error {
		// A device never linked has no row to lock: insert an ended one of
		// epoch 0 (the first claim makes it 1), so a claim waits on it too.
		if _, err := t.exec(`INSERT INTO device_links (device_id, epoch, node, linked_at, ended_at)
			VALUES ($1, 0, '', now(), now()) ON CONFLICT (device_id) DO NOTHING`, int64(deviceID)); err != nil {
			return err
		}
		var node string
		var epoch int64
		var open, nodeLive bool
		var endedSecs float64
		if err := t.row(`SELECT l.node, l.epoch, l.ended_at IS NULL, EXISTS (SELECT 1 FROM cluster_nodes n
				WHERE n.name = l.node AND n.seen_at > now() - make_interval(secs => $2)),
				COALESCE(EXTRACT(EPOCH FROM now() - l.ended_at), 0)::float8
			FROM device_links l WHERE l.device_id = $1 FOR UPDATE OF l`, int64(deviceID), live.Seconds()).Scan(&node, &epoch, &open, &nodeLive, &endedSecs); err != nil {
			return err
		}
		return fn(node, uint64(epoch), open, nodeLive, time.Duration(max(endedSecs, 0)*float64(time.Second)))
	})
}

// ReopenLinks records as open again, on node, the links given (device id
// to epoch) that node holds but that the database has ended: another
// node's sweep ended them (EndOrphanLinks) while node was silent for the
// live window, a stall rather than a death (a process paused, a database
// that did not answer it alone). A link whose epoch is still the device's
// newest was claimed nowhere since, so it is the device's link. It answers
// the devices reopened. The caller checks that each link is still open
// where it runs, and ends those that closed meanwhile (EndLink): a link
// ended by its own node between the caller's list and this statement is
// reopened too.
func (s *Store) ReopenLinks(node string, links map[uint64]uint64) ([]uint64, error) {
	if len(links) == 0 {
		return nil, nil
	}
	ids, epochs := make([]int64, 0, len(links)), make([]int64, 0, len(links))
	for id, epoch := range links {
		ids, epochs = append(ids, int64(id)), append(epochs, int64(epoch))
	}
	var out []uint64
	err := s.write("reopen links", func(t *txn) error {
		out = out[:0]
		rows, err := t.query(`UPDATE device_links l SET ended_at = NULL, node = $3
			FROM unnest($1::bigint[], $2::bigint[]) AS u(device_id, epoch)
			WHERE l.device_id = u.device_id AND l.epoch = u.epoch AND l.ended_at IS NOT NULL
			RETURNING l.device_id`, ids, epochs, node)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out = append(out, uint64(id))
		}
		return rows.Err()
	})
	return out, err
}
