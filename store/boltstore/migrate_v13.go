package boltstore

import (
	bolt "go.etcd.io/bbolt"
)

// Schema 13 indexes the queued WhatsApp and iMessage sends by the
// registration each was last handed to (agent_handed, handedKey), which an
// agent's hello reads in place of the company's whole queue
// (AgentRelease). Its migration reads the queued agent sends once
// (agent_queue, one record each) in one transaction and indexes those
// handed to a registration. A build before schema 13, which would hand out
// and settle sends without keeping the index, refuses the file.
func migrateAgentHanded(tx *bolt.Tx) error {
	if tx.Bucket(bucketAgentHanded) != nil {
		if err := tx.DeleteBucket(bucketAgentHanded); err != nil {
			return err
		}
	}
	handed, err := tx.CreateBucket(bucketAgentHanded)
	if err != nil {
		return err
	}
	msgs := tx.Bucket(bucketMessages)
	c := tx.Bucket(bucketAgentQueue).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != 24 {
			continue
		}
		var m Message
		if err := getJSON(msgs, k[16:], &m); err != nil {
			return err
		}
		if m.Status != MsgQueued || m.HandedTo == 0 {
			continue
		}
		if err := handed.Put(handedKey(m.CompanyID, m.HandedTo, m.ID), nil); err != nil {
			return err
		}
	}
	return nil
}
