package boltstore

import (
	bolt "go.etcd.io/bbolt"
)

// Schema 11 indexes the pending webhook deliveries by company and entry
// (webhook_due_entries) beside the index by due time, so that a pass over
// the due deliveries passes over a company, or an entry, at its bound of
// attempts under way with one seek instead of reading each of its due
// deliveries (DueWebhookDeliveries). Its migration indexes the deliveries
// of the index by due time in one transaction: one read of each due key
// (and of its delivery where the key was written without the delivery's
// entry and company) and one write. A build before schema 11, which would
// queue and end deliveries without the new index, refuses the file.
func migrateWebhookDueEntries(tx *bolt.Tx) error {
	if tx.Bucket(bucketWebhookDueEntries) != nil {
		if err := tx.DeleteBucket(bucketWebhookDueEntries); err != nil {
			return err
		}
	}
	idx, err := tx.CreateBucket(bucketWebhookDueEntries)
	if err != nil {
		return err
	}
	deliveries := tx.Bucket(bucketWebhookDeliveries)
	c := tx.Bucket(bucketWebhookDue).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		raw := deliveries.Get(k[8:])
		if raw == nil {
			continue // a key without its row, which no pass takes
		}
		var d WebhookDue
		if len(v) == 16 {
			d.WebhookID, d.CompanyID = btoi(v[:8]), btoi(v[8:])
		} else { // a key written before dueValue
			if d, err = dueOf(raw); err != nil {
				return err
			}
		}
		if err := idx.Put(dueEntryKey(d.CompanyID, d.WebhookID, k[:8], k[8:]), nil); err != nil {
			return err
		}
	}
	return nil
}
