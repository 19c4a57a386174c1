package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// errUnreadableJob is the report of a job whose journal record was lost:
// like a job dispatched before a crash (PROTOCOL.md 9.4), it may or may not
// have gone out, so it is never carried out and reported as unknown.
const errUnreadableJob = "outcome_unknown"

// Salvage makes a journal that a damaged disk (or a hand) has written
// into safe to run from, before anything reads it: every job record that
// does not decode, or does not match its key or any state, is replaced by
// a finished job reported failed with outcome_unknown (it may have been
// sent, so it is never sent again, and the server, which waits for every
// acked job's report, gets one; unless the journal shows its outcome
// elsewhere, outcomeJournaled, a report pending or acked long ago: then
// nothing more is reported; the record keeps no transport reference, so
// a delivery or read receipt that comes later finds no job and reports
// nothing, and a detail already reported is never reported again), or
// dropped when its id is not UTF-8 (no
// job of the server's has one); every queue and awaiting entry that names
// no job in its state is dropped, so that no broken entry holds back the
// jobs behind it or sends a finished job again. The whole records are
// kept as they are. Each thing dropped or replaced is one line of the
// answer, for the agent's log. Reports and received messages that do not
// decode are dropped as they are read (readOutbox).
func (j *Journal) Salvage(now time.Time) ([]string, error) {
	var notes []string
	err := j.db.Update(func(tx *bolt.Tx) error {
		notes = nil // Update runs the function once; a retry would start over
		jobs := tx.Bucket(bucketJobs)
		var damaged, strays [][]byte
		states := map[string]string{}
		var ids []string // in the journal's order
		err := jobs.ForEach(func(k, v []byte) error {
			ids = append(ids, string(k))
			var r jobRecord
			err := json.Unmarshal(v, &r)
			switch {
			case !utf8.Valid(k):
				// No job the server sends has such an id (a frame's JSON is
				// UTF-8), nor could a report name it: the record is no job.
				notes = append(notes, fmt.Sprintf("job %q: an id that is not UTF-8: record dropped", k))
				strays = append(strays, bytes.Clone(k))
				return nil
			case err != nil:
				notes = append(notes, fmt.Sprintf("job %q: record unreadable (%v): %s", k, err, replaced(tx, k)))
			case r.Send.ID != string(k):
				notes = append(notes, fmt.Sprintf("job %q: record names job %q: %s", k, r.Send.ID, replaced(tx, k)))
			case !knownState(r.State):
				notes = append(notes, fmt.Sprintf("job %q: unknown state %q: %s", k, r.State, replaced(tx, k)))
			default:
				states[string(k)] = r.State
				return nil
			}
			damaged = append(damaged, bytes.Clone(k))
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range strays {
			if err := jobs.Delete(k); err != nil {
				return err
			}
		}
		for _, k := range damaged {
			id := string(k)
			states[id] = StateDone
			at := now.UTC().Format(time.RFC3339Nano)
			// expires_at now: Prune forgets it a day after its report is acked.
			r := jobRecord{Send: proto.Send{ID: id, ExpiresAt: at}, State: StateDone, TakenAt: now, DoneAt: now, Final: proto.StatusFailed}
			outcome := outcomeJournaled(tx, k)
			if outcome {
				r.Final = proto.StatusSent
				if last := tx.Bucket(bucketSettled).Get(k); knownOutcome(string(last)) {
					r.Final = string(last)
				}
			}
			if err := putJob(tx, r); err != nil {
				return err
			}
			if outcome {
				continue // its own reports stand; its delivery watch goes below
			}
			if err := addReport(tx, proto.Status{ID: id, Status: proto.StatusFailed, Error: errUnreadableJob, At: stamp(now)}); err != nil {
				return err
			}
		}
		// One queue entry per job waiting: a second would hand it over twice.
		queued := map[string]bool{}
		q := tx.Bucket(bucketQueue)
		n, err := dropEntries(q, func(_, v []byte) bool {
			keep := states[string(v)] == StateTaken && !queued[string(v)]
			queued[string(v)] = true
			return keep
		})
		if err != nil {
			return err
		}
		if n > 0 {
			notes = append(notes, fmt.Sprintf("%d queue entries naming no job waiting to be sent dropped", n))
		}
		// A job waiting without its queue entry would never get its turn
		// nor a report: it goes to the end of the queue.
		for _, id := range ids {
			if states[id] != StateTaken || queued[id] {
				continue
			}
			seq, err := q.NextSequence()
			if err != nil {
				return err
			}
			if err := q.Put(seqKey(seq), []byte(id)); err != nil {
				return err
			}
			notes = append(notes, fmt.Sprintf("job %q: waiting without its queue entry: queued again", id))
		}
		n, err = dropEntries(tx.Bucket(bucketAwaiting), func(k, _ []byte) bool { return states[string(k)] == StateAwaiting })
		if err != nil {
			return err
		}
		if n > 0 {
			notes = append(notes, fmt.Sprintf("%d delivery watches naming no job awaiting its delivery dropped", n))
		}
		return nil
	})
	if err != nil {
		return notes, fmt.Errorf("journal: salvage: %w", err)
	}
	return notes, nil
}

// outcomeJournaled says whether the journal holds the outcome of the job
// with this id outside its record: a job awaiting its delivery went out
// (Finish journaled its sent report with the watch), a report waiting
// for its status_ack was journaled with the job's outcome, and a job
// noted settled had a report journaled, acked since or not (journals
// written before that note was kept show only the first two). A damaged
// record of such a job is not reported failed: the server would show a
// message that went out (or whose outcome it already holds) as failed,
// and invite a second send of it.
func outcomeJournaled(tx *bolt.Tx, id []byte) bool {
	return tx.Bucket(bucketAwaiting).Get(id) != nil || pendingReports(tx, string(id)) || tx.Bucket(bucketSettled).Get(id) != nil
}

// knownOutcome says whether s is an outcome a job's record can keep.
func knownOutcome(s string) bool {
	return s == proto.StatusSent || s == proto.StatusDelivered || s == proto.StatusFailed
}

// replaced says, for the log, what becomes of a damaged job record.
func replaced(tx *bolt.Tx, id []byte) string {
	if outcomeJournaled(tx, id) {
		return "its outcome was journaled (a delivery watch or a report): kept as done, not reported again, never sent again"
	}
	return fmt.Sprintf("reported failed (%s), never sent again", errUnreadableJob)
}

func knownState(s string) bool {
	return s == StateTaken || s == StateDispatched || s == StateAwaiting || s == StateDone
}

// dropEntries deletes the entries of b that keep refuses, and counts them.
func dropEntries(b *bolt.Bucket, keep func(k, v []byte) bool) (int, error) {
	var bad [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if !keep(k, v) {
			bad = append(bad, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range bad {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(bad), nil
}
