package postgres

// A job's place in its device's queue: one send's, or those of a
// request's messages in one statement.

import (
	"fmt"

	"github.com/simrelay/simrelay/store"
)

// queueAllIn gives the messages of one request that are about to wait in
// their devices' queues (queued, not held) their devices' next places,
// behind every place handed out, taken in one statement (takePlaces).
func queueAllIn(t *txn, ms []store.Message) error {
	var waiting []int
	var devs []int64
	for i, m := range ms {
		if m.Status == store.MsgQueued && !m.Held() {
			waiting = append(waiting, i)
			devs = append(devs, id(m.DeviceID))
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	places, err := takePlaces(t, devs)
	if err != nil {
		return err
	}
	for k, i := range waiting {
		ms[i].QueueSeq = places[k]
	}
	return nil
}

// takePlaces gives jobs the next places in their devices' queues (devs[i]
// the device of job i), under the device rows' locks (held until the
// transaction ends): the places of one device rise in commit order, so a
// link that read up to a place never misses a job that commits after its
// read. See messages.queue_place. Places come from one sequence
// (queue_places), drawn once the locks are held, so none is shared and
// MessageSequence is above every place handed out, on every device.
//
// One statement for all the jobs, their devices locked already (route,
// r.next, a failover's pickers): it draws one place per job from
// queue_places, hands them out rising in input order, so the jobs of one
// device queue in the order they came, and moves each device's next_place
// to its last. The UPDATE
// takes no lock the transaction does not hold (the devices were locked
// FOR UPDATE), so it adds nothing to the lock order. A device gone is
// store.ErrDeviceGone.
func takePlaces(t *txn, devs []int64) ([]uint64, error) {
	rows, err := t.query(`WITH drawn AS (
			SELECT p.place, row_number() OVER (ORDER BY p.place) AS ord
			FROM (SELECT nextval('queue_places') AS place FROM generate_series(1, cardinality($1::bigint[]))) p
		), placed AS (
			SELECT j.ord, j.dev, drawn.place FROM unnest($1::bigint[]) WITH ORDINALITY AS j (dev, ord) JOIN drawn USING (ord)
		), moved AS (
			UPDATE devices d SET next_place = top.place
			FROM (SELECT dev, max(place) AS place FROM placed GROUP BY dev) top
			WHERE d.id = top.dev AND d.deleted_at IS NULL
			RETURNING d.id
		)
		SELECT placed.place, (SELECT count(*) FROM moved) = (SELECT count(DISTINCT dev) FROM placed)
		FROM placed ORDER BY placed.ord`, devs)
	if err != nil {
		return nil, fmt.Errorf("take %d queue places: %w", len(devs), err)
	}
	defer rows.Close()
	places := make([]uint64, 0, len(devs))
	live := true
	for rows.Next() {
		var place int64
		if err := rows.Scan(&place, &live); err != nil {
			return nil, fmt.Errorf("take %d queue places: %w", len(devs), err)
		}
		places = append(places, uint64(place))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take %d queue places: %w", len(devs), err)
	}
	if !live {
		return nil, store.ErrDeviceGone
	}
	if len(places) != len(devs) {
		return nil, fmt.Errorf("store: %d queue places taken for %d jobs", len(places), len(devs))
	}
	return places, nil
}
