package boltstore

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Schema 1 keyed every per-device record by the device's fingerprint. A
// fingerprint is the handset's, so a phone deleted by one company and paired
// by another showed the new company the old one's history, let it move the
// old one's messages and deduplicated its inbound against the old one's.
// Schema 2 gives each device registration an id and keys those records by
// company id + device id (devKey).

// Schema 1's buckets that schema 2 replaces; dropped at the end of the migration.
var (
	v1Queue          = []byte("queue")           // fingerprint 0 id -> nil
	v1Sending        = []byte("sending")         // fingerprint 0 id -> nil
	v1ConvMessages   = []byte("conv_messages")   // fingerprint 0 phone 0 id -> nil
	v1Conversations  = []byte("conversations")   // fingerprint 0 phone -> Conversation
	v1ConvOrder      = []byte("conv_order")      // fingerprint 0 last id -> phone
	v1InboundDevice  = []byte("inbound_device")  // fingerprint 0 tag [slot] id -> nil
	v1InboundClient  = []byte("inbound_client")  // fingerprint 0 client id -> id
	v1CompanyDevices = []byte("company_devices") // company id + fingerprint -> nil
	v1Buckets        = [][]byte{v1Queue, v1Sending, v1ConvMessages, v1Conversations, v1ConvOrder, v1InboundDevice, v1InboundClient, v1CompanyDevices}
)

var (
	// keyV2Cursor is the id of the last message the migration moved; absent
	// until the devices have their ids.
	keyV2Cursor = []byte("migrate_v2_cursor")
	// bucketV2Retired holds, during the migration only, the id given to each
	// (company, fingerprint) whose messages outlived their device.
	bucketV2Retired = []byte("migrate_v2_retired") // company id + fingerprint -> device id
)

// MigrateV2Batch is how many messages one step of the 1 -> 2 migration moves.
// bbolt keeps every node a transaction touches in memory, unsplit, until it
// commits: a million messages in one transaction had grown past 1 GB of heap
// and slowed to a crawl when stopped after 17 minutes, while steps of this
// size move them in about 40 s with a heap peak of 160 MB (docs/performance.md).
const MigrateV2Batch = 5000

func migrateDeviceIDs(tx *bolt.Tx) (bool, error) { return migrateDeviceIDsIn(tx, MigrateV2Batch) }

// migrateDeviceIDsIn runs one step of the 1 -> 2 migration: the first gives
// the live devices their ids, each later one moves the next batch of
// messages, and the last drops schema 1's buckets.
func migrateDeviceIDsIn(tx *bolt.Tx, batch int) (bool, error) {
	meta := tx.Bucket(bucketMeta)
	cur := meta.Get(keyV2Cursor)
	if cur == nil {
		if err := v2Devices(tx); err != nil {
			return false, fmt.Errorf("devices: %w", err)
		}
		return false, meta.Put(keyV2Cursor, itob(0))
	}
	last, more, err := v2Messages(tx, btoi(cur), batch)
	if err != nil {
		return false, fmt.Errorf("messages after %d: %w", btoi(cur), err)
	}
	if more {
		return false, meta.Put(keyV2Cursor, itob(last))
	}
	for _, name := range append(v1Buckets, bucketV2Retired) {
		if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return false, fmt.Errorf("drop %s: %w", name, err)
		}
	}
	return true, meta.Delete(keyV2Cursor)
}

// v2Devices gives every live device an id and rebuilds the indexes that
// name live devices: company_device_ids and the token values.
func v2Devices(tx *bolt.Tx) error {
	// The buckets schema 2 writes; Open creates them too, but a step must
	// not depend on who runs it.
	for _, name := range [][]byte{bucketCompanyDeviceIDs, bucketQueue, bucketSendingIdx, bucketConvMessages, bucketConversations, bucketConvOrder, bucketInboundDevice, bucketInboundClient, bucketV2Retired} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	devices := tx.Bucket(bucketDevices)
	var all []Device
	if err := devices.ForEach(func(_, v []byte) error {
		var d Device
		if err := jsonUnmarshal(v, &d); err != nil {
			return err
		}
		all = append(all, d)
		return nil
	}); err != nil {
		return err
	}
	// Tokens of schema 1 map to the fingerprint; every live device has
	// exactly one, so the bucket is written anew.
	if err := tx.DeleteBucket(bucketDeviceTokens); err != nil {
		return err
	}
	if _, err := tx.CreateBucket(bucketDeviceTokens); err != nil {
		return err
	}
	for _, d := range all {
		if d.ID == 0 {
			var err error
			if d.ID, err = devices.NextSequence(); err != nil {
				return err
			}
		}
		if err := putLiveDevice(tx, d); err != nil {
			return err
		}
	}
	return nil
}

// v2Messages moves up to batch messages with ids above after: each gets the
// id of its device (the live device when its company still holds the
// fingerprint, else a retired id of its own per company and fingerprint),
// and its index entries move to the new keys. It returns the last id moved
// and whether any message was left to move.
func v2Messages(tx *bolt.Tx, after uint64, batch int) (uint64, bool, error) {
	msgs := tx.Bucket(bucketMessages)
	old := func(name []byte) *bolt.Bucket { return tx.Bucket(name) } // nil in a store that never had it
	oldQueue, oldSending, oldClient := old(v1Queue), old(v1Sending), old(v1InboundClient)
	expiry := tx.Bucket(bucketQueueExpiry)
	ids := map[devName]uint64{}
	var todo []Message
	c := msgs.Cursor()
	for k, v := c.Seek(itob(after + 1)); k != nil && len(todo) < batch; k, v = c.Next() {
		var m Message
		if err := jsonUnmarshal(v, &m); err != nil {
			return after, false, fmt.Errorf("message %d: %w", btoi(k), err)
		}
		todo = append(todo, m)
	}
	if len(todo) == 0 {
		return after, false, nil
	}
	for i := range todo {
		m := &todo[i]
		name := devName{m.CompanyID, m.Device}
		if ids[name] == 0 {
			id, err := v2DeviceID(tx, name)
			if err != nil {
				return after, false, err
			}
			ids[name] = id
		}
		m.DeviceID = ids[name]
		// insertMessage rewrites the record and files it under its
		// conversation; messages come in id order, so each conversation's
		// count and latest message come out as they were kept.
		if err := insertMessage(tx, m); err != nil {
			return after, false, fmt.Errorf("message %d: %w", m.ID, err)
		}
		v1 := func(rest ...[]byte) []byte { return append(append([]byte(m.Device), 0), bytes.Join(rest, nil)...) }
		id := itob(m.ID)
		if oldQueue != nil && oldQueue.Get(v1(id)) != nil {
			if err := tx.Bucket(bucketQueue).Put(msgDevKey(*m, id), nil); err != nil {
				return after, false, err
			}
		}
		if oldSending != nil && oldSending.Get(v1(id)) != nil {
			if err := tx.Bucket(bucketSendingIdx).Put(msgDevKey(*m, id), nil); err != nil {
				return after, false, err
			}
		}
		if !m.ExpiresAt.IsZero() {
			ek := append(timeKey(m.ExpiresAt), id...)
			if expiry.Get(ek) != nil {
				if err := expiry.Put(ek, msgDevKey(*m)); err != nil {
					return after, false, err
				}
			}
		}
		if m.Direction != Inbound {
			continue
		}
		for _, k := range inboundDeviceKeys(*m) {
			if err := tx.Bucket(bucketInboundDevice).Put(k, nil); err != nil {
				return after, false, err
			}
		}
		if oldClient != nil && bytes.Equal(oldClient.Get(v1([]byte(m.ClientID))), id) {
			if err := tx.Bucket(bucketInboundClient).Put(msgDevKey(*m, []byte(m.ClientID)), id); err != nil {
				return after, false, err
			}
		}
	}
	return todo[len(todo)-1].ID, true, nil
}

// v2DeviceID is the id for a message of this company and fingerprint: the
// live device's when the company holds it, otherwise the retired id of the
// pair, given once.
func v2DeviceID(tx *bolt.Tx, name devName) (uint64, error) {
	d, err := liveDevice(tx, name.companyID, name.fingerprint)
	if err == nil {
		return d.ID, nil
	}
	if !errors.Is(err, ErrDeviceGone) {
		return 0, err
	}
	retired := tx.Bucket(bucketV2Retired)
	key := append(itob(name.companyID), name.fingerprint...)
	if v := retired.Get(key); v != nil {
		return btoi(v), nil
	}
	id, err := tx.Bucket(bucketDevices).NextSequence()
	if err != nil {
		return 0, err
	}
	return id, retired.Put(key, itob(id))
}
