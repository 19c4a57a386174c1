package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Stats sums the company's counters over a range of days, reading only the
// sums its question needs, whatever the number of messages behind them:
// with no filter, the company's days for the totals and the series and the
// devices' days for the sums by device; with a devices filter, those
// devices' days (none under NoDevices); with a users filter, those users'
// days on each device.
func (s *Store) Stats(q StatsQuery) (Stats, error) {
	out := Stats{ByDevice: map[uint64]Counts{}}
	if q.To < q.From {
		return out, nil
	}
	if q.To-q.From >= MaxStatsDays {
		return out, fmt.Errorf("store: stats over %d days, more than %d", q.To-q.From+1, MaxStatsDays)
	}
	out.Days = make([]Counts, q.To-q.From+1)
	err := s.view(func(tx *bolt.Tx) error {
		switch {
		case q.Users != nil:
			statsOfUsers(tx, q, &out)
		case q.Devices != nil:
			statsOfDevices(tx, q, &out)
		default:
			statsOfCompany(tx, q, &out)
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("store: stats of company %d: %w", q.CompanyID, err)
	}
	if q.NoDevices {
		clear(out.ByDevice) // a filter's sums by device were needed on the way
	}
	return out, nil
}

// addStats counts n on day of the range, for device dev.
func addStats(st *Stats, q StatsQuery, day uint32, dev uint64, n Counts) {
	st.Totals.Add(n)
	st.Days[day-q.From].Add(n)
	d := st.ByDevice[dev]
	d.Add(n)
	st.ByDevice[dev] = d
}

// statsOfCompany reads the company's day sums (one record a day) for the
// totals and the series, and the devices' day sums for ByDevice.
func statsOfCompany(tx *bolt.Tx, q StatsQuery, out *Stats) {
	company := itob(q.CompanyID)
	c := tx.Bucket(bucketStatsCompanyDays).Cursor()
	for k, v := c.Seek(statsCompanyDayKey(q.CompanyID, q.From)); k != nil && bytes.HasPrefix(k, company); k, v = c.Next() {
		day := binary.BigEndian.Uint32(k[8:])
		if day > q.To {
			break
		}
		n := decodeCounts(v)
		out.Totals.Add(n)
		out.Days[day-q.From].Add(n)
		out.RecordsRead++
	}
	if q.NoDevices {
		return
	}
	// A fleet has thousands of devices with days in the range: their sums
	// are added up in a slice beside the company's registrations (in id
	// order, as each day's records are), and only then put in the map,
	// made at its size.
	var ids []uint64
	walkPrefix(tx.Bucket(bucketStatsDevices), company, func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[8:]))
		return true
	})
	sums := make([]Counts, len(ids))
	counted, at, prevDay := 0, 0, uint32(0)
	strays := map[uint64]Counts{}
	c = tx.Bucket(bucketStatsDeviceDays).Cursor()
	for k, v := c.Seek(statsDeviceDayKey(q.CompanyID, q.From, 0)); k != nil && bytes.HasPrefix(k, company); k, v = c.Next() {
		day := binary.BigEndian.Uint32(k[8:])
		if day > q.To {
			break
		}
		if day != prevDay {
			at, prevDay = 0, day
		}
		out.RecordsRead++
		dev := binary.BigEndian.Uint64(k[12:])
		i, found := slices.BinarySearch(ids[at:], dev)
		if at += i; !found { // counted and never named: no write does that, but count it all the same
			d := strays[dev]
			d.Add(decodeCounts(v))
			strays[dev] = d
			continue
		}
		if sums[at].IsZero() {
			counted++
		}
		sums[at].Add(decodeCounts(v))
	}
	out.ByDevice = make(map[uint64]Counts, counted+len(strays))
	for i, n := range sums {
		if !n.IsZero() {
			out.ByDevice[ids[i]] = n
		}
	}
	maps.Copy(out.ByDevice, strays)
}

// maxDeviceDayReads bounds the point reads of a devices filter; a larger
// filter walks the range's device sums instead.
const maxDeviceDayReads = 4096

// statsOfDevices reads the day sums of the devices of the filter: one
// point read per device and day for a small filter (a handful of phones),
// else a walk of every device's sums of the range.
func statsOfDevices(tx *bolt.Tx, q StatsQuery, out *Stats) {
	b := tx.Bucket(bucketStatsDeviceDays)
	if len(q.Devices)*len(out.Days) <= maxDeviceDayReads {
		for dev, ok := range q.Devices {
			for day := q.From; ok && day <= q.To; day++ {
				out.RecordsRead++
				if v := b.Get(statsDeviceDayKey(q.CompanyID, day, dev)); v != nil {
					addStats(out, q, day, dev, decodeCounts(v))
				}
			}
		}
		return
	}
	company := itob(q.CompanyID)
	c := b.Cursor()
	for k, v := c.Seek(statsDeviceDayKey(q.CompanyID, q.From, 0)); k != nil && bytes.HasPrefix(k, company); k, v = c.Next() {
		day, dev := binary.BigEndian.Uint32(k[8:]), binary.BigEndian.Uint64(k[12:])
		if day > q.To {
			break
		}
		out.RecordsRead++
		if q.Devices[dev] {
			addStats(out, q, day, dev, decodeCounts(v))
		}
	}
}

// statsOfUsers reads the day sums of the users of the filter on each
// device: each user's records of the range lie together, so it reads those
// and no other user's.
func statsOfUsers(tx *bolt.Tx, q StatsQuery, out *Stats) {
	c := tx.Bucket(bucketStatsUserDays).Cursor()
	for user, ok := range q.Users {
		if !ok {
			continue
		}
		prefix := statsUserDayKey(q.CompanyID, user, 0, 0)[:16]
		for k, v := c.Seek(statsUserDayKey(q.CompanyID, user, q.From, 0)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			day, dev := binary.BigEndian.Uint32(k[16:]), binary.BigEndian.Uint64(k[20:])
			if day > q.To {
				break
			}
			out.RecordsRead++
			if q.Devices == nil || q.Devices[dev] {
				addStats(out, q, day, dev, decodeCounts(v))
			}
		}
	}
}

// StatsTotals is the company's all-time counters.
func (s *Store) StatsTotals(companyID uint64) (Counts, error) {
	var c Counts
	err := s.view(func(tx *bolt.Tx) error {
		c = decodeCounts(tx.Bucket(bucketStatsTotals).Get(itob(companyID)))
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("store: stats totals of company %d: %w", companyID, err)
	}
	return c, nil
}

// StatsDevices lists every registration of the company that was paired or
// counted since counters exist (deleted ones too), in id order, with the
// name each had when last written.
func (s *Store) StatsDevices(companyID uint64) ([]StatsDevice, error) {
	var out []StatsDevice
	err := s.view(func(tx *bolt.Tx) error {
		// Names are kept current by every write of a live device, so no
		// device record is read: a company with thousands stays cheap. The
		// live registrations' index is keyed as the names are (company, id),
		// so one walk of each, side by side, tells which are live, with no
		// point read per registration.
		company := itob(companyID)
		live := tx.Bucket(bucketCompanyDeviceIDs).Cursor()
		lk, lv := live.Seek(company)
		walkPrefix(tx.Bucket(bucketStatsDevices), company, func(k, v []byte) bool {
			for lk != nil && bytes.HasPrefix(lk, company) && bytes.Compare(lk, k) < 0 {
				lk, lv = live.Next()
			}
			both := string(v) // one string for both: the fingerprint and the name share it
			fp, name, _ := strings.Cut(both, "\x00")
			d := StatsDevice{ID: btoi(k[8:]), Fingerprint: fp, Name: name}
			d.Live = bytes.Equal(lk, k) && string(lv) == fp
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

// DashboardSummary reads the dashboard's figures in one transaction: the
// all-time counters, the active devices (two key-only index walks), the
// segments sent on the UTC days from from's day up to, not including, to's
// day (the company's day sums, one record a day), and the newest recent
// events, at most limit.
func (s *Store) DashboardSummary(companyID uint64, from, to time.Time, limit int) (Summary, error) {
	var out Summary
	err := s.view(func(tx *bolt.Tx) error {
		out.Totals = decodeCounts(tx.Bucket(bucketStatsTotals).Get(itob(companyID)))
		out.ActiveDevices = activeDevices(tx, companyID)
		a, b := StatsDay(from), StatsDay(to)
		company := itob(companyID)
		c := tx.Bucket(bucketStatsCompanyDays).Cursor()
		for k, v := c.Seek(statsCompanyDayKey(companyID, a)); k != nil && b > a && bytes.HasPrefix(k, company); k, v = c.Next() {
			if binary.BigEndian.Uint32(k[8:]) >= b {
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

// Generation is the id of the store's last committed write. Reads made
// while it stays the same see the same data: an answer computed from reads
// that all began after Generation returned g holds for as long as
// Generation still returns g.
func (s *Store) Generation() (uint64, error) {
	var g uint64
	err := s.view(func(tx *bolt.Tx) error {
		g = uint64(tx.ID())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: generation: %w", err)
	}
	return g, nil
}
