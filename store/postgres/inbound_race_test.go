package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// Received messages of one company stored at once, from many phones, with
// an inbound webhook, break no deadlock. Each charges the day's storage
// twice (the message, then its webhook event) and adds to its daily count
// and the webhook outbox's counters, all sharded rows: each charge took a
// shard of its own at random, so two transactions locked two shards in
// either order, and the database broke such deadlocks by the hundred at
// 500 received messages a second, one per deadlock_timeout (1 s), each run
// again until the phones' frames timed out. A transaction now adds to one
// shard of each counter.
func TestInboundAtOnceBreaksNoDeadlock(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	s := openStore(t, Options{Tracer: dl})
	c, _ := conformance.Company(t, s)
	// Each message's webhook event and delivery, as a company with an
	// inbound webhook has: they are charged to the day's storage too.
	if _, err := s.UpdateWebhookSet(c.ID, time.Now(), func(set *store.WebhookSet) error {
		set.Entries = []store.WebhookEntry{{URL: "https://hooks.example/in", Active: true}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.SetInboundEvents(store.InboundEvents{Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		var ds []store.WebhookDelivery
		for _, e := range set.Entries {
			ds = append(ds, store.WebhookDelivery{UUID: "d-" + m.UUID, EventType: "sms:received", WebhookID: e.ID, CreatedAt: m.CreatedAt, NextAttemptAt: m.CreatedAt})
		}
		return store.WebhookEvent{ID: "ev-" + m.UUID, Body: []byte(`{"event":"sms:received"}`)}, ds, nil
	}})
	const phones, each = 12, 25
	var devs []store.Device
	for i := range phones {
		devs = append(devs, conformance.Device(t, s, c.ID, fmt.Sprintf("in-%d", i)))
	}
	// A full feed first: from here every message's trim drops a line.
	for i := range store.ActivityKeep {
		d := devs[i%phones]
		if _, _, err := s.StoreInbound(&store.Message{CompanyID: c.ID, DeviceID: d.ID, ClientID: fmt.Sprintf("fill-%d", i), UUID: fmt.Sprintf("fill-%d", i),
			Channel: "sms", Phone: "+15550100000", Text: "hello", Segments: 1}, time.Now); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, phones*each)
	for p, d := range devs {
		wg.Go(func() {
			for i := range each {
				_, _, err := s.StoreInbound(&store.Message{CompanyID: c.ID, DeviceID: d.ID, ClientID: fmt.Sprintf("m-%d-%d", p, i), UUID: fmt.Sprintf("m-%d-%d", p, i),
					Channel: "sms", Phone: "+15550100000", Text: "hello", Segments: 1}, time.Now)
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks among the received messages, in %q", n, dl.sql)
	}
	var lines int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM activity WHERE company_id = $1", id(c.ID)).Scan(&lines); err != nil {
		t.Fatal(err)
	}
	if lines < store.ActivityKeep {
		t.Errorf("the feed holds %d lines, want at least its %d newest", lines, store.ActivityKeep)
	}
}
