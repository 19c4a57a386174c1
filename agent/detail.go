package agent

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Details of a delivered job (PROTOCOL.md 16.2): a WhatsApp read or
// played receipt is reported as delivered with a detail, a report of its
// own in the outbox, after the plain delivered.

// detailRank orders details so a repeated or late receipt reports nothing
// new: played implies read.
var detailRank = map[string]int{"": 0, proto.DetailRead: 1, proto.DetailPlayed: 2}

// reportKey names a report in the outbox and on the link: id and status,
// and the detail when there is one. A report without a detail keeps the
// key journals written before details existed use.
func reportKey(id, status, detail string) string {
	if detail == "" {
		return id + "\x00" + status
	}
	return id + "\x00" + status + "\x00" + detail
}

// addDelivered adds the reports of a delivery with a detail to r's job:
// the plain delivered unless it was reported, then the detail unless an
// equal or later one was. r is updated; the caller stores it.
func addDelivered(tx *bolt.Tx, r *jobRecord, st proto.Status) error {
	if r.Final != proto.StatusDelivered {
		plain := st
		plain.Detail = ""
		if err := addReport(tx, plain); err != nil {
			return err
		}
		r.Final = proto.StatusDelivered
	}
	if detailRank[st.Detail] <= detailRank[r.Detail] {
		return nil
	}
	r.Detail = st.Detail
	return addReport(tx, st)
}

// detailNews says whether a delivery with a detail is news for the
// settled job r: r was sent or delivered (not failed, nor finished before
// outcomes were journaled), and the detail is newer than the last one
// reported (any is, for a job left sent).
func detailNews(r jobRecord, detail string) bool {
	switch r.Final {
	case proto.StatusSent:
		return true
	case proto.StatusDelivered:
		return detailRank[detail] > detailRank[r.Detail]
	}
	return false
}

// AddDetail journals a detail (read, played) learned after the job whose
// transport reference is ref was settled: reported as delivered (and the
// plain delivered first when the job was left sent). A failed job, an
// unknown ref or a detail no newer than the last one reports nothing.
func (j *Journal) AddDetail(ref, detail, at string) (bool, error) {
	added := false
	err := j.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketJobs).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r jobRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("job %s: %w", k, err)
			}
			if r.Ref != ref || r.State != StateDone {
				continue
			}
			if !detailNews(r, detail) {
				return nil
			}
			if err := addDelivered(tx, &r, proto.Status{ID: r.Send.ID, Status: proto.StatusDelivered, Detail: detail, At: at}); err != nil {
				return err
			}
			added = true
			return putJob(tx, r)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("journal: detail of %s: %w", ref, err)
	}
	return added, nil
}

// pendingReports says whether a job has a report not yet status_acked.
func pendingReports(tx *bolt.Tx, id string) bool {
	prefix := []byte(id + "\x00")
	k, _ := tx.Bucket(bucketReportKeys).Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}
