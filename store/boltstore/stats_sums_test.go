package boltstore

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// statsSums is what the company, device and user day sums must hold: the
// sums of the full day records (by channel, device and user), added up here.
type statsSums struct {
	company map[string]Counts // by statsCompanyDayKey
	device  map[string]Counts // by statsDeviceDayKey
	user    map[string]Counts // by statsUserDayKey
}

func sumStatsDays(t *testing.T, s *Store) statsSums {
	t.Helper()
	out := statsSums{company: map[string]Counts{}, device: map[string]Counts{}, user: map[string]Counts{}}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStatsDays).ForEach(func(k, v []byte) error {
			company, day, dev := binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(k[8:]), binary.BigEndian.Uint64(k[13:])
			user := binary.BigEndian.Uint64(k[21:])
			n := decodeCounts(v)
			for _, r := range []struct {
				sums map[string]Counts
				key  []byte
			}{
				{out.company, statsCompanyDayKey(company, day)},
				{out.device, statsDeviceDayKey(company, day, dev)},
				{out.user, statsUserDayKey(company, user, day, dev)},
			} {
				sums, key := r.sums, string(r.key)
				c := sums[key]
				c.Add(n)
				sums[key] = c
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkStatsSums checks that the company, device and user day sums hold exactly
// the sums of the full day records, and returns how many company days there
// are.
func checkStatsSums(t *testing.T, s *Store) int {
	t.Helper()
	want := sumStatsDays(t, s)
	if len(want.company) == 0 {
		t.Fatal("no counters to check the sums against")
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range []struct {
			name []byte
			want map[string]Counts
		}{{bucketStatsCompanyDays, want.company}, {bucketStatsDeviceDays, want.device}, {bucketStatsUserDays, want.user}} {
			bucket := tx.Bucket(b.name)
			if bucket == nil {
				t.Fatalf("no bucket %s", b.name)
			}
			got := map[string]Counts{}
			if err := bucket.ForEach(func(k, v []byte) error {
				got[string(k)] = decodeCounts(v)
				return nil
			}); err != nil {
				return err
			}
			if !maps.Equal(got, b.want) {
				t.Errorf("%s holds %d records %v, want the %d sums of the day counters %v", b.name, len(got), got, len(b.want), b.want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return len(want.company)
}

// statsFromDays answers q from the full day records, as Stats did before it
// read the sums.
func statsFromDays(t *testing.T, s *Store, q StatsQuery) Stats {
	t.Helper()
	out := Stats{ByDevice: map[uint64]Counts{}, Days: make([]Counts, q.To-q.From+1)}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStatsDays).ForEach(func(k, v []byte) error {
			company, day := binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(k[8:])
			dev, user := binary.BigEndian.Uint64(k[13:]), binary.BigEndian.Uint64(k[21:])
			if company != q.CompanyID || day < q.From || day > q.To || (q.Users != nil && !q.Users[user]) || (q.Devices != nil && !q.Devices[dev]) {
				return nil
			}
			addStats(&out, q, day, dev, decodeCounts(v))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameStats(a, b Stats) bool {
	if a.Totals != b.Totals || len(a.Days) != len(b.Days) || !maps.Equal(a.ByDevice, b.ByDevice) {
		return false
	}
	for i := range a.Days {
		if a.Days[i] != b.Days[i] {
			return false
		}
	}
	return true
}

// checkStatsAnswers checks Stats against the full day records for every
// kind of filter of the company: none, a few devices (read point by point),
// devices over a range too long for that (walked), users, and both.
func checkStatsAnswers(t *testing.T, s *Store, company uint64, from, to uint32, devices []uint64, user uint64) {
	t.Helper()
	devs := map[uint64]bool{1 << 40: true} // and one with no counts
	for _, d := range devices {
		devs[d] = true
	}
	long := StatsQuery{CompanyID: company, From: to - 3000, To: to, Devices: devs}
	if len(devs)*int(long.To-long.From+1) <= maxDeviceDayReads {
		t.Fatalf("the long range reads %d device days point by point; the test wants it walked", len(devs)*int(long.To-long.From+1))
	}
	for name, q := range map[string]StatsQuery{
		"no filter":          {CompanyID: company, From: from, To: to},
		"devices":            {CompanyID: company, From: from, To: to, Devices: devs},
		"devices, long":      long,
		"no device":          {CompanyID: company, From: from, To: to, Devices: map[uint64]bool{}},
		"unknown device":     {CompanyID: company, From: from, To: to, Devices: map[uint64]bool{1 << 40: true}},
		"users":              {CompanyID: company, From: from, To: to, Users: map[uint64]bool{user: true, 0: true}},
		"users and devices":  {CompanyID: company, From: from, To: to, Users: map[uint64]bool{user: true}, Devices: devs},
		"one day":            {CompanyID: company, From: to, To: to},
		"days before any":    {CompanyID: company, From: from - 100, To: from - 1},
		"another company's?": {CompanyID: company + 1000, From: from, To: to},
	} {
		got, err := s.Stats(q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := statsFromDays(t, s, q); !sameStats(got, want) {
			t.Errorf("%s: Stats gave %+v, the day counters %+v", name, got, want)
		}
	}
	all, err := s.Stats(StatsQuery{CompanyID: company, From: from, To: to})
	if err != nil || all.Totals.IsZero() {
		t.Fatalf("no counts over the range (%v): the fixture counts nothing", err)
	}
}

// statsMix feeds the counters through the write paths: two companies, sends
// by a user and by the API key that go sent, delivered (straight from
// sending too), failed and expired over three days, repeated reports,
// inbound messages and a re-sent one, and a device deleted with messages
// queued and sending. It returns A's company and user, its devices'
// registration ids (the deleted one included) and the days it spans.
func statsMix(t *testing.T, s *Store) (company, user uint64, devices []uint64, from, to uint32) {
	t.Helper()
	day1 := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	at := day1
	clock := func() time.Time { return at }
	a, ua := newCompany(t, s, "sums-a@example.com", "key-sums-a")
	b, _ := newCompany(t, s, "sums-b@example.com", "key-sums-b")
	if err := s.ProvisionDevices([]Device{
		{Fingerprint: "sums-a1", CompanyID: a.ID, Status: DeviceActive, TokenHash: []byte("t-a1")},
		{Fingerprint: "sums-a2", CompanyID: a.ID, Status: DeviceActive, TokenHash: []byte("t-a2")},
		{Fingerprint: "sums-b1", CompanyID: b.ID, Status: DeviceActive, TokenHash: []byte("t-b1")},
	}); err != nil {
		t.Fatal(err)
	}
	a1, a2, b1 := deviceOf(t, s, a.ID, "sums-a1"), deviceOf(t, s, a.ID, "sums-a2"), deviceOf(t, s, b.ID, "sums-b1")
	n := 0
	send := func(c Company, d Device, userID uint64, segments int) Message {
		t.Helper()
		n++
		m := Message{UUID: fmt.Sprint("sums-", n), CompanyID: c.ID, UserID: userID, Device: d.Fingerprint, Channel: "sms", Phone: "+15550100001",
			Text: "hello", SIMSlot: "SIM1", Segments: segments, ExpiresAt: at.Add(36 * time.Hour)}
		out, _, err := s.Enqueue(&m, IdempotencyKey{}, clock, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	report := func(m Message, statuses ...string) {
		t.Helper()
		for _, st := range statuses {
			if _, _, err := s.Transition(m.CompanyID, m.DeviceID, m.UUID, st, "", "", at); err != nil {
				t.Fatalf("%s %s: %v", m.UUID, st, err)
			}
		}
	}
	inbound := func(c Company, d Device, clientID string) {
		t.Helper()
		m := Message{UUID: "sums-in-" + clientID, CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100002", Text: "hi", SIMSlot: "SIM1", ClientID: clientID}
		if _, _, err := s.StoreInbound(&m, clock); err != nil {
			t.Fatal(err)
		}
	}

	delivered := send(a, a1, ua.ID, 2)
	straight := send(a, a1, 0, 1)
	failed := send(a, a2, ua.ID, 3)
	expires := send(a, a2, 0, 1)
	other := send(b, b1, 0, 1)
	report(delivered, MsgSending, MsgSent)
	report(straight, MsgSending)
	report(failed, MsgSending, MsgSent)
	inbound(a, a1, "in-1")
	inbound(b, b1, "in-b")

	at = day1.Add(24 * time.Hour) // the next day
	report(delivered, MsgDelivered, MsgDelivered, MsgSent)
	report(straight, MsgDelivered)
	report(failed, MsgFailed)
	report(other, MsgSending, MsgDelivered)
	inbound(a, a1, "in-1") // re-sent: counted once
	inbound(a, a2, "in-2")
	queued, sending := send(a, a2, ua.ID, 1), send(a, a2, 0, 1)
	report(sending, MsgSending)

	at = day1.Add(48 * time.Hour)
	if got, err := s.ExpireQueued(at, 100); err != nil || len(got) != 1 || got[0].UUID != expires.UUID {
		t.Fatalf("expired %v (%v), want %s", got, err, expires.UUID)
	}
	if _, err := s.DeleteDevice(a.ID, a2.Fingerprint, at); err != nil { // fails queued and sending
		t.Fatal(err)
	}
	for _, m := range []Message{queued, sending} {
		if got, err := s.MessageByUUID(a.ID, m.UUID); err != nil || got.Status != MsgFailed {
			t.Fatalf("%s after the device's deletion: %+v (%v), want failed", m.UUID, got, err)
		}
	}
	// The handset paired again: a new registration of the same fingerprint.
	if err := s.ProvisionDevices([]Device{{Fingerprint: "sums-a2", CompanyID: a.ID, Status: DeviceActive, TokenHash: []byte("t-a2-again")}}); err != nil {
		t.Fatal(err)
	}
	a2again := deviceOf(t, s, a.ID, "sums-a2")
	report(send(a, a2again, ua.ID, 1), MsgSending, MsgSent, MsgDelivered)
	inbound(a, a2again, "in-3")
	return a.ID, ua.ID, []uint64{a2.ID, a2again.ID}, StatsDay(day1), StatsDay(at)
}

// TestStatsSumsFollowTheCounters: after a mix of sends, reports, expiries,
// inbound messages and a device's deletion, each company's and device's day
// sums equal the sums of the day counters, and every analytics question
// answers what the day counters say.
func TestStatsSumsFollowTheCounters(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	company, user, devices, from, to := statsMix(t, s)
	if days := checkStatsSums(t, s); days < 5 {
		t.Fatalf("%d company days counted, want those of both companies over three days", days)
	}
	checkStatsAnswers(t, s, company, from, to, devices, user)
	sum, err := s.DashboardSummary(company, StatsDate(from), StatsDate(to+1), 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := statsFromDays(t, s, StatsQuery{CompanyID: company, From: from, To: to}).Totals.Segments; sum.PeriodSegments != want || want == 0 {
		t.Errorf("the dashboard's period segments are %d, the day counters' %d", sum.PeriodSegments, want)
	}
}

// TestMigrateV6SumsAStoreOfSchema5 opens a store of schema 5 made by today's
// write paths, with its sums gone, then with sums already there (as a store
// migrated from before schema 5 has them), then runs the migration in small
// steps: each time it rolls the sums up from the day counters, once, and the
// answers stay what they were.
func TestMigrateV6SumsAStoreOfSchema5(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	company, user, devices, from, to := statsMix(t, s)
	before, err := s.Stats(StatsQuery{CompanyID: company, From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	for _, drop := range []bool{true, false} {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			if drop {
				for _, name := range [][]byte{bucketStatsCompanyDays, bucketStatsDeviceDays} {
					if err := tx.DeleteBucket(name); err != nil {
						return err
					}
				}
			}
			return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(5))
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, dir)
		if v, err := s.Version(); err != nil || v != SchemaVersion() {
			t.Fatalf("version %d (%v) after the migration, want %d", v, err, SchemaVersion())
		}
		checkStatsSums(t, s)
		checkStatsAnswers(t, s, company, from, to, devices, user)
		after, err := s.Stats(StatsQuery{CompanyID: company, From: from, To: to})
		if err != nil || !sameStats(after, before) {
			t.Fatalf("sums dropped %v: the analytics answer %+v (%v) after the migration, %+v before", drop, after, err, before)
		}
	}

	// Again in steps of three counter records, as a resumed migration runs.
	steps := 0
	for done := false; !done; steps++ {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			done, err = migrateStatsSumsIn(tx, 3)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if steps < 4 {
		t.Fatalf("the migration took %d steps, want several", steps)
	}
	checkStatsSums(t, s)
	checkStatsAnswers(t, s, company, from, to, devices, user)
}

// TestMigrateV6SumsTheV1Store: the schema 1 fixture, counted by the
// migration to schema 5, gets the same sums.
func TestMigrateV6SumsTheV1Store(t *testing.T) {
	t.Parallel()
	s := open(t, copyV1(t))
	checkStatsSums(t, s)
	companies, err := s.CompanyIDs()
	if err != nil || len(companies) < 2 {
		t.Fatalf("companies %v (%v), want the fixture's two", companies, err)
	}
	for _, c := range companies {
		regs, err := s.StatsDevices(c)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, r := range regs {
			ids = append(ids, r.ID)
		}
		from, to := StatsDay(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)), StatsDay(time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
		checkStatsAnswers(t, s, c, from, to, ids, 1)
	}
}

// TestStatsUsersFilterReadsItsUsersDays: a users filter reads the day sums
// of its users on each device, not the records of every user of the range:
// of 40 users sending through 30 devices over 10 days, one user's answer
// reads that user's 10 days on the 3 devices it used, and still answers what
// the full day records say, alone, with a devices filter and with the
// inbound messages' user.
func TestStatsUsersFilterReadsItsUsersDays(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "users-days@example.com", "key-users-days")
	const users, devices, days = 40, 30, 10
	from := StatsDay(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	to := from + days - 1
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for day := from; day <= to; day++ {
			at := StatsDate(day).Add(time.Hour)
			for u := uint64(1); u <= users; u++ {
				for i := range uint64(3) {
					dev := 1 + (u*7+i)%devices
					m := Message{CompanyID: c.ID, UserID: u, DeviceID: dev, Device: fmt.Sprint("d-", dev), Channel: []string{"sms", "whatsapp", "imessage"}[i], Direction: Outbound, Segments: 1}
					if err := count(tx, m, at, Counts{Sent: u, Delivered: 1, Segments: 2}); err != nil {
						return err
					}
				}
				in := Message{CompanyID: c.ID, DeviceID: 1 + u%devices, Device: "in", Channel: "sms", Direction: Inbound}
				if err := count(tx, in, at, Counts{Received: 1}); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkStatsSums(t, s)
	const user = 17
	devs := map[uint64]bool{1 + (user*7)%devices: true, 5: true}
	for name, tc := range map[string]struct {
		q        StatsQuery
		maxReads int
	}{
		"one user":               {StatsQuery{CompanyID: c.ID, From: from, To: to, Users: map[uint64]bool{user: true}}, 3 * days},
		"one user, a day":        {StatsQuery{CompanyID: c.ID, From: to, To: to, Users: map[uint64]bool{user: true}}, 3},
		"one user and a device":  {StatsQuery{CompanyID: c.ID, From: from, To: to, Users: map[uint64]bool{user: true}, Devices: devs}, 3 * days},
		"two users and inbound":  {StatsQuery{CompanyID: c.ID, From: from + 2, To: to - 2, Users: map[uint64]bool{user: true, 3: true, StatsNoUser: true}}, 2*3*(days-4) + devices*(days-4)},
		"a user of nothing":      {StatsQuery{CompanyID: c.ID, From: from, To: to, Users: map[uint64]bool{users + 1: true}}, 0},
		"another company's user": {StatsQuery{CompanyID: c.ID + 1, From: from, To: to, Users: map[uint64]bool{user: true}}, 0},
	} {
		got, err := s.Stats(tc.q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.RecordsRead > tc.maxReads {
			t.Errorf("%s: read %d day records, want at most %d: those of its users only", name, got.RecordsRead, tc.maxReads)
		}
		if want := statsFromDays(t, s, tc.q); !sameStats(got, want) {
			t.Errorf("%s: Stats gave %+v, the day counters %+v", name, got, want)
		}
	}
	if got, err := s.Stats(StatsQuery{CompanyID: c.ID, From: from, To: to, Users: map[uint64]bool{user: true}}); err != nil || got.Totals.Sent != user*3*days {
		t.Fatalf("user %d sent %d (%v), want %d", user, got.Totals.Sent, err, user*3*days)
	}
}

// TestMigrateV8SumsAStoreOfSchema7 opens a store of schema 7 made by today's
// write paths, with its user sums gone, then with them already there (as a
// store migrated from before schema 5 has them), then runs the migration in
// small steps: each time it rolls the sums up from the day counters, once,
// and the answers stay what they were.
func TestMigrateV8SumsAStoreOfSchema7(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	company, user, devices, from, to := statsMix(t, s)
	q := StatsQuery{CompanyID: company, From: from, To: to, Users: map[uint64]bool{user: true, 0: true}}
	before, err := s.Stats(q)
	if err != nil || before.Totals.IsZero() {
		t.Fatalf("the users' answer %+v (%v) before the migration, want counts", before, err)
	}
	for _, drop := range []bool{true, false} {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			if drop {
				if err := tx.DeleteBucket(bucketStatsUserDays); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put(keySchemaVersion, itob(7))
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, dir)
		if v, err := s.Version(); err != nil || v != SchemaVersion() {
			t.Fatalf("version %d (%v) after the migration, want %d", v, err, SchemaVersion())
		}
		checkStatsSums(t, s)
		checkStatsAnswers(t, s, company, from, to, devices, user)
		if after, err := s.Stats(q); err != nil || !sameStats(after, before) {
			t.Fatalf("sums dropped %v: the users' answer %+v (%v) after the migration, %+v before", drop, after, err, before)
		}
	}

	steps := 0
	for done := false; !done; steps++ {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			done, err = migrateStatsUserSumsIn(tx, 3)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if steps < 4 {
		t.Fatalf("the migration took %d steps, want several", steps)
	}
	checkStatsSums(t, s)
	checkStatsAnswers(t, s, company, from, to, devices, user)
}

// TestStatsWithoutDevicesReadsTheCompanyDays: a question that needs only
// the totals and the series (the console's overview) reads one record a
// day, whatever the number of devices, and gets what the full answer says;
// the full answer reads each device's days besides.
func TestStatsWithoutDevicesReadsTheCompanyDays(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	c, _ := newCompany(t, s, "no-devices@example.com", "key-no-devices")
	const devices, days = 200, 10
	from := StatsDay(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	to := from + days - 1
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for dev := uint64(1); dev <= devices; dev++ {
			for _, day := range []uint32{from + uint32(dev%days), to} {
				m := Message{CompanyID: c.ID, DeviceID: dev, Device: fmt.Sprint("d-", dev), Channel: "sms", Direction: Outbound, Segments: 1}
				if err := count(tx, m, StatsDate(day).Add(time.Hour), Counts{Sent: 1, Segments: 1}); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	full, err := s.Stats(StatsQuery{CompanyID: c.ID, From: from, To: to})
	if err != nil || len(full.ByDevice) != devices || full.Totals.Sent != 2*devices {
		t.Fatalf("the full answer: %d devices, %d sent (%v), want %d and %d", len(full.ByDevice), full.Totals.Sent, err, devices, 2*devices)
	}
	if full.RecordsRead < days+devices {
		t.Fatalf("the full answer read %d records, want the days and every device's", full.RecordsRead)
	}
	got, err := s.Stats(StatsQuery{CompanyID: c.ID, From: from, To: to, NoDevices: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.RecordsRead > days || len(got.ByDevice) != 0 || got.Totals != full.Totals || !slices.Equal(got.Days, full.Days) {
		t.Errorf("without devices: read %d records (want at most %d), %d devices (want none), totals %+v and days %v (want %+v and %v)",
			got.RecordsRead, days, len(got.ByDevice), got.Totals, got.Days, full.Totals, full.Days)
	}
}
