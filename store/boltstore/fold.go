package boltstore

import (
	bolt "go.etcd.io/bbolt"
)

// fold gathers what a run of status changes (TransitionLater) that follow
// one another in a batch does to message records and to dev_sending, and
// writes it once when the run ends (flush): before the batch's next other
// write, and before the commit. A job acked and reported sent, or sent and
// delivered, in one commit then has its record written once, in its final
// state, and a dev_sending entry that the ack puts and the report deletes
// is not touched at all. The rest of each change (the queue index, its
// counters, its status event) is written step by step as before, and all
// of it commits in the one transaction: nothing outlives the commit in
// memory, so a crash loses the ack with its report, as it did before.
type fold struct {
	msgs     map[uint64]Message // id -> the record to write
	order    []uint64           // the ids of msgs, in the order first changed
	sending  map[string]foldEntry
	sendKeys []string // the keys of sending, in the order first changed
	folded   uint64   // record writes saved, over all runs of the batch
}

// foldEntry is a dev_sending key's presence before the run and after it.
type foldEntry struct{ was, is bool }

// message reads a message by uuid as the run left it.
func (f *fold) message(tx *bolt.Tx, uuid string) (Message, error) {
	id := tx.Bucket(bucketMessageUUIDs).Get([]byte(uuid))
	if id == nil {
		return Message{}, ErrNotFound
	}
	if m, ok := f.msgs[btoi(id)]; ok {
		return m, nil
	}
	var m Message
	return m, getMessage(tx.Bucket(bucketMessages), id, &m)
}

// messageByID reads a message by id as the run left it.
func (f *fold) messageByID(tx *bolt.Tx, id uint64) (Message, error) {
	if m, ok := f.msgs[id]; ok {
		return m, nil
	}
	var m Message
	return m, getMessage(tx.Bucket(bucketMessages), itob(id), &m)
}

// put keeps m as its record's content at the end of the run.
func (f *fold) put(m Message) {
	if f.msgs == nil {
		f.msgs = make(map[uint64]Message)
	}
	if _, ok := f.msgs[m.ID]; ok {
		f.folded++
	} else {
		f.order = append(f.order, m.ID)
	}
	f.msgs[m.ID] = m
}

// setSending puts (on) or deletes a dev_sending key at the end of the run.
func (f *fold) setSending(tx *bolt.Tx, key []byte, on bool) {
	if f.sending == nil {
		f.sending = make(map[string]foldEntry)
	}
	e, ok := f.sending[string(key)]
	if !ok {
		e.was = tx.Bucket(bucketSendingIdx).Get(key) != nil
		f.sendKeys = append(f.sendKeys, string(key))
	}
	e.is = on
	f.sending[string(key)] = e
}

// flush writes the run's records and dev_sending changes and starts a new run.
func (f *fold) flush(tx *bolt.Tx) error {
	if len(f.order) > 0 {
		msgs := tx.Bucket(bucketMessages)
		for _, id := range f.order {
			m := f.msgs[id]
			if err := putMessage(msgs, itob(id), &m); err != nil {
				return err
			}
		}
		clear(f.msgs)
		f.order = f.order[:0]
	}
	if len(f.sendKeys) > 0 {
		sending := tx.Bucket(bucketSendingIdx)
		for _, k := range f.sendKeys {
			var err error
			switch e := f.sending[k]; {
			case e.is && !e.was:
				err = sending.Put([]byte(k), nil)
			case !e.is && e.was:
				err = sending.Delete([]byte(k))
			}
			if err != nil {
				return err
			}
		}
		clear(f.sending)
		f.sendKeys = f.sendKeys[:0]
	}
	return nil
}

// FoldedWrites counts, since the store opened, the message record writes
// that folding saved: a status change whose record was written together
// with an earlier change of the same message in its commit (an ack with
// its sent report, say).
func (s *Store) FoldedWrites() uint64 {
	if s.commit == nil {
		return 0
	}
	return s.commit.folded.Load()
}
