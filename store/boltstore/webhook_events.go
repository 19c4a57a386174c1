package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// One payload per event. Every delivery of an event sends the same JSON
// object but for its first member, the delivery's own id. The object without
// that member is stored once (webhook_events) with a count of the deliveries
// still pending on it (webhook_event_refs); a delivery row holds only its
// own fields, and its body is put together when it is read for an attempt.
// So an inbound message matched by 20 entries costs its payload once, not
// 20 times, and the bytes sent (and so the signature) are the same on every
// attempt: both parts are fixed at enqueue.

var (
	bucketWebhookEvents    = []byte("webhook_events")       // event id -> body without the delivery id
	bucketWebhookEventRefs = []byte("webhook_event_refs")   // event id -> pending deliveries on it (uint64)
	bucketWebhookOutbox    = []byte("webhook_outbox_sizes") // company id -> pending deliveries (uint64) + their events' bytes (uint64)
)

// outboxSize is a company's pending deliveries and their events' bytes.
type outboxSize struct {
	deliveries uint64
	bytes      uint64
}

func loadOutboxSize(tx *bolt.Tx, companyID uint64) outboxSize {
	v := tx.Bucket(bucketWebhookOutbox).Get(itob(companyID))
	if len(v) != 16 {
		return outboxSize{}
	}
	return outboxSize{deliveries: btoi(v[:8]), bytes: btoi(v[8:])}
}

func putOutboxSize(tx *bolt.Tx, companyID uint64, o outboxSize) error {
	b := tx.Bucket(bucketWebhookOutbox)
	if o.deliveries == 0 && o.bytes == 0 {
		return b.Delete(itob(companyID))
	}
	return b.Put(itob(companyID), append(itob(o.deliveries), itob(o.bytes)...))
}

// WebhookOutboxSize returns how many deliveries the company has pending and
// how many bytes of event bodies they hold.
func (s *Store) WebhookOutboxSize(companyID uint64) (deliveries int, bytes int64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		o := loadOutboxSize(tx, companyID)
		deliveries, bytes = int(o.deliveries), int64(o.bytes)
		return nil
	})
	return deliveries, bytes, err
}

// addWebhookEvent is the outbox write of an event, in the transaction of
// the change it tells of (a status change, an inbound message, a device's
// change: events.go). It hands the company's webhook set to build, and
// stores the event's body once and the deliveries build returns, due at
// their NextAttemptAt. A company without webhooks costs one lookup.
//
// The body counts against the company's daily storage budget after the
// fact (chargeAfter). When the company's outbox would go over lim, nothing
// of the event is queued: each of its deliveries gets a failed line in the
// deliveries log instead, and the result says how many were refused.
func (s *Store) addWebhookEvent(tx *bolt.Tx, companyID uint64, now time.Time, lim OutboxLimits, build func(WebhookSet) (WebhookEvent, []WebhookDelivery, error)) (OutboxAdd, error) {
	var out OutboxAdd
	set, err := loadWebhookSet(tx, companyID)
	if err != nil || len(set.Entries) == 0 {
		return out, err
	}
	ev, ds, err := build(set)
	if err != nil || len(ds) == 0 {
		return out, err
	}
	size := loadOutboxSize(tx, companyID)
	out.Pending, out.PendingBytes = int(size.deliveries), int64(size.bytes)
	full := lim.MaxDeliveries > 0 && size.deliveries+uint64(len(ds)) > uint64(lim.MaxDeliveries) ||
		lim.MaxBytes > 0 && size.bytes+uint64(len(ev.Body)) > uint64(lim.MaxBytes)
	if full {
		for _, d := range ds {
			a := WebhookAttempt{
				CompanyID: companyID, WebhookID: d.WebhookID, EventID: ev.ID, DeliveryID: d.UUID, EventType: d.EventType,
				State: WebhookFailed, CreatedAt: now.UTC(),
				Error: fmt.Sprintf("not queued: the company's webhook outbox is full (%d deliveries pending, %d bytes; the limits are %d and %d)",
					size.deliveries, size.bytes, lim.MaxDeliveries, lim.MaxBytes),
			}
			if err := appendAttempt(tx, &a, lim.LogKeep); err != nil {
				return out, err
			}
		}
		out.Refused = len(ds)
		return out, nil
	}
	events := tx.Bucket(bucketWebhookEvents)
	if ev.ID == "" || events.Get([]byte(ev.ID)) != nil {
		return out, fmt.Errorf("%w: webhook event id %q is empty or taken", ErrConflict, ev.ID)
	}
	if err := s.chargeAfter(tx, companyID, now, int64(len(ev.Body))+int64(len(ds))*store.DeliveryRowCost); err != nil {
		return out, err
	}
	if err := events.Put([]byte(ev.ID), ev.Body); err != nil {
		return out, err
	}
	if err := tx.Bucket(bucketWebhookEventRefs).Put([]byte(ev.ID), itob(uint64(len(ds)))); err != nil {
		return out, err
	}
	b := tx.Bucket(bucketWebhookDeliveries)
	for _, d := range ds {
		if d.ID, err = b.NextSequence(); err != nil {
			return out, err
		}
		d.CompanyID, d.EventID, d.Body = companyID, ev.ID, nil
		if err := putJSON(b, itob(d.ID), d); err != nil {
			return out, err
		}
		if err := putDue(tx, d); err != nil {
			return out, err
		}
	}
	size.deliveries += uint64(len(ds))
	size.bytes += uint64(len(ev.Body))
	out.Queued, out.Pending, out.PendingBytes = len(ds), int(size.deliveries), int64(size.bytes)
	return out, putOutboxSize(tx, companyID, size)
}

// deliveryBodyIn fills d.Body from its event when the row does not carry
// its own (rows written before events were shared may).
func deliveryBodyIn(tx *bolt.Tx, d *WebhookDelivery) error {
	if len(d.Body) > 0 {
		return nil
	}
	ev := tx.Bucket(bucketWebhookEvents).Get([]byte(d.EventID))
	if ev == nil {
		return fmt.Errorf("store: webhook event %s of delivery %d is missing", d.EventID, d.ID)
	}
	d.Body = DeliveryBody(d.UUID, ev)
	return nil
}

// endDelivery releases what a pending delivery held once it ended: its
// place in the company's outbox and its reference to the event, whose body
// goes with the last one.
func endDelivery(tx *bolt.Tx, d WebhookDelivery) error {
	size := loadOutboxSize(tx, d.CompanyID)
	if size.deliveries > 0 {
		size.deliveries--
	}
	if len(d.Body) == 0 { // a shared body (a row with its own has no event)
		refs := tx.Bucket(bucketWebhookEventRefs)
		key := []byte(d.EventID)
		var n uint64
		if v := refs.Get(key); len(v) == 8 {
			n = btoi(v)
		}
		if n > 1 {
			if err := refs.Put(key, itob(n-1)); err != nil {
				return err
			}
		} else {
			events := tx.Bucket(bucketWebhookEvents)
			size.bytes -= min(size.bytes, uint64(len(events.Get(key))))
			if err := events.Delete(key); err != nil {
				return err
			}
			if err := refs.Delete(key); err != nil {
				return err
			}
		}
	} else {
		size.bytes -= min(size.bytes, uint64(len(d.Body)))
	}
	return putOutboxSize(tx, d.CompanyID, size)
}

// migrateWebhookEvents moves the bodies of pending deliveries written before
// events were shared into one event record per event, and counts each
// company's outbox. A row whose body does not have the shape this package
// writes keeps it (and is sent as it is).
func migrateWebhookEvents(tx *bolt.Tx) error {
	deliveries := tx.Bucket(bucketWebhookDeliveries)
	events := tx.Bucket(bucketWebhookEvents)
	refs := tx.Bucket(bucketWebhookEventRefs)
	sizes := map[uint64]outboxSize{}
	type row struct {
		key []byte
		d   WebhookDelivery
	}
	var rewrite []row
	err := deliveries.ForEach(func(k, v []byte) error {
		var d WebhookDelivery
		if err := jsonUnmarshal(v, &d); err != nil {
			return fmt.Errorf("webhook delivery %d: %w", btoi(k), err)
		}
		size := sizes[d.CompanyID]
		size.deliveries++
		defer func() { sizes[d.CompanyID] = size }()
		if len(d.Body) == 0 {
			return nil // already shares an event
		}
		prefix := DeliveryBody(d.UUID, []byte("{}"))
		prefix = append(prefix[:len(prefix)-1], ',')
		if d.EventID == "" || !bytes.HasPrefix(d.Body, prefix) {
			size.bytes += uint64(len(d.Body))
			return nil
		}
		body := append([]byte{'{'}, d.Body[len(prefix):]...)
		key := []byte(d.EventID)
		switch old := events.Get(key); {
		case old == nil:
			if err := events.Put(key, body); err != nil {
				return err
			}
			size.bytes += uint64(len(body))
		case !bytes.Equal(old, body):
			size.bytes += uint64(len(d.Body))
			return nil // not the same event after all: keep its own body
		}
		var n uint64
		if v := refs.Get(key); len(v) == 8 {
			n = btoi(v)
		}
		if err := refs.Put(key, itob(n+1)); err != nil {
			return err
		}
		d.Body = nil
		rewrite = append(rewrite, row{append([]byte(nil), k...), d})
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range rewrite {
		if err := putJSON(deliveries, r.key, r.d); err != nil {
			return err
		}
	}
	for id, size := range sizes {
		if err := putOutboxSize(tx, id, size); err != nil {
			return err
		}
	}
	return nil
}
