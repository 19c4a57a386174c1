package boltstore

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// Schema 10 keeps each WhatsApp number's and iMessage handle's count of
// messages (agent_message_counts), which a page of its messages answers as
// the total where it walked every key of the number. Its migration counts
// the stored messages' keys (agent_messages) in one transaction: one read
// of each key and one write a number. A build before schema 10, which
// would store messages without counting them, refuses the file.
func migrateAgentMessageCounts(tx *bolt.Tx) error {
	if tx.Bucket(bucketAgentMsgCounts) != nil {
		if err := tx.DeleteBucket(bucketAgentMsgCounts); err != nil {
			return err
		}
	}
	counts, err := tx.CreateBucket(bucketAgentMsgCounts)
	if err != nil {
		return err
	}
	var prefix []byte
	var n uint64
	flush := func() error {
		if n == 0 {
			return nil
		}
		return counts.Put(prefix, itob(n))
	}
	c := tx.Bucket(bucketAgentMessages).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != 24 {
			continue
		}
		if !bytes.Equal(k[:16], prefix) {
			if err := flush(); err != nil {
				return err
			}
			prefix, n = bytes.Clone(k[:16]), 0
		}
		n++
	}
	return flush()
}
