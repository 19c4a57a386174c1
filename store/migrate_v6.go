package store

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Schema 6 keeps, beside each day's counters by channel, device and user,
// their sums by company and by device (stats.go), so the dashboard and the
// analytics read a range without walking every device's and user's record.
// Its migration rolls the sums up from the stored counters in one
// transaction. It rebuilds both buckets from nothing: a store migrated from
// before schema 5 has had its messages counted into them already.
func migrateStatsSums(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketStatsCompanyDays, bucketStatsDeviceDays} {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	companyDays, deviceDays := tx.Bucket(bucketStatsCompanyDays), tx.Bucket(bucketStatsDeviceDays)
	return tx.Bucket(bucketStatsDays).ForEach(func(k, v []byte) error {
		if len(k) != 29 {
			return nil
		}
		company, day, dev := binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(k[8:]), binary.BigEndian.Uint64(k[13:])
		n := decodeCounts(v)
		if err := addCounts(companyDays, statsCompanyDayKey(company, day), n); err != nil {
			return err
		}
		return addCounts(deviceDays, statsDeviceDayKey(company, day, dev), n)
	})
}
