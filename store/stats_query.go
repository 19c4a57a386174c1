package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// StatsQuery selects counters of one company over the days From to To
// (StatsDay numbers, both included). A nil set matches all; a non-nil empty
// one matches nothing.
type StatsQuery struct {
	CompanyID uint64
	From, To  uint32
	Users     map[uint64]bool
	Devices   map[uint64]bool // device registration ids
}

// MaxStatsDays bounds one Stats query, which holds a counter per day: ten
// years, far beyond any range the API lets through.
const MaxStatsDays = 3660

// Stats is the sum of the counters a StatsQuery selects.
type Stats struct {
	Totals   Counts
	Days     []Counts          // one per day from From, zero days included
	ByDevice map[uint64]Counts // by device registration id, only those counted
}

// Stats sums the company's counters over a range of days: one prefix walk
// of the days in range, whatever the number of messages behind them.
func (s *Store) Stats(q StatsQuery) (Stats, error) {
	out := Stats{ByDevice: map[uint64]Counts{}}
	if q.To < q.From {
		return out, nil
	}
	if q.To-q.From >= MaxStatsDays {
		return out, fmt.Errorf("store: stats over %d days, more than %d", q.To-q.From+1, MaxStatsDays)
	}
	out.Days = make([]Counts, q.To-q.From+1)
	err := s.db.View(func(tx *bolt.Tx) error {
		company := itob(q.CompanyID)
		c := tx.Bucket(bucketStatsDays).Cursor()
		for k, v := c.Seek(statsDayKey(q.CompanyID, q.From, 0, 0, 0)); k != nil && bytes.HasPrefix(k, company); k, v = c.Next() {
			if len(k) != 29 {
				continue
			}
			day := binary.BigEndian.Uint32(k[8:])
			if day > q.To {
				break
			}
			dev, user := binary.BigEndian.Uint64(k[13:]), binary.BigEndian.Uint64(k[21:])
			if (q.Users != nil && !q.Users[user]) || (q.Devices != nil && !q.Devices[dev]) {
				continue
			}
			n := decodeCounts(v)
			out.Totals.add(n)
			out.Days[day-q.From].add(n)
			d := out.ByDevice[dev]
			d.add(n)
			out.ByDevice[dev] = d
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("store: stats of company %d: %w", q.CompanyID, err)
	}
	return out, nil
}

// StatsTotals is the company's all-time counters.
func (s *Store) StatsTotals(companyID uint64) (Counts, error) {
	var c Counts
	err := s.db.View(func(tx *bolt.Tx) error {
		c = decodeCounts(tx.Bucket(bucketStatsTotals).Get(itob(companyID)))
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("store: stats totals of company %d: %w", companyID, err)
	}
	return c, nil
}

// StatsDevice is a device registration as the counters name it.
type StatsDevice struct {
	ID          uint64
	Fingerprint string
	Name        string
	Live        bool // the company's live registration of the fingerprint
}

// StatsDevices lists every registration of the company that was paired or
// counted since counters exist (deleted ones too), in id order, with the
// name each had when last written.
func (s *Store) StatsDevices(companyID uint64) ([]StatsDevice, error) {
	var out []StatsDevice
	err := s.db.View(func(tx *bolt.Tx) error {
		// Names are kept current by every write of a live device, so no
		// device record is read: a company with thousands stays cheap.
		live := tx.Bucket(bucketCompanyDeviceIDs)
		walkPrefix(tx.Bucket(bucketStatsDevices), itob(companyID), func(k, v []byte) bool {
			fp, name, _ := bytes.Cut(v, []byte{0})
			d := StatsDevice{ID: btoi(k[8:]), Fingerprint: string(fp), Name: string(name)}
			d.Live = bytes.Equal(live.Get(k), fp)
			out = append(out, d)
			return true
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: counted devices of company %d: %w", companyID, err)
	}
	return out, nil
}

// Summary is the dashboard's figures of one company.
type Summary struct {
	Totals        Counts // all time
	ActiveDevices int
	// PeriodSegments are the segments of the messages sent in the period.
	PeriodSegments uint64
	Recent         []Activity // newest first
}

// DashboardSummary reads the dashboard's figures in one transaction: the
// all-time counters, the active devices (two key-only index walks), the
// segments sent on the UTC days from from's day up to, not including, to's
// day, and the newest recent events, at most limit.
func (s *Store) DashboardSummary(companyID uint64, from, to time.Time, limit int) (Summary, error) {
	var out Summary
	err := s.db.View(func(tx *bolt.Tx) error {
		out.Totals = decodeCounts(tx.Bucket(bucketStatsTotals).Get(itob(companyID)))
		out.ActiveDevices = activeDevices(tx, companyID)
		a, b := StatsDay(from), StatsDay(to)
		company := itob(companyID)
		c := tx.Bucket(bucketStatsDays).Cursor()
		for k, v := c.Seek(statsDayKey(companyID, a, 0, 0, 0)); k != nil && b > a && bytes.HasPrefix(k, company); k, v = c.Next() {
			if len(k) == 29 && binary.BigEndian.Uint32(k[8:]) >= b {
				break
			}
			out.PeriodSegments += decodeCounts(v).Segments
		}
		var err error
		out.Recent, err = recentActivity(tx, companyID, limit)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("store: dashboard of company %d: %w", companyID, err)
	}
	return out, nil
}
