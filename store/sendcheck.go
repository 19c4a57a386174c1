package store

import (
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
// transaction: gone, disabled, or refused by check (the SIM asked for, say).
func sendingDevice(tx *bolt.Tx, companyID uint64, fingerprint string, check func(Device) error) (vettedDevice, error) {
	d, err := liveDevice(tx, companyID, fingerprint)
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
		v.refused = check(d)
	}
	return v, nil
}

// idempotencyTTL is how long a company's Idempotency-Key keeps its answer.
const idempotencyTTL = 24 * time.Hour

// answerKey is one send request's Idempotency-Key inside a send transaction.
type answerKey []byte

// priorAnswer looks the company's key up: its key (nil without one) and the
// answer the key got within the last day, if any, which the caller returns
// instead of storing anything.
func priorAnswer(tx *bolt.Tx, companyID uint64, key string, now time.Time) (answerKey, *Idempotent) {
	if key == "" {
		return nil, nil
	}
	k := append(itob(companyID), key...)
	var rec Idempotent
	if err := getJSON(tx.Bucket(bucketIdempotency), k, &rec); err == nil && now.Sub(rec.CreatedAt) < idempotencyTTL {
		return k, &rec
	}
	return k, nil
}

// keep records the answer of the request that used the key, in the
// transaction that stores what it sent; without a key it does nothing (and
// builds no answer).
func (k answerKey) keep(tx *bolt.Tx, at time.Time, answer func() (int, []byte)) error {
	if k == nil {
		return nil
	}
	status, body := answer()
	return putJSON(tx.Bucket(bucketIdempotency), k, Idempotent{Status: status, Body: body, CreatedAt: at})
}
