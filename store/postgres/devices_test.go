package postgres

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// The helpers a report's transition calls: noteFailure keeps a device's
// newest failures, noteOutcome its SIMs' carrier-error streaks.
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
			if err := noteOutcome(tx, m, status, errText, at); err != nil {
				return err
			}
			return noteFailure(tx, m, at)
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
