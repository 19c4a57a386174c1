package boltstore

// The dump's kinds of what goes out or comes in beside sends: webhook sets,
// events, deliveries and attempts, mail, media and billing events.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

func dumpWebhookSets(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketWebhookSets, func(k []byte, set WebhookSet) error {
		set.CompanyID = btoi(k)
		return put(store.CopyWebhookSet{Set: set})
	})
}

// dumpWebhookEvents gives each event's body with its pending deliveries'
// count; its company is its deliveries'. A delivery written before events
// were shared (schema 2) that carries its own body may name an event no
// record holds: that event is given with no body and none pending on it, so
// the delivery's event is there whatever the destination requires of it.
func dumpWebhookEvents(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	owner, bodiless, err := webhookEventOwners(tx)
	if err != nil {
		return err
	}
	refs := tx.Bucket(bucketWebhookEventRefs)
	if err := tx.Bucket(bucketWebhookEvents).ForEach(func(k, v []byte) error {
		var pending int64
		if r := refs.Get(k); len(r) == 8 {
			pending = int64(btoi(r))
		}
		return put(store.CopyWebhookEvent{ID: string(k), CompanyID: owner[string(k)], Body: bytes.Clone(v), Pending: pending})
	}); err != nil {
		return err
	}
	for _, id := range bodiless {
		if err := put(store.CopyWebhookEvent{ID: id, CompanyID: owner[id], Body: []byte{}}); err != nil {
			return err
		}
	}
	return nil
}

// webhookEventOwners maps each event a pending delivery names to the
// delivery's company, and lists, in order, the events named only by
// deliveries with their own bodies that no record holds.
func webhookEventOwners(tx *bolt.Tx) (owner map[string]uint64, bodiless []string, err error) {
	owner = map[string]uint64{}
	events := tx.Bucket(bucketWebhookEvents)
	seen := map[string]bool{}
	err = eachRecord(tx, bucketWebhookDeliveries, func(_ []byte, d WebhookDelivery) error {
		owner[d.EventID] = d.CompanyID
		if len(d.Body) > 0 && !seen[d.EventID] && events.Get([]byte(d.EventID)) == nil {
			seen[d.EventID] = true
			bodiless = append(bodiless, d.EventID)
		}
		return nil
	})
	slices.Sort(bodiless)
	return owner, bodiless, err
}

func dumpWebhookDeliveries(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketWebhookDeliveries, func(_ []byte, d WebhookDelivery) error {
		return put(store.CopyWebhookDelivery{Delivery: d})
	})
}

func dumpWebhookAttempts(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketWebhookAttempts, func(_ []byte, a WebhookAttempt) error {
		return put(store.CopyWebhookAttempt{Attempt: a})
	})
}

func dumpMail(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketMailOutbox, func(_ []byte, m Mail) error {
		return put(store.CopyMail{Mail: m})
	})
}

// dumpMedia gives each file's record, then its chunks in order.
func dumpMedia(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	chunks := tx.Bucket(bucketMediaChunks)
	return eachRecord(tx, bucketMedia, func(k []byte, m Media) error {
		if err := put(store.CopyMedia{Media: m}); err != nil {
			return err
		}
		prefix := append(bytes.Clone(k), 0)
		var err error
		walkPrefix(chunks, prefix, func(ck, v []byte) bool {
			if len(ck) != len(prefix)+4 {
				err = fmt.Errorf("%s: malformed key %x", bucketMediaChunks, ck)
				return false
			}
			err = put(store.CopyMediaChunk{MediaID: m.ID, N: binary.BigEndian.Uint32(ck[len(prefix):]), Data: bytes.Clone(v)})
			return err == nil
		})
		return err
	})
}

// dumpBillingEvents gives the provider events applied: event id -> unix s.
func dumpBillingEvents(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketBillingEvents).ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %q", bucketBillingEvents, k)
		}
		return put(store.CopyBillingEvent{ID: string(k), AppliedAt: time.Unix(int64(btoi(v)), 0).UTC()})
	})
}
