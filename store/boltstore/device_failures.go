package boltstore

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketDeviceFailures keeps each device's last failed or expired sends,
// so that the device list shows why a phone is in trouble without a walk
// through its history: company id, device id -> JSON []DeviceFailure,
// newest first, at most MaxDeviceFailures. A key of its own, not the
// device record, so the failure path never decodes a device.
var bucketDeviceFailures = []byte("dev_failures")

// noteFailure records m, which has just become failed or expired, as its
// device's newest failure, in the transaction of the change.
func noteFailure(tx *bolt.Tx, m Message, now time.Time) error {
	if m.Direction != Outbound || m.DeviceID == 0 || (m.Status != MsgFailed && m.Status != MsgExpired) {
		return nil
	}
	b := tx.Bucket(bucketDeviceFailures)
	key := devKey(m.CompanyID, m.DeviceID)
	var list []DeviceFailure
	if err := getJSON(b, key, &list); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("device failures of %d: %w", m.DeviceID, err)
	}
	at := m.UpdatedAt
	if at.IsZero() {
		at = now
	}
	list = append([]DeviceFailure{{At: at.UTC(), Status: m.Status, Error: m.Error, QueueID: m.UUID, Channel: m.Channel}}, list...)
	if len(list) > MaxDeviceFailures {
		list = list[:MaxDeviceFailures]
	}
	return putJSON(b, key, list)
}

// DeviceFailures returns the device's last failed or expired sends,
// newest first.
func (s *Store) DeviceFailures(companyID, deviceID uint64) ([]DeviceFailure, error) {
	var list []DeviceFailure
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		list, err = deviceFailures(tx, companyID, deviceID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: failures of device %d of company %d: %w", deviceID, companyID, err)
	}
	return list, nil
}

// deviceFailures is DeviceFailures in tx; the key starts with the company
// id, so another company's device has none.
func deviceFailures(tx *bolt.Tx, companyID, deviceID uint64) ([]DeviceFailure, error) {
	var list []DeviceFailure
	err := getJSON(tx.Bucket(bucketDeviceFailures), devKey(companyID, deviceID), &list)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return list, err
}

// DeviceSummaries is QueueDepth and DeviceFailures of many devices of the
// company, in one read transaction, for a list of devices (GET
// /device/list, the console's devices page). A device with nothing waiting
// and no failures is absent, and so is an id that is not the company's:
// absent reads as the zero summary.
func (s *Store) DeviceSummaries(companyID uint64, deviceIDs []uint64) (map[uint64]DeviceSummary, error) {
	out := make(map[uint64]DeviceSummary)
	if len(deviceIDs) == 0 {
		return out, nil
	}
	err := s.view(func(tx *bolt.Tx) error {
		for _, id := range deviceIDs {
			sum, err := deviceSummary(tx, companyID, id)
			if err != nil {
				return err
			}
			if sum.QueueDepth > 0 || len(sum.Failures) > 0 {
				out[id] = sum
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: summaries of %d devices of company %d: %w", len(deviceIDs), companyID, err)
	}
	return out, nil
}

// deviceSummary is one device's summary in tx: its queue depth and its
// newest failures.
func deviceSummary(tx *bolt.Tx, companyID, deviceID uint64) (DeviceSummary, error) {
	failures, err := deviceFailures(tx, companyID, deviceID)
	if err != nil {
		return DeviceSummary{}, fmt.Errorf("failures of device %d: %w", deviceID, err)
	}
	return DeviceSummary{QueueDepth: queueDepth(tx, companyID, deviceID), Failures: failures}, nil
}
