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
// acked job's report, gets one), or dropped when its id is not UTF-8 (no
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
				notes = append(notes, fmt.Sprintf("job %q: record unreadable (%v): reported failed (%s), never sent again", k, err, errUnreadableJob))
			case r.Send.ID != string(k):
				notes = append(notes, fmt.Sprintf("job %q: record names job %q: reported failed (%s), never sent again", k, r.Send.ID, errUnreadableJob))
			case !knownState(r.State):
				notes = append(notes, fmt.Sprintf("job %q: unknown state %q: reported failed (%s), never sent again", k, r.State, errUnreadableJob))
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
			if err := putJob(tx, r); err != nil {
				return err
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
