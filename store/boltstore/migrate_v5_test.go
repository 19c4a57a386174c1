package boltstore

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// expectedStats counts the stored messages the way the counters' rules say,
// walking them: per company and per device registration.
func expectedStats(t *testing.T, s *Store) (byCompany map[uint64]Counts, byDevice map[[2]uint64]Counts) {
	t.Helper()
	byCompany, byDevice = map[uint64]Counts{}, map[[2]uint64]Counts{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMessages).ForEach(func(_, v []byte) error {
			var m Message
			if err := jsonUnmarshal(v, &m); err != nil {
				return err
			}
			var c Counts
			switch {
			case m.Direction == Inbound:
				c.Received = 1
			case m.Status == MsgSent:
				c.Sent, c.Segments = 1, uint64(m.Segments)
			case m.Status == MsgDelivered:
				c.Sent, c.Delivered, c.Segments = 1, 1, uint64(m.Segments)
			case m.Status == MsgFailed:
				c.Failed = 1
			case m.Status == MsgExpired:
				c.Expired = 1
			}
			all := byCompany[m.CompanyID]
			all.Add(c)
			byCompany[m.CompanyID] = all
			d := byDevice[[2]uint64{m.CompanyID, m.DeviceID}]
			d.Add(c)
			byDevice[[2]uint64{m.CompanyID, m.DeviceID}] = d
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return byCompany, byDevice
}

func checkStats(t *testing.T, s *Store) {
	t.Helper()
	byCompany, byDevice := expectedStats(t, s)
	if len(byCompany) < 2 {
		t.Fatalf("the fixture has messages of %d companies, want 2", len(byCompany))
	}
	for company, want := range byCompany {
		if want.Sent+want.Received+want.Failed == 0 {
			t.Fatalf("company %d: nothing to count in the fixture", company)
		}
		all, err := s.StatsTotals(company)
		if err != nil {
			t.Fatal(err)
		}
		if all != want {
			t.Errorf("company %d all-time counters %+v, want %+v", company, all, want)
		}
		got, err := s.Stats(StatsQuery{CompanyID: company, From: StatsDay(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)), To: StatsDay(time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))})
		if err != nil {
			t.Fatal(err)
		}
		if got.Totals != want {
			t.Errorf("company %d day counters sum to %+v, want %+v", company, got.Totals, want)
		}
		for dev, c := range got.ByDevice {
			if w := byDevice[[2]uint64{company, dev}]; c != w {
				t.Errorf("company %d device %d: %+v, want %+v", company, dev, c, w)
			}
		}
		names, err := s.StatsDevices(company)
		if err != nil {
			t.Fatal(err)
		}
		named := map[uint64]bool{}
		for _, d := range names {
			named[d.ID] = true
		}
		for key := range byDevice {
			if key[0] == company && !named[key[1]] {
				t.Errorf("company %d: device %d has messages but no name entry", company, key[1])
			}
		}
	}
}

// TestMigrateV5CountsStoredMessages opens a store written before counters
// existed and checks the backfilled counters against a walk of its messages.
func TestMigrateV5CountsStoredMessages(t *testing.T) {
	t.Parallel()
	s, err := Open(copyV1(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkStats(t, s)

	// Again in steps of two messages, as a resumed migration would run.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range statsBuckets {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	steps := 0
	for done := false; !done; steps++ {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			done, err = migrateStatsIn(tx, 2)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if steps < 3 {
		t.Fatalf("the migration took %d steps, want several", steps)
	}
	checkStats(t, s)
}
