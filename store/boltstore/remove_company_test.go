package boltstore

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store/conformance"
)

// unfilled are the buckets a company of every kind (conformance.FillCompany)
// writes nothing to: the file's own, and the payment provider's event ids,
// which name no company.
var unfilled = []string{"billing_events", "meta"}

// A company with a record of every kind is removed with every record of
// it: after the removal, every bucket of the file holds what it held
// before the company was made, byte for byte (so another company of every
// kind, made before, is as it was), and no key of a bucket keyed by
// company begins with its id; its records in the buckets keyed otherwise
// are found by the ids the fixture made.
func TestRemoveCompanyLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 7, 100000} {
		s := open(t, t.TempDir())
		conformance.FillCompany(t, s)
		before := dumpBuckets(t, s)
		gone := conformance.FillCompany(t, s)
		filled := dumpBuckets(t, s)
		written := map[string]bool{}
		for k, v := range filled {
			if w, ok := before[k]; !ok || w != v {
				written[strings.SplitN(k, " ", 2)[0]] = true
			}
		}
		if err := s.db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				switch listed := slices.Contains(unfilled, string(name)); {
				case !written[string(name)] && !listed:
					t.Errorf("the fixture wrote nothing to bucket %s", name)
				case written[string(name)] && listed:
					t.Errorf("unfilled lists bucket %s, which the fixture writes", name)
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}

		conformance.RemoveCompany(t, s, gone.Company.ID, limit)
		after := dumpBuckets(t, s)
		for k, v := range after {
			if w, ok := before[k]; !ok || w != v {
				t.Errorf("limit %d: left after the removal: %s = %q", limit, k, v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("limit %d: the removal took a record of another company: %s", limit, k)
			}
		}
		prefix := itob(gone.Company.ID)
		if err := s.db.View(func(tx *bolt.Tx) error {
			if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				if n := countPrefix(b, prefix, math.MaxInt); n > 0 && (!notCompanyKeyed[string(name)] || slices.Contains([]string{"companies", "company_users", "company_emails"}, string(name))) {
					t.Errorf("limit %d: bucket %s still has %d keys of company %d", limit, name, n, gone.Company.ID)
				}
				return nil
			}); err != nil {
				return err
			}
			for _, m := range gone.Messages {
				if tx.Bucket(bucketMessages).Get(itob(m.ID)) != nil || tx.Bucket(bucketMessageUUIDs).Get([]byte(m.UUID)) != nil {
					t.Errorf("limit %d: message %d (%s) is left", limit, m.ID, m.UUID)
				}
			}
			for _, u := range gone.Users {
				if tx.Bucket(bucketUsers).Get(itob(u.ID)) != nil || tx.Bucket(bucketUsersByEmail).Get([]byte(strings.ToLower(u.Email))) != nil {
					t.Errorf("limit %d: user %d (%s) is left", limit, u.ID, u.Email)
				}
			}
			for _, d := range gone.Devices {
				if tx.Bucket(bucketDevices).Get([]byte(d.Fingerprint)) != nil || tx.Bucket(bucketDeviceTokens).Get(d.TokenHash) != nil {
					t.Errorf("limit %d: device %s is left", limit, d.Fingerprint)
				}
			}
			for _, n := range gone.Numbers {
				if tx.Bucket(bucketAgentNumberIDs).Get([]byte(n.PublicID)) != nil {
					t.Errorf("limit %d: number %s is left", limit, n.PublicID)
				}
			}
			for _, b := range [][]byte{bucketMedia, bucketMediaChunks, bucketMediaOrphans, bucketWebhookDeliveries, bucketWebhookDue,
				bucketWebhookEvents, bucketWebhookEventRefs, bucketRefreshTokens, bucketTokenFamilies, bucketOneTimeTokens,
				bucketConsoleSessions, bucketPairings, bucketMailOutbox, bucketCustomers, bucketAPIKeys, bucketQueueExpiry, bucketScheduleDue} {
				_ = tx.Bucket(b).ForEach(func(k, v []byte) error {
					if bytes.Contains(v, []byte(gone.Customer)) || bytes.Contains(k, []byte(gone.Media.ID)) || bytes.Contains(v, gone.Company.APIKeyHash) {
						t.Errorf("limit %d: bucket %s keeps %x of the removed company", limit, b, k)
					}
					return nil
				})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
