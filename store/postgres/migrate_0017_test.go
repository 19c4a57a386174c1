package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// Migration 0017 (a pool's turn as a count per member) on a database of
// 0016 with a pool of three whose turn (pool_turns) names its third
// member, and a pool that never sent (no turn row): the first send after
// the upgrade through the first takes the third member and the turn goes
// on round the pool in its order from there; the other starts at its
// first member.
func TestMigration0017KeepsThePoolsTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, ms, conn := migrationDB(t)
	if len(ms) < 17 || ms[16].version != 17 || ms[16].name != "member_turns" {
		t.Fatalf("migration 0017 is not where this test reads it: %d migrations", len(ms))
	}
	s := openURL(t, url, Options{})
	c, _ := conformance.Company(t, s)
	var members []store.PoolMemberInput
	for _, fp := range []string{"mig-a", "mig-b", "mig-c"} {
		conformance.Device(t, s, c.ID, fp)
		members = append(members, store.PoolMemberInput{Device: fp, SIMSlot: "SIM1"})
	}
	pools := map[string]uint64{}
	for _, name := range []string{"turned", "fresh"} {
		p, err := s.PutPool(c.ID, 0, conformance.T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, Members: members}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pools[name] = p.ID
	}
	// Back to 0016: its pool_turns, the first pool's turn at its third
	// member (index 2), and no member rows (and none of the later
	// migrations: 0018's index).
	for _, sql := range []string{
		"DROP INDEX webhook_deliveries_entry_due",
		"DELETE FROM schema_version WHERE version > 17",
		"DROP TABLE pool_member_turns",
		`CREATE TABLE pool_turns (pool_id bigint PRIMARY KEY REFERENCES pools (id) ON DELETE CASCADE, turn bigint NOT NULL DEFAULT 0)`,
		fmt.Sprintf("INSERT INTO pool_turns (pool_id, turn) VALUES (%d, 2)", pools["turned"]),
		"DELETE FROM schema_version WHERE version = 17",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if v, err := migrate(ctx, conn, ms[:17], false); err != nil || v != 17 {
		t.Fatalf("migrate 0016 to 0017: %d, %v", v, err)
	}
	n := 0
	via := func(pool string) string {
		t.Helper()
		n++
		m := store.Message{UUID: fmt.Sprintf("mig-%d", n), CompanyID: c.ID, Pool: pool, Channel: "sms", Phone: fmt.Sprintf("+1555020%04d", n), Text: "hi"}
		out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatalf("send through %s: %v", pool, err)
		}
		return out.Device
	}
	for i, want := range []string{"mig-c", "mig-a", "mig-b", "mig-c"} {
		if got := via("turned"); got != want {
			t.Fatalf("send %d through the pool with a turn: %s, want %s", i, got, want)
		}
	}
	for i, want := range []string{"mig-a", "mig-b"} {
		if got := via("fresh"); got != want {
			t.Fatalf("send %d through the pool that never sent: %s, want %s", i, got, want)
		}
	}
}
