package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestImportCost: an import of 2,000 messages (a restore's or the bench's
// seeding's batch) costs a few statements whatever its size: its devices'
// reads, the ids, one COPY of the rows and the counters' sums, where each
// message was an INSERT of its own (and a run of the conversations'
// statement trigger). The conversations and the counts come out as one
// message at a time would make them.
func TestImportCost(t *testing.T) {
	t.Parallel()
	s, counted := openCounted(t, Options{})
	c, _ := conformance.Company(t, s)
	a := conformance.Device(t, s, c.ID, "import-a")
	conformance.Device(t, s, c.ID, "import-b")
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	var msgs []store.Message
	for i := range 2000 {
		m := store.Message{UUID: fmt.Sprintf("imp-%d", i), CompanyID: c.ID, Device: []string{"import-a", "import-b"}[i%2], Channel: "sms",
			Phone: fmt.Sprintf("+1555010%04d", i%10), Text: "history", SIMSlot: "SIM1", Segments: 1, CreatedAt: at, UpdatedAt: at}
		if i%4 < 2 {
			m.Direction, m.Status = store.Outbound, store.MsgDelivered
		} else {
			m.Direction, m.Status, m.ClientID = store.Inbound, store.MsgReceived, fmt.Sprint("imp-", i)
		}
		msgs = append(msgs, m)
		at = at.Add(time.Second)
	}
	n0, t0 := counted.n.Load(), counted.trips.Load()
	if err := s.ImportMessages(msgs); err != nil {
		t.Fatal(err)
	}
	if stmts, trips := counted.n.Load()-n0, counted.trips.Load()-t0; stmts > 20 || trips > 10 {
		t.Errorf("an import of %d messages took %d statements in %d round trips, want at most 20 in 10", len(msgs), stmts, trips)
	}
	if got, err := s.StatsTotals(c.ID); err != nil || got != (store.Counts{Sent: 1000, Delivered: 1000, Received: 1000, Segments: 1000}) {
		t.Errorf("the import's counts: %+v (%v), want 1,000 sent and delivered, 1,000 received", got, err)
	}
	convs, err := s.Conversations(c.ID, "import-a", 0)
	if err != nil || len(convs) != 5 {
		t.Fatalf("device a's conversations: %d (%v), want 5", len(convs), err)
	}
	for _, cv := range convs {
		if cv.MessageCount != 200 {
			t.Errorf("conversation with %s: %d messages, want 200", cv.Phone, cv.MessageCount)
		}
	}
	// The newest of the device's history is the last message imported to it.
	if last := msgs[len(msgs)-2]; convs[0].LastID != last.ID || convs[0].Phone != last.Phone || last.DeviceID != a.ID {
		t.Errorf("the newest conversation: %s, last id %d, want %s, %d on device %d (got %d)", convs[0].Phone, convs[0].LastID, last.Phone, last.ID, a.ID, last.DeviceID)
	}
}
