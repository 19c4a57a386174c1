package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// mixFor is how long TestMixedLoadBreaksNoDeadlock runs its writers.
const mixFor = 4 * time.Second

// TestMixedLoadBreaksNoDeadlock: one company's writes of every kind at
// once, for a few seconds, every transaction adding to the same shard of
// the counters (as one time in shards at random): received messages (STOP
// and START among them) with their webhook events, sends, bulk sends,
// scheduled and expiring sends and the sweeps that release and expire
// them, reports in batches, cancels, phones' reads that fail jobs to
// numbers that opted out, the API's opt-outs, webhook attempts, uploads,
// API key rotations, and devices paired, sent to and deleted. The
// database breaks no deadlock among them, and the counters that many of
// them add to at once are exact: the webhook outbox's against the
// deliveries and bodies stored, the day's received count against the
// messages. Before the counters' lock order (doc.go), such a run broke a
// deadlock every second or so, each holding its writers for the
// database's deadlock_timeout.
func TestMixedLoadBreaksNoDeadlock(t *testing.T) {
	t.Parallel()
	dl := &deadlocks{}
	s := openStore(t, Options{Tracer: dl})
	s.pickShard = func() int16 { return 0 }
	refused := func(err error) bool { return errors.As(err, new(*store.OptOutError)) }
	var seq atomic.Int64
	build := func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		n := seq.Add(1)
		ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d", n), Body: fmt.Appendf(nil, `{"n":%d}`, n)}
		var ds []store.WebhookDelivery
		for _, e := range set.Entries {
			ds = append(ds, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d-%d", n, e.ID), EventType: "x", WebhookID: e.ID, CreatedAt: time.Now(), NextAttemptAt: time.Now()})
		}
		return ev, ds, nil
	}
	s.SetStatusEvents(store.StatusEvents{Build: build})
	s.SetInboundEvents(store.InboundEvents{Build: build})
	c, _ := conformance.Company(t, s)
	if _, err := s.UpdateWebhookSet(c.ID, time.Now(), func(set *store.WebhookSet) error {
		set.Entries = []store.WebhookEntry{{URL: "https://hooks.example/in", Active: true}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	devs := 4
	var ds []store.Device
	for i := range devs {
		ds = append(ds, conformance.Device(t, s, c.ID, fmt.Sprintf("fp-%d", i)))
	}
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO activity (company_id, rec) SELECT $1, '{}'::jsonb FROM generate_series(1, $2)`,
		int64(c.ID), store.ActivityKeep+10); err != nil {
		t.Fatal(err)
	}
	stop := time.Now().Add(mixFor)
	var wg sync.WaitGroup
	var ops atomic.Int64
	for di, d := range ds {
		// inbound
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				txt := "hello"
				if i%7 == 0 {
					txt = "STOP"
				} else if i%7 == 3 {
					txt = "START"
				}
				_, _, err := s.StoreInbound(&store.Message{CompanyID: c.ID, DeviceID: d.ID, ClientID: fmt.Sprintf("m-%d-%d", di, i), UUID: fmt.Sprintf("in-%d-%d", di, i),
					Channel: "sms", Phone: fmt.Sprintf("+1555010%04d", i%13), Text: txt, Segments: 1}, time.Now)
				if err != nil {
					t.Errorf("inbound: %v", err)
					return
				}
				ops.Add(1)
			}
		})
		// sends and reports
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				var uuids []string
				for j := range 8 {
					m := store.Message{UUID: fmt.Sprintf("out-%d-%d-%d", di, i, j), CompanyID: c.ID, Device: d.Fingerprint, SIMSlot: "SIM1",
						Channel: "sms", Phone: fmt.Sprintf("+1666010%04d", j), Text: "hi", Segments: 1}
					if j%3 == 0 {
						m.Priority = 1
					}
					got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
					if refused(err) {
						continue
					}
					if err != nil {
						t.Errorf("send: %v", err)
						return
					}
					uuids = append(uuids, got.UUID)
				}
				if len(uuids) == 0 {
					continue
				}
				last := uuids[len(uuids)-1]
				if i%4 == 0 {
					if _, err := s.Cancel(c.ID, last, time.Now()); err != nil && !errors.Is(err, store.ErrNotCancelable) {
						t.Errorf("cancel: %v", err) // one a phone's read failed is not cancelable
					}
				}
				var ts []store.Transit
				now := time.Now()
				for _, u := range uuids[:len(uuids)-1] {
					ts = append(ts, s.TransitionLater(c.ID, d.ID, u, store.MsgSending, "", "", "", now))
					ts = append(ts, s.TransitionLater(c.ID, d.ID, u, store.MsgSent, "", "", "", now))
					ts = append(ts, s.TransitionLater(c.ID, d.ID, u, store.MsgFailed, "generic_failure", "", "", now))
				}
				for _, tr := range ts {
					if _, _, err := tr.Wait(); err != nil {
						t.Errorf("report: %v", err)
					}
				}
				ops.Add(1)
			}
		})
	}
	// webhook attempts
	wg.Go(func() {
		for time.Now().Before(stop) {
			var ids []int64
			rows, err := s.pool.Query(t.Context(), "SELECT id FROM webhook_deliveries ORDER BY random() LIMIT 20")
			if err != nil {
				t.Error(err)
				return
			}
			for rows.Next() {
				var x int64
				if err := rows.Scan(&x); err != nil {
					t.Error(err)
				}
				ids = append(ids, x)
			}
			rows.Close()
			var w sync.WaitGroup
			for k, x := range ids {
				w.Go(func() {
					_, err := s.RecordWebhookAttempt(uint64(x), 50, func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt {
						st := store.WebhookDelivered
						if k%2 == 0 {
							st = store.WebhookFailed
						}
						return store.WebhookAttempt{State: st, CreatedAt: time.Now()}
					})
					if err != nil && !errors.Is(err, store.ErrNotFound) { // ended by another attempt
						t.Errorf("webhook attempt: %v", err)
					}
				})
			}
			w.Wait()
			ops.Add(1)
		}
	})
	// opt-outs by API
	wg.Go(func() {
		for i := 0; time.Now().Before(stop); i++ {
			p := fmt.Sprintf("+1666010%04d", i%8)
			if _, _, err := s.AddOptOut(c.ID, p, time.Now()); err != nil {
				t.Errorf("opt-out: %v", err)
			}
			if err := s.RemoveOptOut(c.ID, p); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("opt-out's removal: %v", err)
			}
			ops.Add(1)
		}
	})
	// dispatch reads
	wg.Go(func() {
		for time.Now().Before(stop) {
			for _, d := range ds {
				if _, err := s.Pending(c.ID, d.ID, 0, 50, time.Now(), nil); err != nil {
					t.Errorf("a phone's read: %v", err)
				}
			}
			ops.Add(1)
		}
	})

	// device lifecycle: pair, send, delete
	wg.Go(func() {
		for k := 0; time.Now().Before(stop); k++ {
			fp := fmt.Sprintf("tmp-%d", k)
			code := []byte(fmt.Sprintf("pair-%d", k))
			if err := s.PutPairing(code, store.Pairing{CompanyID: c.ID, ExpiresAt: time.Now().Add(time.Hour)}, time.Now()); err != nil {
				t.Errorf("pairing: %v", err)
				return
			}
			d, _, _, err := s.RegisterDevice(code, time.Now(), fp, func(p store.Pairing, old *store.Device) (store.Device, error) {
				return store.Device{Name: fp, Status: store.DeviceActive, SelectedSIM: "SIM1", SIMs: []store.SIM{{Slot: "SIM1"}}, TokenHash: []byte(fp), CreatedAt: time.Now()}, nil
			})
			if err != nil {
				t.Errorf("register: %v", err)
				return
			}
			var uuids []string
			for j := range 6 {
				m := store.Message{UUID: fmt.Sprintf("tmp-%d-%d", k, j), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: "+17770100000", Text: "hi", Segments: 1}
				if j%3 == 0 {
					m.SendAt = time.Now().Add(time.Hour)
				}
				got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
				if err != nil {
					t.Errorf("tmp send: %v", err)
					return
				}
				uuids = append(uuids, got.UUID)
			}
			s.TransitionLater(c.ID, d.ID, uuids[1], store.MsgSending, "", "", "", time.Now())
			s.TransitionLater(c.ID, d.ID, uuids[2], store.MsgSending, "", "", "", time.Now())
			s.TransitionLater(c.ID, d.ID, uuids[2], store.MsgSent, "", "", "", time.Now())
			if _, err := s.DeleteDevice(c.ID, fp, time.Now()); err != nil {
				t.Errorf("delete: %v", err)
			}
			ops.Add(1)
		}
	})
	// bulk sends, scheduled and expiring sends, sweeps, media, key rotation
	wg.Go(func() {
		for k := 0; time.Now().Before(stop); k++ {
			var ms []store.Message
			for j := range 20 {
				ms = append(ms, store.Message{UUID: fmt.Sprintf("bulk-%d-%d", k, j), CompanyID: c.ID, Device: ds[k%len(ds)].Fingerprint, SIMSlot: "SIM1", Channel: "sms",
					Phone: fmt.Sprintf("+1888010%04d", j), Text: "hi", Segments: 1})
			}
			if _, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, time.Now, nil, func([]store.Message) (int, []byte) { return 202, nil }); err != nil {
				t.Errorf("bulk: %v", err)
			}
			for j := range 4 {
				m := store.Message{UUID: fmt.Sprintf("sched-%d-%d", k, j), CompanyID: c.ID, Device: ds[j%len(ds)].Fingerprint, SIMSlot: "SIM1", Channel: "sms",
					Phone: "+19990100000", Text: "hi", Segments: 1}
				if j%2 == 0 {
					m.SendAt = time.Now().Add(20 * time.Millisecond)
				} else {
					m.ExpiresAt = time.Now().Add(20 * time.Millisecond)
				}
				if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
					t.Errorf("sched: %v", err)
				}
			}
			if _, _, err := s.PutMedia(store.Media{ID: fmt.Sprint("media-", k), CompanyID: c.ID, DeviceID: ds[k%len(ds)].ID, Key: fmt.Sprint("k-", k), ContentType: "image/png", Size: 4},
				bytes.NewReader([]byte("data")), time.Now()); err != nil {
				t.Errorf("media: %v", err)
			}
			if k%5 == 0 {
				if _, err := s.UpdateCompany(c.ID, func(co *store.Company) error { co.APIKeyHash = []byte(fmt.Sprint("key-", k)); return nil }); err != nil {
					t.Errorf("rotate: %v", err)
				}
			}
			ops.Add(1)
		}
	})
	wg.Go(func() {
		for time.Now().Before(stop) {
			time.Sleep(10 * time.Millisecond)
			if _, err := s.ReleaseDue(time.Now(), 100); err != nil {
				t.Errorf("release: %v", err)
			}
			if _, err := s.ExpireQueued(time.Now(), 100); err != nil {
				t.Errorf("expire: %v", err)
			}
			ops.Add(1)
		}
	})
	wg.Wait()
	if n := dl.n.Load(); n != 0 {
		t.Errorf("the database broke %d deadlocks in %d operations, in %q", n, ops.Load(), dl.sql)
	}
	ctx := context.Background()
	var outboxN, outboxBytes, deliveries, bodies, received, inbound int64
	if err := s.pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(deliveries), 0)::bigint FROM webhook_outboxes WHERE company_id = $1),
			(SELECT coalesce(sum(bytes), 0)::bigint FROM webhook_outboxes WHERE company_id = $1),
			(SELECT count(*) FROM webhook_deliveries WHERE company_id = $1),
			(SELECT coalesce(sum(length(body)), 0)::bigint FROM webhook_events WHERE company_id = $1),
			(SELECT coalesce(sum(received), 0)::bigint FROM stats_days WHERE company_id = $1),
			(SELECT count(*) FROM messages WHERE company_id = $1 AND direction = 'inbound')`, int64(c.ID)).Scan(
		&outboxN, &outboxBytes, &deliveries, &bodies, &received, &inbound); err != nil {
		t.Fatal(err)
	}
	if outboxN != deliveries || outboxBytes != bodies {
		t.Errorf("the outbox counts %d deliveries and %d bytes, %d and %d are stored", outboxN, outboxBytes, deliveries, bodies)
	}
	if received != inbound {
		t.Errorf("the daily counts have %d received, %d are stored", received, inbound)
	}
}
