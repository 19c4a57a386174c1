package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestBulkRecipientsCapStatements: a bulk send from SIMs with a daily
// recipients cap, to a device or through a pool, costs the same statements
// for 300 messages as for 30: whether each recipient was sent to today
// already is read for the whole request, not one statement a message. The
// recipients come out counted exactly: the SIM's recipients today are the
// distinct numbers its sends went to.
func TestBulkRecipientsCapStatements(t *testing.T) {
	t.Parallel()
	s, stmts := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	fingerprints := map[uint64]string{}
	for _, fp := range []string{"rcap-dev", "rcap-a", "rcap-b"} {
		fingerprints[conformance.Device(t, s, c.ID, fp).ID] = fp
		if _, err := s.SetSIMCaps(c.ID, fp, map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 10000}}, conformance.T0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "rcap", Strategy: store.PoolRoundRobin, Members: []store.PoolMemberInput{
			{Device: "rcap-a", SIMSlot: "SIM1"}, {Device: "rcap-b", SIMSlot: "SIM1"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	phone := func(i int) string { return fmt.Sprintf("+1555040%04d", i) }
	for _, via := range []struct{ name, device, pool string }{{"a device", "rcap-dev", ""}, {"a pool", "", "rcap"}} {
		sentTo := map[uint64]map[string]bool{} // device id: the recipients its SIM1 sent to today
		bulk := func(name string, phones []string) int64 {
			t.Helper()
			ms := make([]store.Message, len(phones))
			for i, p := range phones {
				ms[i] = store.Message{UUID: fmt.Sprintf("rcap-%s-%s-%d", via.name, name, i), CompanyID: c.ID, Device: via.device, Pool: via.pool,
					SIMSlot: "SIM1", Channel: "sms", Phone: p, Text: "hello"}
			}
			n0 := stmts.n.Load()
			out, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
			if err != nil {
				t.Fatalf("%s, %s: %v", via.name, name, err)
			}
			for _, m := range out {
				if sentTo[m.DeviceID] == nil {
					sentTo[m.DeviceID] = map[string]bool{}
				}
				sentTo[m.DeviceID][m.Phone] = true
			}
			return stmts.n.Load() - n0
		}
		// 100 recipients sent to today already.
		var first []string
		for i := range 100 {
			first = append(first, phone(i))
		}
		bulk("first", first)
		// A third known, the rest new, each new one twice.
		costs := map[int]int64{}
		for _, n := range []int{30, 300} {
			phones := make([]string, n)
			for i := range phones {
				if i%3 == 0 {
					phones[i] = phone(i / 3)
				} else {
					phones[i] = phone(1000*n/30 + i/2)
				}
			}
			costs[n] = bulk(fmt.Sprint(n), phones)
		}
		t.Logf("%s: a bulk of 30 to SIMs with a recipients cap, %d statements; of 300, %d", via.name, costs[30], costs[300])
		if costs[30] != costs[300] {
			t.Errorf("%s: a bulk of 30 from SIMs with a recipients cap took %d statements, one of 300 %d: want the same", via.name, costs[30], costs[300])
		}
		for dev, phones := range sentTo {
			us, err := s.SIMUsages(c.ID, fingerprints[dev], conformance.T0)
			if err != nil || us[0].Recipients != int64(len(phones)) {
				t.Errorf("%s: %s's SIM1 counts %d recipients (%v), want the %d it sent to", via.name, fingerprints[dev], us[0].Recipients, err, len(phones))
			}
		}
	}
}

// TestSendAtRecipientsCapStatements: a single send to a recipient its SIM
// sent to today, from a SIM at its recipients cap, asks whether the SIM
// sent to the recipient once, as a send from a SIM below its cap does: the
// cap's check (allows) and the count (take) both asked it, a statement
// each.
func TestSendAtRecipientsCapStatements(t *testing.T) {
	t.Parallel()
	s, stmts := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	s.SetPlans(benchPlans{})
	c, _ := conformance.Company(t, s)
	const to = "+15550600001"
	caps := map[string]int64{"rone-at": 1, "rone-below": 100}
	for fp, n := range caps {
		conformance.Device(t, s, c.ID, fp)
		if _, err := s.SetSIMCaps(c.ID, fp, map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: n}}, conformance.T0); err != nil {
			t.Fatal(err)
		}
	}
	k := 0
	send := func(fp string) int64 {
		t.Helper()
		k++
		m := store.Message{UUID: fmt.Sprintf("rone-%d", k), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: to, Text: "hello"}
		n0 := stmts.n.Load()
		if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
			t.Fatalf("send %d from %s: %v", k, fp, err)
		}
		return stmts.n.Load() - n0
	}
	for fp := range caps {
		send(fp) // the recipient is the SIM's first of the day
	}
	below, at := send("rone-below"), send("rone-at")
	t.Logf("a send to a known recipient: %d statements from a SIM below its recipients cap, %d from one at it", below, at)
	if at != below {
		t.Errorf("a send to a known recipient took %d statements from a SIM at its recipients cap, %d from one below it: want the same", at, below)
	}
	if us, err := s.SIMUsages(c.ID, "rone-at", conformance.T0); err != nil || us[0].Recipients != 1 || us[0].Day != 2 {
		t.Errorf("rone-at's SIM1: %+v (%v), want 1 recipient and 2 sends", us, err)
	}
}
