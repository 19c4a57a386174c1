package boltstore

import (
	bolt "go.etcd.io/bbolt"
)

// The recent activity of a company: a ring of its last ActivityKeep events,
// written in the transaction of what they report, so the dashboard reads
// them without walking anything. A description names the company's own
// objects only (a masked number, a device's name, an address the company
// typed) and never a message's text.
//
//	activity      company(8) slot(8) -> Activity
//	activity_head company(8)         -> events written ever
//	disabled_devices company(8) device id(8) -> nil (live and disabled)

var (
	bucketActivity        = []byte("activity")
	bucketActivityHead    = []byte("activity_head")
	bucketDisabledDevices = []byte("disabled_devices")
)

// addActivity writes an event into the company's ring.
func addActivity(tx *bolt.Tx, companyID uint64, a Activity) error {
	heads := tx.Bucket(bucketActivityHead)
	if heads == nil {
		return nil // a migration step older than the ring
	}
	var n uint64
	if v := heads.Get(itob(companyID)); len(v) == 8 {
		n = btoi(v)
	}
	a.At = a.At.UTC()
	if err := putJSON(tx.Bucket(bucketActivity), pair(companyID, n%ActivityKeep), a); err != nil {
		return err
	}
	return heads.Put(itob(companyID), itob(n+1))
}

// recentActivity returns the company's newest events, newest first, at most limit.
func recentActivity(tx *bolt.Tx, companyID uint64, limit int) ([]Activity, error) {
	out := []Activity{}
	var n uint64
	if v := tx.Bucket(bucketActivityHead).Get(itob(companyID)); len(v) == 8 {
		n = btoi(v)
	}
	b := tx.Bucket(bucketActivity)
	for i := uint64(0); i < n && i < ActivityKeep && len(out) < limit; i++ {
		var a Activity
		if err := getJSON(b, pair(companyID, (n-1-i)%ActivityKeep), &a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// syncDisabled keeps the disabled_devices index in step with a live device.
func syncDisabled(tx *bolt.Tx, d Device) error {
	b := tx.Bucket(bucketDisabledDevices)
	if b == nil {
		return nil // a migration step older than the index; the counters' migration builds it
	}
	if d.Status == DeviceDisabled {
		return b.Put(pair(d.CompanyID, d.ID), nil)
	}
	return b.Delete(pair(d.CompanyID, d.ID))
}

// activeDevices counts the company's live devices whose status is active,
// from two key-only indexes (no device record is read).
func activeDevices(tx *bolt.Tx, companyID uint64) int {
	n := 0
	prefix := itob(companyID)
	walkPrefix(tx.Bucket(bucketCompanyDeviceIDs), prefix, func(_, _ []byte) bool { n++; return true })
	walkPrefix(tx.Bucket(bucketDisabledDevices), prefix, func(_, _ []byte) bool { n--; return true })
	return max(n, 0)
}
