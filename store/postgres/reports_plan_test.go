package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestReportBatchAsAlone: one batch of a phone's reports leaves what the
// same reports made one at a time leave, down to every table they touch:
// each change's answer, the messages, the SIM's carrier-error streak (ended
// and started again inside the batch), the device's failures, the activity
// feed, the counters, the storage charged, the webhook outbox (full before
// the end, so the last outcomes' deliveries are refused into the log) and
// the events' Committed hooks, in order. One company's reports go one at a
// time, an identical company's in three batches.
func TestReportBatchAsAlone(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	var mu sync.Mutex
	seq := map[uint64]int{}
	heard := map[uint64][]string{}
	s.SetStatusEvents(store.StatusEvents{
		Limits: store.OutboxLimits{MaxDeliveries: 5, LogKeep: 100},
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			mu.Lock()
			seq[m.CompanyID]++
			n := seq[m.CompanyID]
			mu.Unlock()
			ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d-%03d", m.CompanyID, n), Body: []byte(`{"type":"message.` + m.Status + `"}`)}
			var ds []store.WebhookDelivery
			for _, e := range set.Entries {
				ds = append(ds, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d-%03d", m.CompanyID, n), EventType: "message." + m.Status,
					WebhookID: e.ID, CreatedAt: m.UpdatedAt, NextAttemptAt: m.UpdatedAt})
			}
			return ev, ds, nil
		},
		Committed: func(m store.Message, res store.OutboxAdd) {
			mu.Lock()
			defer mu.Unlock()
			heard[m.CompanyID] = append(heard[m.CompanyID], fmt.Sprintf("%s %s queued %d refused %d pending %d/%d",
				m.UUID[2:], m.Status, res.Queued, res.Refused, res.Pending, res.PendingBytes))
		},
	})
	type change struct {
		job             int // -1: a job nobody sent
		status, errText string
	}
	changes := []change{
		{0, store.MsgSending, ""}, {1, store.MsgSending, ""}, {2, store.MsgSending, ""}, {3, store.MsgSending, ""},
		{4, store.MsgSending, ""}, {5, store.MsgSending, ""},
		{0, store.MsgSent, ""}, {1, store.MsgSent, ""}, {2, store.MsgSent, ""},
		{-1, store.MsgSent, ""},
		{0, store.MsgSent, ""},                                                 // a repeat
		{3, store.MsgFailed, "no_service"}, {4, store.MsgFailed, "no_service"}, // a streak of two
		{0, store.MsgDelivered, ""},         // the outbox is full from here
		{5, store.MsgSent, ""},              // ends the streak
		{0, store.MsgSending, ""},           // late news: no move
		{3, store.MsgSent, ""},              // after failed: no move
		{5, store.MsgFailed, "blocked_sms"}, // not the carrier's
		{2, store.MsgDelivered, ""},         // ends it again
		{1, store.MsgFailed, "radio_off"},   // and starts it again
		{4, store.MsgFailed, "no_service"},  // final: no move
		{2, store.MsgFailed, "null_pdu"},    // final: no move
	}
	type world struct {
		prefix string
		c      store.Company
		dev    uint64
		jobs   []string
	}
	setUp := func(prefix string) world {
		c, _ := conformance.Company(t, s)
		conformance.Device(t, s, c.ID, "fp-"+prefix)
		statusWebhook(t, s, c.ID, conformance.T0)
		w := world{prefix: prefix, c: c}
		for i := range 6 {
			m := store.Message{UUID: fmt.Sprintf("%s-%d", prefix, i), CompanyID: c.ID, Device: "fp-" + prefix, SIMSlot: "SIM1",
				Channel: "sms", Phone: "+15550100000", Text: "hi"}
			got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			w.dev, w.jobs = got.DeviceID, append(w.jobs, got.UUID)
		}
		return w
	}
	reportsOf := func(w world) []*report {
		var out []*report
		for i, ch := range changes {
			uuid := "nobody-sent-this"
			if ch.job >= 0 {
				uuid = w.jobs[ch.job]
			}
			out = append(out, newReport(w.c.ID, w.dev, uuid, ch.status, ch.errText, "", "", conformance.T0.Add(time.Duration(i)*time.Second)))
		}
		return out
	}
	// What a company's reports left, with its own names taken out.
	outcome := func(w world, rs []*report) []string {
		var out []string
		for i, r := range rs {
			m, moved, err := r.Wait()
			if err != nil {
				out = append(out, fmt.Sprintf("change %d: not found %v", i, errors.Is(err, store.ErrNotFound)))
				continue
			}
			out = append(out, fmt.Sprintf("change %d: %s moved %v", i, m.Status, moved))
		}
		for i, u := range w.jobs {
			m, err := s.MessageByUUID(w.c.ID, u)
			out = append(out, fmt.Sprintf("job %d: %s %q at %s (%v)", i, m.Status, m.Error, m.UpdatedAt.Format(time.RFC3339), err))
		}
		rows, err := s.pool.Query(s.ctx, "SELECT sim_slot, n, last_at FROM sim_streaks WHERE device_id = $1 ORDER BY sim_slot", id(w.dev))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var slot string
			var n int64
			var last time.Time
			if err := rows.Scan(&slot, &n, &last); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("streak of %s: %d, last %s", slot, n, last.UTC().Format(time.RFC3339)))
		}
		if rows.Close(); rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		fs, err := s.DeviceFailures(w.c.ID, w.dev)
		for _, f := range fs {
			out = append(out, fmt.Sprintf("failure %s %s %q", f.QueueID[2:], f.Status, f.Error))
		}
		sum, err2 := s.DashboardSummary(w.c.ID, conformance.T0, conformance.T0.Add(time.Hour), 50)
		out = append(out, fmt.Sprintf("totals %+v (%v %v)", sum.Totals, err, err2))
		for _, a := range sum.Recent {
			out = append(out, fmt.Sprintf("activity %s %s %s", a.Type, a.At.Format(time.RFC3339), strings.ReplaceAll(a.Description, "fp-"+w.prefix, "fp")))
		}
		var used int64
		if err := s.pool.QueryRow(s.ctx, "SELECT sum(used) FROM storage_usage WHERE company_id = $1", id(w.c.ID)).Scan(&used); err != nil {
			t.Fatal(err)
		}
		deliveries, bytes, err := s.WebhookOutboxSize(w.c.ID)
		attempts, err2 := s.WebhookAttempts(w.c.ID, 0, 100)
		out = append(out, fmt.Sprintf("storage %d, outbox %d/%d, log %d (%v %v)", used, deliveries, bytes, len(attempts), err, err2))
		mu.Lock()
		out = append(out, heard[w.c.ID]...)
		mu.Unlock()
		return out
	}

	alone, batched := setUp("a"), setUp("b")
	ones := reportsOf(alone)
	for _, r := range ones {
		r.finish(s.TransitionDetail(r.companyID, r.deviceID, r.uuid, r.status, r.errText, r.statusAt, r.detail, r.now))
	}
	// In three batches: the second and the third find the streak the one
	// before them left.
	batch := reportsOf(batched)
	s.applyReports(batch[:12])
	s.applyReports(batch[12:13])
	s.applyReports(batch[13:])
	want, got := outcome(alone, ones), outcome(batched, batch)
	t.Logf("one at a time:\n%s", joinLines(want))
	if !slices.Equal(got, want) {
		t.Errorf("one batch left\n%s\nwant, as one at a time,\n%s", joinLines(got), joinLines(want))
	}
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += "  " + l + "\n"
	}
	return out
}

// TestReportBatchEventTaken: a change whose status event's id is taken
// fails alone, with ErrConflict, as it would made alone; the changes
// around it in its batch commit.
func TestReportBatchEventTaken(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	s.SetStatusEvents(store.StatusEvents{Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		ev := store.WebhookEvent{ID: "ev-" + m.UUID + "-" + m.Status, Body: []byte(`{}`)}
		return ev, []store.WebhookDelivery{{UUID: "d-" + m.UUID + "-" + m.Status, EventType: "message." + m.Status, WebhookID: set.Entries[0].ID,
			CreatedAt: m.UpdatedAt, NextAttemptAt: m.UpdatedAt}}, nil
	}})
	c, _ := conformance.Company(t, s)
	conformance.Device(t, s, c.ID, "fp")
	if _, err := s.UpdateWebhookSet(c.ID, conformance.T0, func(set *store.WebhookSet) error {
		set.Entries = append(set.Entries, store.WebhookEntry{URL: "https://hooks.example/in", Active: true, Events: []string{"message.sent"}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var batch []*report
	for i := range 5 {
		m := store.Message{UUID: fmt.Sprintf("j%d", i), CompanyID: c.ID, Device: "fp", SIMSlot: "SIM1", Channel: "sms", Phone: "+15550100000", Text: "hi"}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, newReport(c.ID, got.DeviceID, got.UUID, store.MsgSent, "", "", "", conformance.T0))
	}
	if _, err := s.pool.Exec(s.ctx, "INSERT INTO webhook_events (id, company_id, pending, body) VALUES ('ev-j3-sent', $1, 1, '')", id(c.ID)); err != nil {
		t.Fatal(err)
	}
	s.applyReports(batch)
	for i, r := range batch {
		m, moved, err := r.Wait()
		if i == 3 {
			if !errors.Is(err, store.ErrConflict) || moved {
				t.Errorf("the change whose event id is taken: moved %v (%v), want ErrConflict", moved, err)
			}
			continue
		}
		if err != nil || !moved || m.Status != store.MsgSent {
			t.Errorf("change %d: %s moved %v (%v), want sent", i, m.Status, moved, err)
		}
	}
	if m, err := s.MessageByUUID(c.ID, "j3"); err != nil || m.Status != store.MsgQueued {
		t.Errorf("j3 is %s (%v), want queued still", m.Status, err)
	}
	if n, _, err := s.WebhookOutboxSize(c.ID); err != nil || n != 4 {
		t.Errorf("outbox: %d deliveries (%v), want the 4 of the changes that committed", n, err)
	}
}
