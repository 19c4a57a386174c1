package boltstore

import (
	"bytes"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
)

// What every send path (single, bulk, WhatsApp and iMessage) checks in its
// transaction: the Idempotency-Key's earlier answer, and for SMS the device it
// goes out through.

// vettedDevice is the device a send goes out through, or why it may not:
// refused is a refusal of this send alone, never an error of the batch.
type vettedDevice struct {
	Device
	refused error
}

// sendingDevice vets the company's device for a send inside its
// transaction: gone, disabled, or refused by check of slot (the SIM asked
// for, say). The writer's sends read the device through its cache (devs);
// nil reads the record afresh.
func sendingDevice(tx *bolt.Tx, devs *deviceCache, companyID uint64, fingerprint, slot string, check DeviceCheck) (vettedDevice, error) {
	d, err := devs.live(tx, companyID, fingerprint)
	switch {
	case errors.Is(err, ErrDeviceGone):
		return vettedDevice{refused: err}, nil
	case err != nil:
		return vettedDevice{}, err
	case d.Status == DeviceDisabled:
		return vettedDevice{Device: d, refused: ErrDeviceDisabled}, nil
	}
	v := vettedDevice{Device: d}
	if check != nil {
		v.refused = check(d, slot)
	}
	return v, nil
}

// maxCachedDevices bounds the writer's device cache: an entry is the
// record's bytes and the decoded device, 1 to 1.5 KB for a phone with two
// SIMs, a push token and a health report, so at most about 24 MB, beside
// the ~11 KB each of those 16,384 phones holds while linked. A fleet larger than that still hits the
// cache for most sends: a full cache drops one entry, not all of them.
const maxCachedDevices = 16384

// deviceCache holds the device records the writer decoded for sends, by
// fingerprint, each with the bytes it was decoded from. A send whose
// device record is byte for byte the one cached takes the decoded device
// instead of decoding the record again; one changed since (or written by
// a transaction that rolled back) does not match and is decoded afresh.
// Only the writer's goroutine uses it.
type deviceCache struct {
	byFingerprint map[string]cachedDevice
	limit         int // entries at most; 0 is maxCachedDevices
}

type cachedDevice struct {
	raw []byte
	d   Device
}

// live is liveDevice through the cache; a nil cache is liveDevice.
func (c *deviceCache) live(tx *bolt.Tx, companyID uint64, fingerprint string) (Device, error) {
	if c == nil {
		return liveDevice(tx, companyID, fingerprint)
	}
	raw := tx.Bucket(bucketDevices).Get([]byte(fingerprint))
	if raw == nil {
		return Device{}, ErrDeviceGone
	}
	e, ok := c.byFingerprint[fingerprint]
	if !ok || !bytes.Equal(e.raw, raw) {
		// Decoded through a pointer of its own: the address of e, taken
		// here, would put e on the heap for every send, hits included.
		fresh := &cachedDevice{raw: bytes.Clone(raw)}
		if err := jsonUnmarshal(raw, &fresh.d); err != nil {
			return Device{}, err
		}
		e = *fresh
		if c.byFingerprint == nil {
			c.byFingerprint = make(map[string]cachedDevice)
		}
		c.makeRoom()
		c.byFingerprint[fingerprint] = e
	}
	if e.d.CompanyID != companyID || e.d.ID == 0 {
		return Device{}, ErrDeviceGone
	}
	return e.d, nil
}

// makeRoom drops one entry, any (map order is random), when the cache is
// full. Starting over instead would make a fleet larger than the cache,
// sending round the devices in turn, miss on every send.
func (c *deviceCache) makeRoom() {
	limit := c.limit
	if limit <= 0 {
		limit = maxCachedDevices
	}
	for fp := range c.byFingerprint {
		if len(c.byFingerprint) < limit {
			return
		}
		delete(c.byFingerprint, fp)
	}
}

// idempotencyTTL is how long a company's Idempotency-Key keeps its answer.
const idempotencyTTL = 24 * time.Hour

// answerKey is one send request's Idempotency-Key inside a send transaction.
type answerKey struct {
	k      []byte // nil without a key
	route  string
	digest string
}

// idempotencyRecordKey is where a key's answer is kept: company id, a zero
// byte, the route, a zero byte, the key. Keys kept before keys had routes
// are the company id and the key alone; a header value never holds a zero
// byte, so the two layouts never meet.
func idempotencyRecordKey(companyID uint64, key IdempotencyKey) []byte {
	k := append(itob(companyID), 0)
	k = append(k, key.Route...)
	k = append(k, 0)
	return append(k, key.Key...)
}

// priorAnswer looks the company's key up on its route: its key (none
// without one) and the answer the key got within the last day, if any,
// which the caller returns instead of storing anything (the caller compares
// the answer's Digest with its own). An answer kept before keys had routes
// is found on every route and replays as it did then, whatever the body.
func priorAnswer(tx *bolt.Tx, companyID uint64, key IdempotencyKey, now time.Time) (answerKey, *Idempotent) {
	if key.Key == "" {
		return answerKey{}, nil
	}
	b := tx.Bucket(bucketIdempotency)
	ak := answerKey{k: idempotencyRecordKey(companyID, key), route: key.Route, digest: key.Digest}
	for _, k := range [][]byte{ak.k, append(itob(companyID), key.Key...)} {
		var rec Idempotent
		if err := getJSON(b, k, &rec); err == nil && now.Sub(rec.CreatedAt) < idempotencyTTL {
			return ak, &rec
		}
	}
	return ak, nil
}

// keep records the answer of the request that used the key, in the
// transaction that stores what it sent; without a key it does nothing (and
// builds no answer).
func (k answerKey) keep(tx *bolt.Tx, at time.Time, answer func() (int, []byte)) error {
	if k.k == nil {
		return nil
	}
	status, body := answer()
	return putJSON(tx.Bucket(bucketIdempotency), k.k, Idempotent{Status: status, Body: body, CreatedAt: at, Route: k.route, Digest: k.digest})
}
