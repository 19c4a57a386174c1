package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestInboundBatchFailureWritesNothing: a received message whose write
// batch fails after its first statements (its webhook event's id is
// taken: the event's INSERT does nothing, and its callback fails the
// batch after the message, its count, its activity line and its opt-out
// ran) answers the error and leaves nothing of what the batch wrote: no
// message, count, activity line, opt-out, delivery, outbox counter or
// storage use.
func TestInboundBatchFailureWritesNothing(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{CompanyDailyStorage: store.DefaultCompanyDailyStorage})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "inbound-rollback")
	withWebhooks(t, s, c.ID, 2)
	s.SetInboundEvents(store.InboundEvents{Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		ev, ds, err := inboundBuild(set, m)
		ev.ID = "ev-the-same"
		return ev, ds, err
	}})
	tally := func() [7]int64 {
		t.Helper()
		var n [7]int64
		if err := s.pool.QueryRow(t.Context(), `SELECT
			(SELECT count(*) FROM messages WHERE company_id = $1),
			(SELECT coalesce(sum(received), 0)::bigint FROM stats_days WHERE company_id = $1),
			(SELECT count(*) FROM activity WHERE company_id = $1),
			(SELECT count(*) FROM opt_outs WHERE company_id = $1),
			(SELECT count(*) FROM webhook_deliveries WHERE company_id = $1),
			(SELECT coalesce(sum(deliveries), 0)::bigint FROM webhook_outboxes WHERE company_id = $1),
			(SELECT coalesce(sum(used), 0)::bigint FROM storage_usage WHERE company_id = $1)`, id(c.ID)).Scan(&n[0], &n[1], &n[2], &n[3], &n[4], &n[5], &n[6]); err != nil {
			t.Fatal(err)
		}
		return n
	}
	m := store.Message{CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100000", Text: "hi", ClientID: "first", UUID: "in-rollback-1"}
	if _, _, err := s.StoreInbound(&m, time.Now); err != nil {
		t.Fatal(err)
	}
	before := tally()
	for _, text := range []string{"hello", "STOP"} {
		m := store.Message{CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100001", Text: text, ClientID: "again-" + text, UUID: "in-rollback-" + text}
		out, dup, err := s.StoreInbound(&m, time.Now)
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("%q whose event id is taken: %+v, dup %v, err %v; want ErrConflict", text, out, dup, err)
		}
		if after := tally(); after != before {
			t.Errorf("%q: messages, received, activity, opt-outs, deliveries, outbox, storage went %v -> %v, want unchanged", text, before, after)
		}
	}
}
