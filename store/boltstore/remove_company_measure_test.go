package boltstore

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store/conformance"
)

// TestMeasureRemovalCredentials measures what a company's removal pays for
// the buckets it reads whole in its first step and again in its last
// (api_keys, refresh_tokens, onetime_tokens, pairings, billing_customer,
// and mail_outbox until schema 14): five removals of a company of one user
// and one device, one step each (which reads them twice), from a store
// whose other companies fill those buckets (sizes below, with and without
// a week of mail), against the same from a store where they are empty. A
// measurement, not a test.
//
//	SIMRELAY_MEASURE=1 go test ./store/boltstore -run TestMeasureRemovalCredentials -v
func TestMeasureRemovalCredentials(t *testing.T) {
	if os.Getenv("SIMRELAY_MEASURE") == "" {
		t.Skip("a measurement: SIMRELAY_MEASURE=1 runs it")
	}
	const companies, tokens, links, pairs, customers = 10000, 20000, 1000, 1000, 2000
	fill := func(s *Store, mails int) {
		text := strings.Repeat("an SMS forwarded by mail ", 40) // 1 KB
		at := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
		for start := 0; start == 0 || start < mails; start += 10000 {
			if err := s.db.Update(func(tx *bolt.Tx) error {
				put := func(bucket []byte, k, v any) error {
					return putJSON(tx.Bucket(bucket), []byte(fmt.Sprint(k)), v)
				}
				if start == 0 {
					for i := range companies {
						if err := tx.Bucket(bucketAPIKeys).Put([]byte(fmt.Sprintf("other-key-%d", i)), itob(uint64(1_000_000+i))); err != nil {
							return err
						}
					}
					for i := range tokens {
						if err := put(bucketRefreshTokens, fmt.Sprintf("rt-%d", i), RefreshToken{UserID: uint64(1_000_000 + i), Family: "f", ExpiresAt: at}); err != nil {
							return err
						}
					}
					for i := range links {
						if err := put(bucketOneTimeTokens, fmt.Sprintf("ot-%d", i), OneTimeToken{UserID: uint64(1_000_000 + i), ExpiresAt: at}); err != nil {
							return err
						}
					}
					for i := range pairs {
						if err := put(bucketPairings, fmt.Sprintf("pc-%d", i), Pairing{CompanyID: uint64(1_000_000 + i), ExpiresAt: at}); err != nil {
							return err
						}
					}
					for i := range customers {
						if err := tx.Bucket(bucketCustomers).Put([]byte(fmt.Sprintf("cus_%d", i)), itob(uint64(1_000_000+i))); err != nil {
							return err
						}
					}
				}
				for i := start; i < min(start+10000, mails); i++ {
					m := Mail{ID: uint64(1_000_000 + i), CompanyID: uint64(1_000_000 + i%companies), To: "ops@example.com",
						Subject: "SMS from +15550000000", Text: text, State: MailSent, CreatedAt: at}
					if err := putJSON(tx.Bucket(bucketMailOutbox), itob(m.ID), m); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, mails := range []int{-1, 0, 100000} {
		s := open(t, t.TempDir())
		if mails >= 0 {
			fill(s, mails)
		}
		var took []time.Duration
		for range 5 {
			c, _ := conformance.Company(t, s)
			conformance.Device(t, s, c.ID, fmt.Sprintf("m-%d", c.ID))
			start := time.Now()
			r, err := s.RemoveCompanyStep(c.ID, 1000)
			took = append(took, time.Since(start).Round(10*time.Microsecond))
			if err != nil || !r.Done {
				t.Fatalf("removal: %+v, %v; want it done in one step", r, err)
			}
		}
		what := "empty"
		if mails >= 0 {
			what = fmt.Sprintf("%d API keys, %d refresh tokens, %d e-mailed links, %d pairing codes, %d mails of 1 KB, %d customers",
				companies, tokens, links, pairs, mails, customers)
		}
		t.Logf("%s: %v a removal", what, took)
	}
}
