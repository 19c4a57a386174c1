package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// What a report writes beside its message: its device's newest failures
// and its SIM's carrier-error streak (reportPlan's noteFailure and
// noteOutcome).
func TestOutcomeNotes(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "notes")
	t0 := conformance.T0
	report := func(status, errText, channel string, at time.Time) store.Message {
		t.Helper()
		m := store.Message{UUID: fmt.Sprintf("n-%d", at.UnixNano()), CompanyID: c.ID, DeviceID: d.ID, Direction: store.Outbound,
			Channel: channel, SIMSlot: "SIM1", Status: status, Error: errText, UpdatedAt: at}
		if err := s.write("report", func(tx *txn) error {
			p := newReportPlan(nil)
			p.noteOutcome(m, status, errText, at)
			p.noteFailure(m, at)
			return p.write(tx, true)
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var failed []string
	for i := range store.CarrierErrorStreak {
		failed = append(failed, report(store.MsgFailed, "no_service", "sms", t0.Add(time.Duration(i)*time.Second)).UUID)
	}
	report(store.MsgFailed, "no_service", "whatsapp", t0.Add(time.Minute)) // another channel: no streak
	if f, err := s.CarrierFailing(c.ID, t0.Add(time.Minute)); err != nil || !slices.Equal(f[d.ID], []string{"SIM1"}) {
		t.Fatalf("carrier failing: %v (%v), want SIM1", f, err)
	}
	fs, err := s.DeviceFailures(c.ID, d.ID)
	if err != nil || len(fs) != store.MaxDeviceFailures || fs[0].Channel != "whatsapp" || fs[1].QueueID != failed[len(failed)-1] {
		t.Fatalf("failures: %+v (%v), want the newest %d, newest first", fs, err, store.MaxDeviceFailures)
	}
	report(store.MsgSent, "", "sms", t0.Add(2*time.Minute))
	if f, err := s.CarrierFailing(c.ID, t0.Add(2*time.Minute)); err != nil || len(f) != 0 {
		t.Fatalf("after a send went out: %v (%v), want none failing", f, err)
	}
	if fs, _ := s.DeviceFailures(c.ID, d.ID); len(fs) != store.MaxDeviceFailures || fs[0].Channel != "whatsapp" {
		t.Fatalf("a sent message was noted as a failure: %+v", fs)
	}
}

// Deleting a device reads its unfinished messages through
// messages_unfinished, never the device's whole history.
func TestDeleteDeviceReadsTheUnfinishedOnly(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "fp-history")
	if err := s.write("history", func(t *txn) error {
		_, err := t.exec(`INSERT INTO messages (company_id, device_id, uuid, direction, channel, phone, status, created_at, updated_at, rec)
			SELECT $1, $2, 'h-' || g, 'outbound', 'sms', '+1555' || lpad(g::text, 7, '0'), 'delivered', now(), now(), '{}'::jsonb FROM generate_series(1, 5000) g`,
			id(c.ID), id(d.ID))
		if err != nil {
			return err
		}
		_, err = t.exec("ANALYZE messages")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var plan string
	if err := s.read("plan", func(t *txn) error {
		rows, err := t.query(`EXPLAIN SELECT rec FROM messages
			WHERE company_id = $1 AND device_id = $2 AND status IN ('scheduled', 'queued', 'sending')
				AND NOT (status = 'queued' AND number_id IS NOT NULL) ORDER BY id`, id(c.ID), id(d.ID))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan += line + "\n"
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "messages_unfinished") {
		t.Fatalf("the plan does not read messages_unfinished:\n%s", plan)
	}
}
