package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// readNumbers runs fn in a transaction and returns how many rows and
// index entries of agent_numbers it read.
func readNumbers(t *testing.T, s *Store, fn func(tx *txn) error) int64 {
	t.Helper()
	var read int64
	err := s.write("test read numbers", func(tx *txn) (err error) {
		read, err = tuplesRead(tx, "agent_numbers", func() error { return fn(tx) })
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return read
}

// A hello's check of the company's bound (AgentNumbersNew) in a company of
// 1,000 WhatsApp numbers: a hello that announces 5 of them reads their 5
// index entries, not the company's numbers, which the check read whole
// before (AgentNumbers' statement, 1,000 rows or more); one that announces
// a new number counts the company's numbers too (through the index of them,
// or, where the company holds half the table as here, a scan of the table:
// the planner's choice), as the check did on every hello before.
func TestHelloCheckReadsTheAnnouncedNumbersOnly(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "announce-cost")
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("+1555100%04d", i)
	}
	if _, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, addrs, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	// Another company's numbers, which the count must not read.
	c2, _ := conformance.Company(t, s)
	if _, err := s.AnnounceNumbers(c2.ID, conformance.Device(t, s, c2.ID, "announce-cost-2").ID, store.ChannelNameWhatsApp, addrs, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), "VACUUM (ANALYZE) agent_numbers"); err != nil {
		t.Fatal(err)
	}
	all := readNumbers(t, s, func(tx *txn) error {
		nums, err := getRecs[store.AgentNumber](tx, `SELECT rec FROM agent_numbers WHERE company_id = $1 AND channel = $2 ORDER BY address COLLATE "C"`, id(c.ID), store.ChannelNameWhatsApp)
		if err == nil && len(nums) != 1000 {
			err = fmt.Errorf("read %d numbers, want 1000", len(nums))
		}
		return err
	})
	check := func(name string, announced []string, wantFresh, wantHave int) int64 {
		t.Helper()
		return readNumbers(t, s, func(tx *txn) error {
			fresh, have, err := agentNumbersNew(tx, c.ID, store.ChannelNameWhatsApp, announced)
			if err == nil && (fresh != wantFresh || have != wantHave) {
				t.Errorf("%s: %d new of %d, want %d of %d", name, fresh, have, wantFresh, wantHave)
			}
			return err
		})
	}
	known := check("5 known numbers", []string{addrs[0], addrs[10], addrs[200], addrs[500], addrs[999]}, 0, 0)
	fresh := check("4 known numbers and a new one", []string{addrs[0], addrs[10], addrs[200], addrs[500], "+15559999999"}, 1, 1000)
	t.Logf("rows and index entries of agent_numbers read: the company's numbers %d; a hello of 5 known numbers %d, of 4 known and a new one %d", all, known, fresh)
	if all < 1000 {
		t.Errorf("reading the company's numbers read %d rows and index entries, want at least its 1,000: the count does not see the reads", all)
	}
	if known > 10 {
		t.Errorf("a hello of 5 known numbers read %d rows and index entries of agent_numbers, want at most 10, not the company's 1,000", known)
	}
}
