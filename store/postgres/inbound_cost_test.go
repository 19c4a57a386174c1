package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestInboundCost: a received message (StoreInbound, every inbound frame)
// costs three round trips whatever its company's webhooks: one with the
// BEGIN reads its device, an earlier message of its client id, the day's
// storage use, its id and its company's webhook set and outbox; one writes
// the message, its daily count, its activity line and the feed's trim, its
// event's body, deliveries and outbox counters, and the storage use, last;
// then the COMMIT. With 3 webhook entries and the daily budget: 12
// statements in 3 round trips, where it took 17 in 14. A stop keyword
// reads its company's setting with the rest and writes its opt-out in the
// same batch, its charge (whether the entry is new) with the commit: 14 in
// 4. A repeat of the client id answers the message stored the first time,
// in the read's round trip. An agent's message (StoreAgentInbound) reads
// its number with its device and takes its id in a round trip of its own:
// 16 statements in 4 round trips.
func TestInboundCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "inbound-cost")
	withWebhooks(t, s, c.ID, 3)
	in := func(clientID, text string, wantStmts, wantTrips int64) store.Message {
		t.Helper()
		m := store.Message{CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100000", Text: text, SIMSlot: "SIM1",
			ClientID: clientID, UUID: "in-cost-" + clientID}
		n0, t0 := counted.n.Load(), counted.trips.Load()
		out, dup, err := s.StoreInbound(&m, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		stmts, trips := counted.n.Load()-n0, counted.trips.Load()-t0
		t.Logf("%s %q: %d statements in %d round trips (dup %v)", clientID, text, stmts, trips, dup)
		if stmts > wantStmts || trips > wantTrips {
			t.Errorf("%s %q took %d statements in %d round trips, want at most %d in %d", clientID, text, stmts, trips, wantStmts, wantTrips)
		}
		return out
	}
	first := in("client-1", "hi", 12, 3)
	if again := in("client-1", "hi", 4, 2); again.ID != first.ID {
		t.Errorf("the repeat: %d, want %d, the first", again.ID, first.ID)
	}
	in("client-2", "STOP", 14, 4)
	if listed, err := s.OptedOut(c.ID, "+15550100000"); err != nil || !listed {
		t.Errorf("after STOP: listed %v (%v), want listed", listed, err)
	}
	// A WhatsApp message an agent received: its number read with the
	// rest, its id taken on its own (its media are taken for it before its
	// insert).
	nums, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{"+15550109999"}, time.Now(), 0)
	if err != nil || len(nums) != 1 {
		t.Fatalf("announce: %+v (%v)", nums, err)
	}
	m := store.Message{CompanyID: c.ID, DeviceID: d.ID, Channel: store.ChannelNameWhatsApp, Account: nums[0].Address, Phone: "+15550100000",
		Text: "hi", ClientID: "wa-1", UUID: "in-cost-wa-1"}
	n0, t0 := counted.n.Load(), counted.trips.Load()
	if _, dup, err := s.StoreAgentInbound(&m, time.Now); err != nil || dup {
		t.Fatalf("the agent's message: dup %v (%v)", dup, err)
	}
	stmts, trips := counted.n.Load()-n0, counted.trips.Load()-t0
	t.Logf("an agent's message: %d statements in %d round trips", stmts, trips)
	if stmts > 16 || trips > 4 {
		t.Errorf("an agent's message took %d statements in %d round trips, want at most 16 in 4", stmts, trips)
	}
	var outbox int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM webhook_deliveries WHERE company_id = $1", id(c.ID)).Scan(&outbox); err != nil || outbox != 9 {
		t.Errorf("%d deliveries (%v), want 3 for each of the 3 messages", outbox, err)
	}
}

// TestInboundEventIDsInRec: an event's deliveries, and the log's lines of
// the deliveries a full outbox refused, take their ids from their tables'
// sequences inside the statement that writes them, each row's once: its
// id column and its record's id agree, and no two rows share one.
func TestInboundEventIDsInRec(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "inbound-ids")
	withWebhooks(t, s, c.ID, 3)
	s.SetInboundEvents(store.InboundEvents{Limits: store.OutboxLimits{MaxDeliveries: 6, LogKeep: 4}, Build: inboundBuild})
	for i := range 4 { // 2 events queued, then 2 refused: 6 lines, trimmed to 4
		m := store.Message{CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100000", Text: "hi", ClientID: fmt.Sprintf("c-%d", i), UUID: fmt.Sprintf("in-ids-%d", i)}
		if _, _, err := s.StoreInbound(&m, time.Now); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"webhook_deliveries", "webhook_attempts"} {
		var rows, ids, off int
		if err := s.pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE (rec->>'id')::bigint IS DISTINCT FROM id)
			FROM `+table+` WHERE company_id = $1`, id(c.ID)).Scan(&rows, &ids, &off); err != nil {
			t.Fatal(err)
		}
		if rows != map[string]int{"webhook_deliveries": 6, "webhook_attempts": 4}[table] || ids != rows || off != 0 {
			t.Errorf("%s: %d rows, %d ids, %d whose record's id is not the row's", table, rows, ids, off)
		}
	}
}
