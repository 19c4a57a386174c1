package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Job states in the journal (PROTOCOL.md section 9.3 names the first three).
const (
	// StateTaken: journaled and acked, waiting for its turn.
	StateTaken = "taken"
	// StateDispatched: handed to the transport; no outcome journaled yet.
	// After a crash such a job is never handed over again (Recover).
	StateDispatched = "dispatched"
	// StateAwaiting: sent; the transport will report the delivery.
	StateAwaiting = "awaiting_delivery"
	// StateDone: the final outcome is journaled (its report may still be
	// waiting for status_ack in the report outbox).
	StateDone = "done"
)

var (
	bucketJobs       = []byte("jobs")        // job id -> jobRecord
	bucketQueue      = []byte("queue")       // seq -> job id, jobs in StateTaken, in arrival order
	bucketAwaiting   = []byte("awaiting")    // job id -> nil, jobs in StateAwaiting
	bucketReports    = []byte("reports")     // seq -> proto.Status, not yet status_acked
	bucketReportKeys = []byte("report_keys") // reportKey -> seq
	bucketInbound    = []byte("inbound")     // seq -> inboundRecord
	bucketInboundIDs = []byte("inbound_ids") // client_id -> seq, and the time it was cleared (inboundSeq)
	bucketMeta       = []byte("meta")        // marks and the install's salt
	bucketSettled    = []byte("settled")     // job id -> status of its last report: its outcome was journaled
	journalBuckets   = [][]byte{bucketJobs, bucketQueue, bucketAwaiting, bucketReports, bucketReportKeys, bucketInbound, bucketInboundIDs, bucketMeta, bucketSettled}
)

// Journal is the agent's durable memory, a bbolt file. Every method is one
// short transaction, committed (fsync) before it returns.
type Journal struct {
	db *bolt.DB
}

type jobRecord struct {
	Send         proto.Send `json:"send"`
	State        string     `json:"state"`
	Ref          string     `json:"ref,omitempty"`
	TakenAt      time.Time  `json:"taken_at"`
	DispatchedAt time.Time  `json:"dispatched_at,omitzero"`
	DoneAt       time.Time  `json:"done_at,omitzero"`
	// Final is the last outcome reported (sent for a job whose delivery
	// report never came) and Detail the last detail (detail.go): a later
	// read receipt needs both.
	Final  string `json:"final,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Reported: the server acknowledged a report of the job (status_ack),
	// so it holds the job settled and hands it to no agent again. A
	// WhatsApp or iMessage job without it is named in each hello's jobs
	// (HeldJobs).
	Reported bool `json:"reported,omitempty"`
}

// OpenJournal opens (or creates) the journal file. A second agent on the
// same file fails after timeout instead of sharing it.
func OpenJournal(path string, timeout time.Duration) (*Journal, error) {
	damaged := func(why error) error {
		return fmt.Errorf("journal %s is damaged (%v): move it aside to start with an empty one; the reports and received messages it held for the server are then lost, and jobs it took without reporting stay sending on the server", path, why)
	}
	if err := checkJournalFile(path); err != nil {
		return nil, damaged(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("journal %s is in use by another simrelay-agent", path)
		}
		if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrVersionMismatch) {
			return nil, damaged(err)
		}
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range journalBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		if errors.Is(err, bolterrors.ErrIncompatibleValue) { // a bucket's name holds a value
			return nil, damaged(err)
		}
		return nil, fmt.Errorf("journal %s: create buckets: %w", path, err)
	}
	return &Journal{db: db}, nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.db.Close() }

func seqKey(n uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, n)
	return k
}

func getJob(tx *bolt.Tx, id string) (jobRecord, bool, error) {
	var r jobRecord
	v := tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return r, false, nil
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, false, fmt.Errorf("journal: job %s: %w", id, err)
	}
	return r, true, nil
}

func putJob(tx *bolt.Tx, r jobRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketJobs).Put([]byte(r.Send.ID), v)
}

// Take journals a job from a send frame. It returns false when the id is
// already journaled: the send is a resend after a lost ack, to be acked
// again and never carried out twice.
func (j *Journal) Take(s proto.Send, now time.Time) (bool, error) {
	fresh := false
	err := j.db.Update(func(tx *bolt.Tx) error {
		_, ok, err := getJob(tx, s.ID)
		if err != nil || ok {
			return err
		}
		fresh = true
		q := tx.Bucket(bucketQueue)
		seq, err := q.NextSequence()
		if err != nil {
			return err
		}
		if err := q.Put(seqKey(seq), []byte(s.ID)); err != nil {
			return err
		}
		return putJob(tx, jobRecord{Send: s, State: StateTaken, TakenAt: now})
	})
	if err != nil {
		return false, fmt.Errorf("journal: take job %s: %w", s.ID, err)
	}
	return fresh, nil
}

// NextTaken returns the oldest job waiting for its turn.
func (j *Journal) NextTaken() (Job, bool, error) {
	var job Job
	found := false
	err := j.db.View(func(tx *bolt.Tx) error {
		_, id := tx.Bucket(bucketQueue).Cursor().First()
		if id == nil {
			return nil
		}
		r, ok, err := getJob(tx, string(id))
		if err != nil || !ok {
			return err
		}
		job, found = Job{Send: r.Send, Ref: r.Ref}, true
		return nil
	})
	return job, found, err
}

// Dispatch marks a job as handed to the transport, before the tool is
// called: from here on a crash can never make the agent send it again.
func (j *Journal) Dispatch(id string, now time.Time) error {
	return j.db.Update(func(tx *bolt.Tx) error {
		r, ok, err := getJob(tx, id)
		if err != nil || !ok {
			return err
		}
		r.State, r.DispatchedAt = StateDispatched, now
		q := tx.Bucket(bucketQueue)
		c := q.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if string(v) == id {
				if err := c.Delete(); err != nil {
					return err
				}
				break
			}
		}
		return putJob(tx, r)
	})
}

// Remember journals a transport's reference for a job.
func (j *Journal) Remember(id, ref string) error {
	return j.db.Update(func(tx *bolt.Tx) error {
		r, ok, err := getJob(tx, id)
		if err != nil || !ok {
			return err
		}
		r.Ref = ref
		return putJob(tx, r)
	})
}

// Finish journals a job's outcome and its report (to be sent until
// status_acked) in one commit. awaiting keeps the job for Delivery. A
// delivered report with a detail journals the plain delivered too.
//
// A job is settled once. The push of a receipt (Sink.Deliver) and the
// delivery poller both settle an awaiting job, each from its own list of
// awaiting jobs, so the second may come once the job is done: its outcome
// is then not journaled again (the report was, and may already be
// status_acked and gone, so a second one would go out as news the server
// has), except a newer detail, which is what AddDetail journals.
func (j *Journal) Finish(id string, report proto.Status, ref string, awaiting bool, now time.Time) error {
	return j.db.Update(func(tx *bolt.Tx) error {
		r, ok, err := getJob(tx, id)
		if err != nil {
			return err
		}
		if ok && r.State == StateDone {
			if report.Status != proto.StatusDelivered || report.Detail == "" || !detailNews(r, report.Detail) {
				return nil
			}
			if err := addDelivered(tx, &r, report); err != nil {
				return err
			}
			return putJob(tx, r)
		}
		if ok {
			if ref != "" {
				r.Ref = ref
			}
			aw := tx.Bucket(bucketAwaiting)
			if awaiting {
				r.State = StateAwaiting
				if err := aw.Put([]byte(id), nil); err != nil {
					return err
				}
			} else {
				if r.State == StateAwaiting && report.ID == "" {
					r.Final = proto.StatusSent // no delivery report came
				}
				r.State, r.DoneAt = StateDone, now
				if err := aw.Delete([]byte(id)); err != nil {
					return err
				}
			}
		}
		switch {
		case report.ID == "":
		case report.Detail != "" && report.Status == proto.StatusDelivered:
			if err := addDelivered(tx, &r, report); err != nil {
				return err
			}
		default:
			r.Final = report.Status
			if err := addReport(tx, report); err != nil {
				return err
			}
		}
		if !ok {
			return nil
		}
		return putJob(tx, r)
	})
}

// InState lists the jobs in a state (StateDispatched after a crash,
// StateAwaiting for the delivery poller).
func (j *Journal) InState(state string) ([]Job, error) {
	var out []Job
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(_, v []byte) error {
			var r jobRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.State == state {
				out = append(out, Job{Send: r.Send, Ref: r.Ref, DispatchedAt: r.DispatchedAt})
			}
			return nil
		})
	})
	return out, err
}

// JobState is a job's state, "" when it is not journaled.
func (j *Journal) JobState(id string) (string, error) {
	state := ""
	err := j.db.View(func(tx *bolt.Tx) error {
		r, ok, err := getJob(tx, id)
		if ok {
			state = r.State
		}
		return err
	})
	return state, err
}

// HeldJobs lists the ids of the journal's jobs that a hello names in its
// jobs (PROTOCOL.md section 16.1): every job not of SMS (WhatsApp,
// iMessage, and a record repaired without its channel) with no report of
// it acknowledged yet, whatever its state. The server may still count
// such a job as queued and handed to this agent (its ack lost), and
// releases to another agent every job handed here that the list does not
// name. ok is false, with no list, when there are more than max: the hello
// then says nothing, and the server keeps what it handed here.
func (j *Journal) HeldJobs(max int) (ids []string, ok bool, err error) {
	ids = []string{}
	err = j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var r heldView
			if err := json.Unmarshal(v, &r); err != nil {
				// Salvage repairs it at start; until then it may be any job.
				return fmt.Errorf("journal: job %q: %w", k, err)
			}
			if r.Send.Channel != proto.ChannelSMS && !r.Reported {
				if ids = append(ids, string(k)); len(ids) > max {
					return errTooManyHeld // the rest need not be read
				}
			}
			return nil
		})
	})
	if errors.Is(err, errTooManyHeld) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return ids, true, nil
}

// heldView is what HeldJobs decodes of a job record: its channel and
// whether a report of it was acknowledged, not the send's text and the
// rest, which a busy agent's journal of a day holds thousands of. A record
// that is not JSON is refused as before (json.Unmarshal checks the whole
// of it first).
type heldView struct {
	Send struct {
		Channel string `json:"channel"`
	} `json:"send"`
	Reported bool `json:"reported"`
}

// errTooManyHeld ends HeldJobs' scan at the first job past its max.
var errTooManyHeld = errors.New("journal: more held jobs than a hello names")

// Mark returns a value of the meta bucket.
func (j *Journal) Mark(key string) (string, error) {
	var v string
	err := j.db.View(func(tx *bolt.Tx) error {
		v = string(tx.Bucket(bucketMeta).Get([]byte(key)))
		return nil
	})
	return v, err
}

// SetMark stores a value in the meta bucket.
func (j *Journal) SetMark(key, value string) error {
	return j.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte(key), []byte(value))
	})
}

// DefaultJobRetention is how long a finished job stays in the journal after
// its expires_at: PROTOCOL.md section 9.3 asks for 24 hours, after which
// the server never sends that job again.
const DefaultJobRetention = 24 * time.Hour

// Prune forgets finished jobs whose final report was acknowledged and whose
// expires_at lies more than DefaultJobRetention in the past.
func (j *Journal) Prune(now time.Time) (int, error) {
	n := 0
	err := j.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketJobs).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r jobRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.State != StateDone {
				continue
			}
			exp, err := time.Parse(time.RFC3339Nano, r.Send.ExpiresAt)
			if err != nil || now.Before(exp.Add(DefaultJobRetention)) {
				continue
			}
			if pendingReports(tx, r.Send.ID) {
				continue
			}
			if err := tx.Bucket(bucketSettled).Delete(k); err != nil {
				return err
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
