package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// DeviceSummariesStore is what the suite of device summaries calls.
type DeviceSummariesStore interface {
	DeviceSendsStore
	QueueDepth(companyID, deviceID uint64) (int, error)
	DeviceSummaries(companyID uint64, deviceIDs []uint64) (map[uint64]store.DeviceSummary, error)
}

// DeviceSummaries runs the suite of what a device list reads of many
// devices at once.
func DeviceSummaries(t *testing.T, open Opener[DeviceSummariesStore]) {
	t.Run("SameAsOneByOne", func(t *testing.T) { t.Parallel(); summariesOneByOne(t, open(t)) })
	t.Run("CountsPriorityJobs", func(t *testing.T) { t.Parallel(); summariesCountPriority(t, open(t)) })
}

// summariesOneByOne: DeviceSummaries of a company's devices answers what
// QueueDepth and DeviceFailures answer of each; a device with neither, an
// id asked twice, another company's device and an unknown id add nothing;
// as another company, or of no devices, the answer is empty.
func summariesOneByOne(t *testing.T, s DeviceSummariesStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	busy := Device(t, s, a.ID, "sum-busy")
	failing := Device(t, s, a.ID, "sum-failing")
	waiting := Device(t, s, a.ID, "sum-waiting")
	quiet := Device(t, s, a.ID, "sum-quiet")
	others := Device(t, s, b.ID, "sum-others")

	move := func(companyID uint64, d store.Device, m store.Message, status, errText string, at time.Time) {
		t.Helper()
		if _, _, err := s.Transition(companyID, d.ID, m.UUID, status, errText, "", at); err != nil {
			t.Fatalf("%s of %s: %v", status, d.Fingerprint, err)
		}
	}
	for i := range store.MaxDeviceFailures + 1 {
		at := T0.Add(time.Duration(i) * time.Minute)
		move(a.ID, busy, sendTo(t, s, a.ID, busy.Fingerprint, fmt.Sprintf("+1555300000%d", i), at, time.Time{}), store.MsgFailed, "no_service", at)
	}
	for i := range 3 {
		sendTo(t, s, a.ID, busy.Fingerprint, fmt.Sprintf("+1555300010%d", i), T0, time.Time{})
	}
	sendTo(t, s, a.ID, busy.Fingerprint, "+15553000200", T0, T0.Add(time.Hour)) // scheduled: not waiting yet
	move(a.ID, busy, sendTo(t, s, a.ID, busy.Fingerprint, "+15553000201", T0, time.Time{}), store.MsgSending, "", T0)
	move(a.ID, busy, sendTo(t, s, a.ID, busy.Fingerprint, "+15553000202", T0, time.Time{}), store.MsgSent, "", T0)
	move(a.ID, failing, sendTo(t, s, a.ID, failing.Fingerprint, "+15553000300", T0, time.Time{}), store.MsgFailed, "", T0)
	sendTo(t, s, a.ID, waiting.Fingerprint, "+15553000400", T0, time.Time{})
	sendTo(t, s, b.ID, others.Fingerprint, "+15553000500", T0, time.Time{})
	move(b.ID, others, sendTo(t, s, b.ID, others.Fingerprint, "+15553000501", T0, time.Time{}), store.MsgFailed, "", T0)

	got, err := s.DeviceSummaries(a.ID, []uint64{busy.ID, failing.ID, waiting.ID, quiet.ID, busy.ID, others.ID, others.ID + 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.Device{busy, failing, waiting, quiet} {
		depth, err := s.QueueDepth(a.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		failures, err := s.DeviceFailures(a.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		sum, found := got[d.ID]
		if want := (depth > 0 || len(failures) > 0); found != want {
			t.Fatalf("%s in the summaries: %t, want %t (queue depth %d, %d failures)", d.Fingerprint, found, want, depth, len(failures))
		}
		if sum.QueueDepth != depth || !sameFailures(sum.Failures, failures) {
			t.Fatalf("%s: summary %+v, want queue depth %d and failures %+v, as asked one by one", d.Fingerprint, sum, depth, failures)
		}
	}
	if sum := got[busy.ID]; sum.QueueDepth < 3 || len(sum.Failures) != store.MaxDeviceFailures {
		t.Fatalf("%s: summary %+v, want its 3 queued SMS and its last %d failures", busy.Fingerprint, sum, store.MaxDeviceFailures)
	}
	if _, found := got[failing.ID]; !found {
		t.Fatalf("%s, with a failure and nothing waiting: absent, want it", failing.Fingerprint)
	}
	if _, found := got[waiting.ID]; !found {
		t.Fatalf("%s, with an SMS waiting and no failure: absent, want it", waiting.Fingerprint)
	}
	if len(got) != 3 {
		t.Fatalf("summaries: %d devices (%v), want the company's 3 with something to show", len(got), got)
	}

	if got, err := s.DeviceSummaries(b.ID, []uint64{busy.ID, failing.ID, waiting.ID}); err != nil || len(got) != 0 {
		t.Fatalf("another company's devices: %v (%v), want nothing", got, err)
	}
	if got, err := s.DeviceSummaries(b.ID, []uint64{others.ID}); err != nil || got[others.ID].QueueDepth != 1 || len(got[others.ID].Failures) != 1 {
		t.Fatalf("the other company's own device: %v (%v), want 1 waiting and 1 failure", got, err)
	}
	for _, ids := range [][]uint64{nil, {}} {
		if got, err := s.DeviceSummaries(a.ID, ids); err != nil || len(got) != 0 {
			t.Fatalf("summaries of %v: %v (%v), want none", ids, got, err)
		}
	}
}

// sameFailures says two lists of failures are the same, nil and empty alike.
func sameFailures(a, b []store.DeviceFailure) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.At.Equal(y.At) || x.Status != y.Status || x.Error != y.Error || x.QueueID != y.QueueID || x.Channel != y.Channel {
			return false
		}
	}
	return true
}

// summariesCountPriority: a device's queue depth counts its queued
// priority jobs beside its plain ones (a priority job is as much waiting
// for the phone); one the phone acked counts no more. Both stores counted
// the plain queue alone, so a device list showed 0 for a phone with only
// urgent jobs waiting.
func summariesCountPriority(t *testing.T, s DeviceSummariesStore) {
	a, _ := Company(t, s)
	d := Device(t, s, a.ID, "sum-prio")
	sendTo(t, s, a.ID, d.Fingerprint, "+15553100000", T0, time.Time{})
	var prio []store.Message
	for i := range 3 {
		m := store.Message{UUID: fmt.Sprintf("ds-%d", unique()), CompanyID: a.ID, Device: d.Fingerprint, SIMSlot: "SIM1", Channel: "sms",
			Phone: fmt.Sprintf("+155531000%02d", i+1), Text: "code", Priority: 9}
		out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		prio = append(prio, out)
	}
	if _, _, err := s.Transition(a.ID, d.ID, prio[0].UUID, store.MsgSending, "", "", T0); err != nil {
		t.Fatal(err)
	}
	if n, err := s.QueueDepth(a.ID, d.ID); err != nil || n != 3 {
		t.Fatalf("queue depth: %d (%v), want 3: one plain job and two priority jobs waiting", n, err)
	}
	if got, err := s.DeviceSummaries(a.ID, []uint64{d.ID}); err != nil || got[d.ID].QueueDepth != 3 {
		t.Fatalf("summaries: %+v (%v), want a queue depth of 3", got, err)
	}
}
