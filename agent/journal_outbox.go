package agent

// The journal's two outboxes: the reports waiting for status_ack, and the
// received messages waiting for the server's ack.

import (
	"encoding/binary"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// addReport puts a report in the outbox and, for a journaled job, notes
// in bucketSettled that its outcome was journaled: that note outlives the
// report's status_ack, so a job record damaged later is known as settled
// (Salvage) and not reported failed over the outcome the server holds.
func addReport(tx *bolt.Tx, st proto.Status) error {
	if tx.Bucket(bucketJobs).Get([]byte(st.ID)) != nil {
		if err := tx.Bucket(bucketSettled).Put([]byte(st.ID), []byte(st.Status)); err != nil {
			return err
		}
	}
	keys := tx.Bucket(bucketReportKeys)
	key := []byte(reportKey(st.ID, st.Status, st.Detail))
	if keys.Get(key) != nil {
		return nil
	}
	b := tx.Bucket(bucketReports)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	v, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := b.Put(seqKey(seq), v); err != nil {
		return err
	}
	return keys.Put(key, seqKey(seq))
}

// Reports lists the reports not yet status_acked, oldest first. An
// unreadable record is deleted and named in the error; the list holds the
// readable ones all the same (readOutbox).
func (j *Journal) Reports() ([]proto.Status, error) {
	out, _, err := j.reports()
	return out, err
}

// reports is Reports with each report's seq: a report journaled again
// under the key of one status_acked before is a record of its own.
func (j *Journal) reports() ([]proto.Status, []string, error) {
	var out []proto.Status
	var seqs []string
	err := j.readOutbox(bucketReports, bucketReportKeys, func(seq, v []byte) error {
		var st proto.Status
		if err := json.Unmarshal(v, &st); err != nil {
			return err
		}
		out = append(out, st)
		seqs = append(seqs, string(seq))
		return nil
	})
	return out, seqs, err
}

// AckReport applies a status_ack: it forgets the report it answers and
// notes on the job that the server holds a report of it (jobRecord's
// Reported), in one commit.
func (j *Journal) AckReport(id, status, detail string) (bool, error) {
	dropped := false
	err := j.db.Update(func(tx *bolt.Tx) error {
		var err error
		if dropped, err = dropReport(tx, id, status, detail); err != nil {
			return err
		}
		r, ok, err := getJob(tx, id)
		if err != nil || !ok || r.Reported {
			return err
		}
		r.Reported = true
		return putJob(tx, r)
	})
	return dropped, err
}

// DropReport forgets a report refused for good (a status_ack is
// AckReport's).
func (j *Journal) DropReport(id, status, detail string) (bool, error) {
	dropped := false
	err := j.db.Update(func(tx *bolt.Tx) error {
		var err error
		dropped, err = dropReport(tx, id, status, detail)
		return err
	})
	return dropped, err
}

// dropReport deletes a report from the outbox; it says whether it was there.
func dropReport(tx *bolt.Tx, id, status, detail string) (bool, error) {
	keys := tx.Bucket(bucketReportKeys)
	key := []byte(reportKey(id, status, detail))
	seq := keys.Get(key)
	if seq == nil {
		return false, nil
	}
	if err := tx.Bucket(bucketReports).Delete(seq); err != nil {
		return false, err
	}
	return true, keys.Delete(key)
}

type inboundRecord struct {
	Frame proto.Inbound `json:"frame"`
	// Key is the transport's key of the message (Received.Key); "" in a
	// record journaled before it was kept.
	Key string   `json:"key,omitempty"`
	Ref []string `json:"ref,omitempty"`
	// Files are the message's files (inmedia.go): the frame goes once
	// each is uploaded, naming their ids.
	Files []spooled `json:"files,omitempty"`
	// Acked: the server stored it, or refused it for good (Refused); the
	// transport's Acknowledge is pending.
	Acked bool `json:"acked,omitempty"`
	// Refused: the server refused it for good. It is cleared at the source
	// all the same: left there, a modem's SMS would fill its storage and
	// be read again at every poll, for ever.
	Refused bool `json:"refused,omitempty"`
}

// takeInbound journals received messages and returns those it did not know; see Sink.
func (j *Journal) takeInbound(msgs []proto.Inbound, keys []string, refs [][]string, files [][]spooled, markKey, markValue string) ([]proto.Inbound, error) {
	var added []proto.Inbound
	err := j.db.Update(func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketInboundIDs)
		b := tx.Bucket(bucketInbound)
		for i, m := range msgs {
			if ids.Get([]byte(m.ClientID)) != nil {
				inboundRecord{Files: files[i]}.removeSpooled() // known: spooled again for nothing
				continue
			}
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			v, err := json.Marshal(inboundRecord{Frame: m, Key: keys[i], Ref: refs[i], Files: files[i]})
			if err != nil {
				return err
			}
			if err := b.Put(seqKey(seq), v); err != nil {
				return err
			}
			if err := ids.Put([]byte(m.ClientID), seqKey(seq)); err != nil {
				return err
			}
			added = append(added, m)
		}
		if markKey != "" {
			return tx.Bucket(bucketMeta).Put([]byte(markKey), []byte(markValue))
		}
		return nil
	})
	return added, err
}

// inbound lists the journaled inbound messages, oldest first; like
// Reports, an unreadable record is deleted and named in the error (its
// client_id, if any, stays known).
func (j *Journal) inbound() ([]inboundRecord, error) {
	var out []inboundRecord
	err := j.readOutbox(bucketInbound, nil, func(_, v []byte) error {
		var r inboundRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// AckInbound records that the server stored the message (or, when refused
// is true, refused it for good: it is not sent again, and its spooled
// files are removed); it stays in the journal until the transport
// acknowledged it at the source.
func (j *Journal) ackInbound(clientID string, refused bool) (inboundRecord, bool, error) {
	var rec inboundRecord
	found := false
	err := j.db.Update(func(tx *bolt.Tx) error {
		var err error
		found, err = updateInbound(tx, clientID, func(r *inboundRecord) (bool, error) {
			if refused {
				r.removeSpooled()
				r.Files, r.Refused = nil, true
			}
			r.Acked = true
			rec = *r
			return false, nil
		})
		return err
	})
	return rec, found, err
}

// dropInbound deletes the inbound message clientID from the outbox without
// clearing it at its source: the server refused it for want of the device
// (not_found: the device was deleted), not for what it holds, so the SMS
// stays where it came from, for the phone's next pairing to forward. Its
// client_id stays known, as forgetInbound's does, cleared at now.
func (j *Journal) dropInbound(clientID string, now time.Time) (bool, error) {
	found := false
	err := j.db.Update(func(tx *bolt.Tx) error {
		var err error
		found, err = updateInbound(tx, clientID, func(r *inboundRecord) (bool, error) {
			r.removeSpooled()
			return true, nil
		})
		if err != nil || !found {
			return err
		}
		return clearInboundID(tx, clientID, now)
	})
	return found, err
}

// updateInbound applies change to the journal's record of the inbound
// message clientID, then stores it again, or deletes it when change says
// drop. found is false when the journal holds no such record.
func updateInbound(tx *bolt.Tx, clientID string, change func(*inboundRecord) (drop bool, err error)) (found bool, err error) {
	seq, _ := inboundSeq(tx.Bucket(bucketInboundIDs).Get([]byte(clientID)))
	if seq == nil {
		return false, nil
	}
	b := tx.Bucket(bucketInbound)
	v := b.Get(seq)
	if v == nil {
		return false, nil
	}
	var rec inboundRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return false, err
	}
	drop, err := change(&rec)
	if err != nil {
		return true, err
	}
	if drop {
		return true, b.Delete(seq)
	}
	nv, err := json.Marshal(rec)
	if err != nil {
		return true, err
	}
	return true, b.Put(seq, nv)
}

// seenInbound says what the journal knows of the message clientID: nothing
// (SeenNew), a record it still holds (SeenHeld: not yet acknowledged at
// the source), or only its client_id (SeenCleared: it was acknowledged at
// the source and forgotten).
func (j *Journal) seenInbound(clientID string) (Seen, error) {
	seen := SeenNew
	err := j.db.View(func(tx *bolt.Tx) error {
		seq, _ := inboundSeq(tx.Bucket(bucketInboundIDs).Get([]byte(clientID)))
		switch {
		case seq == nil:
		case tx.Bucket(bucketInbound).Get(seq) != nil:
			seen = SeenHeld
		default:
			seen = SeenCleared
		}
		return nil
	})
	return seen, err
}

// forgetInbound deletes an acknowledged message. Its client_id stays known,
// with now as the time it was cleared, so the same message read again at
// the source is not forwarded twice; pruneInboundIDs forgets it once the
// transport's source can no longer show it again (ClearedKeyRetention).
func (j *Journal) forgetInbound(clientID string, now time.Time) error {
	return j.db.Update(func(tx *bolt.Tx) error {
		seq, _ := inboundSeq(tx.Bucket(bucketInboundIDs).Get([]byte(clientID)))
		if seq == nil {
			return nil
		}
		if err := tx.Bucket(bucketInbound).Delete(seq); err != nil {
			return err
		}
		return clearInboundID(tx, clientID, now)
	})
}

// A value of bucketInboundIDs is the seq of the message's record in
// bucketInbound (8 bytes), followed, once the message was cleared at the
// source and its record deleted, by the time it was cleared (8 bytes, Unix
// nanoseconds, big-endian). Journals written before the time was kept
// hold the bare seq for cleared messages too: pruneInboundIDs gives such
// an id the time of the prune that first finds it cleared.
const inboundSeqLen = 8

// inboundSeq splits a value of bucketInboundIDs: the seq (nil when v is
// nil or too short to hold one) and the time the message was cleared
// (zero when not recorded).
func inboundSeq(v []byte) ([]byte, time.Time) {
	if len(v) < inboundSeqLen {
		return nil, time.Time{}
	}
	if len(v) < 2*inboundSeqLen {
		return v[:inboundSeqLen], time.Time{}
	}
	return v[:inboundSeqLen], time.Unix(0, int64(binary.BigEndian.Uint64(v[inboundSeqLen:2*inboundSeqLen])))
}

// clearedValue is a value of bucketInboundIDs for a message cleared at.
func clearedValue(seq []byte, at time.Time) []byte {
	v := make([]byte, 2*inboundSeqLen)
	copy(v, seq)
	binary.BigEndian.PutUint64(v[inboundSeqLen:], uint64(at.UnixNano()))
	return v
}

// clearInboundID records that the message clientID was cleared at now.
func clearInboundID(tx *bolt.Tx, clientID string, now time.Time) error {
	ids := tx.Bucket(bucketInboundIDs)
	seq, _ := inboundSeq(ids.Get([]byte(clientID)))
	if seq == nil {
		return nil
	}
	return ids.Put([]byte(clientID), clearedValue(seq, now))
}

// pruneInboundIDs forgets the client_ids of messages cleared at the source
// keep or longer before now; a message the journal still holds keeps its
// id whatever its age. A cleared id without its time (a journal of an
// earlier release, or a record readOutbox deleted as unreadable) is given
// now, and so is forgotten keep after this prune. keep <= 0 forgets
// nothing: the transport's source may show a cleared message again at any
// time (ClearedKeyRetention). The work is done pruneBatch ids to a commit,
// so the first prune of a journal that kept ids for years does not write
// them all in one transaction.
func (j *Journal) pruneInboundIDs(now time.Time, keep time.Duration) (int, error) {
	return j.pruneInboundIDsBy(now, keep, pruneBatch)
}

// pruneInboundIDsBy is pruneInboundIDs, batch ids to a commit.
func (j *Journal) pruneInboundIDsBy(now time.Time, keep time.Duration, batch int) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	n := 0
	var from []byte // where the next commit starts; nil: the first id
	for {
		var next []byte
		err := j.db.Update(func(tx *bolt.Tx) error {
			ids := tx.Bucket(bucketInboundIDs)
			held := tx.Bucket(bucketInbound)
			var drop, stamp [][]byte
			c := ids.Cursor()
			k, v := c.First()
			if from != nil {
				k, v = c.Seek(from)
			}
			for ; k != nil; k, v = c.Next() {
				if len(drop)+len(stamp) == batch {
					next = append([]byte(nil), k...)
					break
				}
				seq, at := inboundSeq(v)
				switch {
				case seq == nil || held.Get(seq) != nil: // not cleared (or not a value of ours: left alone)
				case at.IsZero():
					stamp = append(stamp, append([]byte(nil), k...))
				case now.Sub(at) >= keep:
					drop = append(drop, append([]byte(nil), k...))
				}
			}
			for _, k := range drop {
				if err := ids.Delete(k); err != nil {
					return err
				}
			}
			for _, k := range stamp {
				seq, _ := inboundSeq(ids.Get(k))
				if err := ids.Put(k, clearedValue(seq, now)); err != nil {
					return err
				}
			}
			n += len(drop)
			return nil
		})
		if err != nil || next == nil {
			return n, err
		}
		from = next
	}
}

// pruneBatch is how many ids one commit of pruneInboundIDs forgets or
// dates at most.
const pruneBatch = 10000
