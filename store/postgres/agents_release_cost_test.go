package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// releaseFixture is a company whose other agent has a backlog of 1,000
// queued WhatsApp sends, every other one handed to it, and whose agent
// has 3 sends handed to it (mine).
type releaseFixture struct {
	c     store.Company
	agent store.Device
	mine  []string
}

func newReleaseFixture(t *testing.T, s *Store) releaseFixture {
	t.Helper()
	c, _ := conformance.Company(t, s)
	f := releaseFixture{c: c, agent: conformance.Device(t, s, c.ID, "release-agent")}
	other := conformance.Device(t, s, c.ID, "release-other")
	queue := func(d store.Device, sends int, hand func(int) bool) []string {
		nums, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{fmt.Sprintf("+1555%03d0000", d.ID)}, time.Now(), 0)
		if err != nil || len(nums) != 1 {
			t.Fatalf("announce: %+v (%v)", nums, err)
		}
		var uuids []string
		for i := range sends {
			m := store.Message{UUID: fmt.Sprintf("%s-%d", d.Fingerprint, i), CompanyID: c.ID, Channel: store.ChannelNameWhatsApp, NumberRef: nums[0].PublicID,
				Phone: "+15557654321", Text: "hi", ContentType: "text", Segments: 1}
			out, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, time.Now, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if hand(i) {
				if ok, err := s.AgentHandOut(c.ID, d.ID, out.ID); err != nil || !ok {
					t.Fatalf("hand out: %v (%v)", ok, err)
				}
				uuids = append(uuids, out.UUID)
			}
		}
		return uuids
	}
	queue(other, 1000, func(i int) bool { return i%2 == 0 })
	f.mine = queue(f.agent, 3, func(int) bool { return true })
	return f
}

// release runs AgentRelease's statement for the agent naming held, and
// returns the numbers it released and how many rows and index entries of
// messages it read.
func (f releaseFixture) release(t *testing.T, s *Store, held []string) ([]store.AgentNumber, int64) {
	t.Helper()
	// A test's database may be one an earlier test wrote messages to:
	// their dead index entries would count.
	if _, err := s.pool.Exec(t.Context(), "VACUUM (ANALYZE) messages"); err != nil {
		t.Fatal(err)
	}
	var got []store.AgentNumber
	var read int64
	err := s.write("test release", func(tx *txn) (err error) {
		read, err = tuplesRead(tx, "messages", func() (err error) {
			got, err = getRecs[store.AgentNumber](tx, releaseHandOuts, id(f.c.ID), id(f.agent.ID), held)
			return err
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, read
}

// An agent's hello that names its jobs (AgentRelease) reads the sends
// handed to that agent through messages_handed (migration 0020): a few
// rows and index entries, however large the company's queue of other
// agents' sends. It read the company's whole queue of agent sends before
// (messages_number_queue), once per agent hello: 1,003 here.
func TestAgentReleaseReadsTheAgentsSendsOnly(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	f := newReleaseFixture(t, s)
	for _, r := range []struct {
		name     string
		held     []string
		released int
	}{{"naming them all", f.mine, 0}, {"naming one", f.mine[:1], 1}} {
		got, read := f.release(t, s, r.held)
		t.Logf("%s: %d rows and index entries of messages read", r.name, read)
		if len(got) != r.released {
			t.Errorf("%s: released the sends of %d numbers, want %d", r.name, len(got), r.released)
		}
		if read > 10 {
			t.Errorf("%s: the release read %d rows and index entries of messages, want at most 10 (the agent's 3 sends), not the company's queue of 1,003", r.name, read)
		}
	}
}

// Migration 0020 (messages_handed) on a database of 0019 with sends
// handed out: it indexes the rows already there, and the release reads
// the agent's sends through it.
func TestMigration0020IndexesTheHandedSends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, ms, conn := migrationDB(t)
	if len(ms) < 20 || ms[19].version != 20 || ms[19].name != "handed" {
		t.Fatalf("migration 0020 is not where this test reads it: %d migrations", len(ms))
	}
	s := openURL(t, url, Options{})
	// Back to 0019 (0021, which followed, undone first).
	for _, sql := range append(back0020, "DROP INDEX messages_handed", "DELETE FROM schema_version WHERE version = 20") {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	f := newReleaseFixture(t, s)
	if got, read := f.release(t, s, f.mine); len(got) != 0 || read < 1000 {
		t.Fatalf("on 0019: released %d numbers after reading %d rows and index entries, want none after the company's queue", len(got), read)
	}
	if v, err := migrate(ctx, conn, ms[:20], false); err != nil || v != 20 {
		t.Fatalf("migrate 0019 to 0020: %d, %v", v, err)
	}
	var def string
	if err := conn.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = 'messages_handed'").Scan(&def); err != nil || !strings.Contains(def, "handed_to") {
		t.Fatalf("the index after 0020: %q (%v)", def, err)
	}
	got, read := f.release(t, s, f.mine[:2])
	if len(got) != 1 || read > 10 {
		t.Fatalf("after 0020: released %d numbers after reading %d rows and index entries, want 1 after at most 10", len(got), read)
	}
}
