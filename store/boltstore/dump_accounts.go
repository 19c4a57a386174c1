package boltstore

// The dump's kinds of the accounts: companies, users, devices, pairings,
// subscriptions and usage, activity, stats, tokens, console sessions and
// secrets.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

func dumpCompanies(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketCompanies, func(_ []byte, c Company) error {
		return put(store.CopyCompany{Company: c})
	})
}

func dumpUsers(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	byEmail := tx.Bucket(bucketUsersByEmail)
	return eachRecord(tx, bucketUsers, func(_ []byte, u User) error {
		held := bytes.Equal(byEmail.Get(emailKey(u.Email)), itob(u.ID))
		return put(store.CopyUser{User: u, Held: held})
	})
}

// dumpDevices gives the live registrations, then the deleted ones the
// counters' names keep (stats_devices): their id, company, fingerprint and
// name are all that is left of them.
func dumpDevices(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	live := map[[16]byte]bool{}
	if err := eachRecord(tx, bucketDevices, func(_ []byte, d Device) error {
		live[[16]byte(pair(d.CompanyID, d.ID))] = true
		return put(store.CopyDevice{Device: d})
	}); err != nil {
		return err
	}
	return eachDeletedDevice(tx, live, func(d Device) error { return put(store.CopyDevice{Device: d, Deleted: true}) })
}

// eachDeletedDevice passes each registration the counters name that is not
// live to fn.
func eachDeletedDevice(tx *bolt.Tx, live map[[16]byte]bool, fn func(Device) error) error {
	return tx.Bucket(bucketStatsDevices).ForEach(func(k, v []byte) error {
		if len(k) != 16 || live[[16]byte(k)] {
			return nil
		}
		fp, name, _ := bytes.Cut(v, []byte{0})
		return fn(Device{ID: btoi(k[8:]), CompanyID: btoi(k[:8]), Fingerprint: string(fp), Name: string(name)})
	})
}

func dumpPairings(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketPairings, func(k []byte, p Pairing) error {
		return put(store.CopyPairing{Hash: bytes.Clone(k), Pairing: p})
	})
}

func dumpSubscriptions(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketSubscriptions, func(k []byte, sub Subscription) error {
		sub.CompanyID = btoi(k)
		return put(store.CopySubscription{Subscription: sub})
	})
}

func dumpPlanUsage(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketPlanUsage).ForEach(func(k, v []byte) error {
		if len(k) != 16 || len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %x", bucketPlanUsage, k)
		}
		return put(store.CopyPlanUsage{CompanyID: btoi(k[:8]), PeriodStart: time.Unix(int64(btoi(k[8:])), 0).UTC(), Used: int64(btoi(v))})
	})
}

func dumpStorageUsage(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketCompanyUsage).ForEach(func(k, v []byte) error {
		if len(k) != 16 || len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %x", bucketCompanyUsage, k)
		}
		return put(store.CopyStorageUsage{CompanyID: btoi(k[:8]), Day: uint32(btoi(k[8:])), Used: int64(btoi(v))})
	})
}

// activitySlots calls fn with each slot of the company's ring that holds an
// event, oldest first.
func activitySlots(tx *bolt.Tx, companyID uint64, fn func(slot uint64) error) error {
	var n uint64
	if v := tx.Bucket(bucketActivityHead).Get(itob(companyID)); len(v) == 8 {
		n = btoi(v)
	}
	for i := n - min(n, ActivityKeep); i < n; i++ {
		if err := fn(i % ActivityKeep); err != nil {
			return err
		}
	}
	return nil
}

func dumpActivity(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	ring := tx.Bucket(bucketActivity)
	return tx.Bucket(bucketActivityHead).ForEach(func(k, _ []byte) error {
		companyID := btoi(k)
		return activitySlots(tx, companyID, func(slot uint64) error {
			var a Activity
			if err := getJSON(ring, pair(companyID, slot), &a); err != nil {
				return fmt.Errorf("activity %d of company %d: %w", slot, companyID, err)
			}
			return put(store.CopyActivity{CompanyID: companyID, Activity: a})
		})
	})
}

func dumpStats(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketStatsDays).ForEach(func(k, v []byte) error {
		if len(k) != 29 {
			return fmt.Errorf("%s: malformed key %x", bucketStatsDays, k)
		}
		return put(store.CopyStats{
			CompanyID: btoi(k[:8]), Day: binary.BigEndian.Uint32(k[8:12]), Channel: k[12],
			DeviceID: btoi(k[13:21]), UserID: btoi(k[21:29]), Counts: decodeCounts(v),
		})
	})
}

func dumpTokenFamilies(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketTokenFamilies, func(k []byte, f TokenFamily) error {
		return put(store.CopyTokenFamily{Family: string(k), Token: f})
	})
}

func dumpRefreshTokens(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketRefreshTokens, func(k []byte, t RefreshToken) error {
		return put(store.CopyRefreshToken{Hash: bytes.Clone(k), Token: t})
	})
}

func dumpOneTimeTokens(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketOneTimeTokens, func(k []byte, t OneTimeToken) error {
		return put(store.CopyOneTimeToken{Hash: bytes.Clone(k), Token: t})
	})
}

func dumpConsoleSessions(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketConsoleSessions, func(k []byte, sess ConsoleSession) error {
		return put(store.CopyConsoleSession{Hash: bytes.Clone(k), Session: sess})
	})
}

func dumpSecrets(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	var err error
	walkPrefix(tx.Bucket(bucketMeta), []byte(secretPrefix), func(k, v []byte) bool {
		err = put(store.CopySecret{Name: string(k[len(secretPrefix):]), Value: bytes.Clone(v)})
		return err == nil
	})
	return err
}
