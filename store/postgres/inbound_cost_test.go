package postgres

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestInboundCost: a received message (StoreInbound, every inbound frame)
// reads its device and an earlier message of its client id in one round
// trip with the BEGIN, and adds its activity line and trims the feed in
// another: without webhooks, 10 statements in 7 round trips, where each
// was one (9, the BEGIN going with the first). A repeat of the client id
// answers the message stored the first time.
func TestInboundCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "inbound-cost")
	in := func() (store.Message, bool) {
		t.Helper()
		m := store.Message{CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100000", Text: "hi", SIMSlot: "SIM1",
			ClientID: "client-1", UUID: "in-cost"}
		out, dup, err := s.StoreInbound(&m, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return out, dup
	}
	n0, t0 := counted.n.Load(), counted.trips.Load()
	first, dup := in()
	stmts, trips := counted.n.Load()-n0, counted.trips.Load()-t0
	t.Logf("a received message: %d statements in %d round trips", stmts, trips)
	if dup || first.ID == 0 || stmts > 10 || trips > 7 {
		t.Errorf("a received message took %d statements in %d round trips (dup %v), want at most 10 in 7", stmts, trips, dup)
	}
	again, dup := in()
	if !dup || again.ID != first.ID {
		t.Errorf("the repeat: %d (dup %v), want %d, the first", again.ID, dup, first.ID)
	}
}
