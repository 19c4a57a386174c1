package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/simrelay/simrelay/store"
)

// waitingQueued is, of messages m, the SMS waiting in a device's queues
// for the phone (queued, not held), its priority jobs as well as its plain
// ones: what QueueDepth and DeviceSummaries count, one filter so the two
// never differ.
const waitingQueued = "m.queue_place IS NOT NULL AND m.channel NOT IN " + agentChannels

// DeviceSummaries is QueueDepth and DeviceFailures of many devices of the
// company in one statement, for a list of devices (GET /device/list, the
// console's devices page): a page of N devices was 2N short transactions.
// Each device is a lateral pair of index scans (messages_queue, stopped at
// store.MaxQueueDepth; device_failures' primary key, its newest
// store.MaxDeviceFailures), as the single-device reads make. A device with
// nothing waiting and no failures is absent, and so is an id that is not
// the company's: absent reads as the zero summary.
func (s *Store) DeviceSummaries(companyID uint64, deviceIDs []uint64) (map[uint64]store.DeviceSummary, error) {
	out := make(map[uint64]store.DeviceSummary)
	if len(deviceIDs) == 0 {
		return out, nil
	}
	ids := make([]int64, len(deviceIDs))
	for i, d := range deviceIDs {
		ids[i] = id(d)
	}
	err := s.read(fmt.Sprintf("summaries of %d devices of company %d", len(deviceIDs), companyID), func(t *txn) error {
		clear(out) // a retried read starts over
		return readSummaries(t, companyID, ids, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readSummaries reads into out, in t, the summaries of the company's
// devices of ids, as DeviceSummaries answers them.
func readSummaries(t *txn, companyID uint64, ids []int64, out map[uint64]store.DeviceSummary) error {
	rows, err := t.query(`SELECT d.id, q.n, f.recs FROM (SELECT DISTINCT unnest($2::bigint[]) AS id) d
			CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM messages m
				WHERE m.company_id = $1 AND m.device_id = d.id AND `+waitingQueued+` LIMIT $3) waiting) q
			CROSS JOIN LATERAL (SELECT jsonb_agg(newest.rec ORDER BY newest.seq DESC) AS recs FROM (SELECT rec, seq FROM device_failures
				WHERE device_id = d.id AND company_id = $1 ORDER BY seq DESC LIMIT $4) newest) f
			WHERE q.n > 0 OR f.recs IS NOT NULL`, id(companyID), ids, store.MaxQueueDepth, store.MaxDeviceFailures)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var devID int64
		var sum store.DeviceSummary
		var recs []byte
		if err := rows.Scan(&devID, &sum.QueueDepth, &recs); err != nil {
			return err
		}
		if recs != nil {
			if err := json.Unmarshal(recs, &sum.Failures); err != nil {
				return fmt.Errorf("failures of device %d: %w", devID, err)
			}
		}
		out[uint64(devID)] = sum
	}
	return rows.Err()
}
